#ifndef ZBPP_SCHEDULER_ZB_V_H_
#define ZBPP_SCHEDULER_ZB_V_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// The V-placed schedules: two chunks per stage, stage d holding virtual
/// stages d and 2p-1-d (Placement::kV).
enum class VShape {
  kZbV,   ///< ZB-V (Zero Bubble paper §6): 1F1B's memory, zero bubble.
  kHalf,  ///< V-Half (Qi et al., arXiv 2405.15362): about 1/2 of it.
  kMin,   ///< V-Min (same paper): about 1/3 of it.
};

/// The activation memory limit per stage, in units of M_B (one
/// microbatch's activations over both chunks of a stage), that `shape`
/// plans for with p stages: ZB-V p (1F1B's peak); V-Half floor((p+2)/2);
/// V-Min floor((p+4)/3). The last two are the peaks of the controllable-
/// memory paper's building blocks (arXiv 2405.15362, §4, table "activation
/// memory by #microbatch") when W holds all of M_B; with M_W < M_B the
/// blocks need less. p <= 0 gives 0.
double VShapeLimitMb(VShape shape, int stages);

/// Builds a V schedule for `problem` (v must be 2) with the automatic
/// solver (SolveZeroBubble, Placement::kV) under
/// `problem.memory_limit_bytes` when set, else VShapeLimitMb(shape, p)
/// times each stage's M_B. Serves every m >= 1; with uniform costs,
/// T_comm = 0 and m >= 2p, ZB-V has no bubble. Errors: InvalidArgument
/// when v != 2 or the problem is invalid; ResourceExhausted when a stage's
/// limit is below one microbatch's activations on it. Thread-safe (pure).
absl::StatusOr<Schedule> GenerateVSchedule(const Problem& problem,
                                           VShape shape);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_ZB_V_H_
