#ifndef ZBPP_SCHEDULER_EXPORT_TRACE_H_
#define ZBPP_SCHEDULER_EXPORT_TRACE_H_

#include <string>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {

/// Chrome trace-event JSON of a simulated schedule (opens in Perfetto and
/// chrome://tracing): one thread row per stage, one complete ("X") event
/// per action named in its text form, timestamps in microseconds, and
/// colours as in the Zero Bubble paper's figures (F blue, B green, W teal,
/// fused BW their mix; the vocabulary passes S orange, T purple). Reductions (PassKind::kReduce) go on a second
/// thread per stage, "stage W comm" (tid p + W), in grey.
std::string ToChromeTrace(const Schedule& schedule,
                          const SimulationResult& result);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_EXPORT_TRACE_H_
