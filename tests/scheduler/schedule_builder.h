#ifndef ZBPP_TESTS_SCHEDULER_SCHEDULE_BUILDER_H_
#define ZBPP_TESTS_SCHEDULER_SCHEDULE_BUILDER_H_

#include <string>
#include <vector>

#include "scheduler/schedule.h"

namespace zbpp::sched::testing {

/// A schedule named `name` built by hand from action texts ("0F0", "1I3",
/// ...), one list per stage, with virtual stages placed by `placement`. Tests use
/// it to state expected schedules without going through a parser under
/// test. Aborts the test binary on a malformed text (a bug in the test).
inline Schedule ScheduleFromRows(
    const std::string& name, int stages, int chunks, int microbatches,
    Placement placement, const std::vector<std::vector<std::string>>& rows) {
  Schedule schedule;
  schedule.name = name;
  schedule.stages = stages;
  schedule.chunks = chunks;
  schedule.microbatches = microbatches;
  schedule.stage_of = PlaceVirtualStages(placement, stages, chunks);
  for (const auto& row : rows) {
    std::vector<Action>& list = schedule.actions.emplace_back();
    for (const std::string& text : row) list.push_back(ParseAction(text).value());
  }
  return schedule;
}

}  // namespace zbpp::sched::testing

#endif  // ZBPP_TESTS_SCHEDULER_SCHEDULE_BUILDER_H_
