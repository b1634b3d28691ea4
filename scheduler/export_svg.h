#ifndef ZBPP_SCHEDULER_EXPORT_SVG_H_
#define ZBPP_SCHEDULER_EXPORT_SVG_H_

#include <string>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {

/// A self-contained SVG Gantt chart of a simulated schedule: one row per
/// worker, time to the right, one box per action labelled with its
/// microbatch and coloured by pass as in the paper's figures, idle time
/// left blank; a title with the schedule name, makespan and bubble rate.
/// When the schedule holds reductions (PassKind::kReduce), each worker's
/// row gets a lower communication row under it where they are drawn, grey,
/// since they overlap the passes.
std::string ToSvg(const Schedule& schedule, const SimulationResult& result);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_EXPORT_SVG_H_
