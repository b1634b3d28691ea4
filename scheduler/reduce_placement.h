#ifndef ZBPP_SCHEDULER_REDUCE_PLACEMENT_H_
#define ZBPP_SCHEDULER_REDUCE_PLACEMENT_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// Where the data-parallel gradient reductions (PassKind::kReduce, one per
/// virtual stage) go in a schedule.
enum class ReducePlacement {
  /// Every reduction after the worker's last pass, as the Zero Bubble
  /// authors' runtime reduces after the schedule.
  kAfterSchedule,
  /// Each right after its stage's last W (or BW), as PyTorch pipelining
  /// inserts REDUCE_GRAD.
  kAfterLastBackward,
  /// zbpp's: the solver reorders W passes (holding some back, within the
  /// memory limit) and places the reductions so that they finish under the
  /// remaining work; the simulator decides, and the result is never slower
  /// than kAfterLastBackward.
  kSolved,
};

/// "after-schedule", "after-last-backward", "solved".
std::string_view ReducePlacementName(ReducePlacement placement);

/// Parses ReducePlacementName's text; InvalidArgument listing the choices.
absl::StatusOr<ReducePlacement> ParseReducePlacement(std::string_view text);

/// `schedule` with one kReduce per virtual stage added at `placement`,
/// timed by `problem`'s StageCost::reduce_seconds.
///
/// Errors: InvalidArgument when `schedule` already holds reductions; those
/// of CheckSchedule. Pure; thread-safe.
absl::StatusOr<Schedule> PlaceReductions(const Problem& problem, const Schedule& schedule,
                                         ReducePlacement placement);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_REDUCE_PLACEMENT_H_
