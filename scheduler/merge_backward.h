#ifndef ZBPP_SCHEDULER_MERGE_BACKWARD_H_
#define ZBPP_SCHEDULER_MERGE_BACKWARD_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// The automatic solvers' last step: moves W passes next to their B, where
/// the pair then runs as one merged backward of T_BW (MergesWithNext), when
/// that does not lengthen the step. For each stage in order and each B in its
/// list whose whole W is not next to it, the W is moved right after the B and
/// the move is kept when the simulated makespan does not grow, every stage's
/// peak stays within `problem`'s memory limit and the pair orders stay
/// deadlock-free (CheckPairOrders over DerivePairOrders); otherwise it is
/// undone. Moving a W earlier only frees its M_W earlier, so peaks never
/// rise. A merge helps only where VirtualStageCost::bw_seconds is below
/// T_B + T_W (by more than a relative 1e-9): when no virtual stage's is,
/// `schedule` comes back unchanged,
/// so every makespan without a measured T_BW stays what it was. The result's
/// makespan is never above `schedule`'s.
///
/// Cost: one simulation and one pair-order derivation per candidate move,
/// O(actions²) in all. Errors: the simulator's for a schedule it refuses.
/// Pure.
absl::StatusOr<Schedule> MergeBackwards(const Problem& problem, Schedule schedule);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_MERGE_BACKWARD_H_
