#ifndef ZBPP_SCHEDULER_SCHEDULE_IO_H_
#define ZBPP_SCHEDULER_SCHEDULE_IO_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {

/// CSV as torchtitan loads it: one row per worker, one action per cell in
/// the text form of ActionToString (`0F0,0F1,0I0,0W0,...`). Rows may have
/// different lengths; nothing else is written.
std::string ScheduleToCsv(const Schedule& schedule);

/// Parses ScheduleToCsv's form. The CSV carries only actions, so the caller
/// says how virtual stages are placed; p is the number of rows, v and m are
/// inferred (largest stage + 1 over p, largest microbatch + 1). Errors:
/// InvalidArgument naming the row, the cell and why.
absl::StatusOr<Schedule> ScheduleFromCsv(std::string_view csv,
                                         Placement placement);

/// JSON object {"name", "workers", "chunks", "microbatches",
/// "worker_of_stage": [..], "actions": [["0F0", ...], ...]}.
std::string ScheduleToJson(const Schedule& schedule);

/// Parses ScheduleToJson's form. Errors: InvalidArgument naming the field.
absl::StatusOr<Schedule> ScheduleFromJson(std::string_view json);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_SCHEDULE_IO_H_
