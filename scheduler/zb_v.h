#ifndef ZBPP_SCHEDULER_ZB_V_H_
#define ZBPP_SCHEDULER_ZB_V_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// The V-placed schedules: two chunks per worker, worker d holding virtual
/// stages d and 2p-1-d (Placement::kV).
enum class VShape {
  kZbV,   ///< ZB-V (Zero Bubble paper §6): 1F1B's memory, zero bubble.
  kHalf,  ///< V-Half (Qi et al., arXiv 2405.15362): about 1/2 of it.
  kMin,   ///< V-Min (same paper): about 1/3 of it.
};

/// The activation memory limit per worker, in units of M_B (one
/// microbatch's activations over both chunks of a worker), that `shape`
/// plans for with p workers.
double VShapeLimitMb(VShape shape, int workers);

/// Builds a V schedule for `problem` (v must be 2). Uses
/// `problem.memory_limit_bytes` when set, else VShapeLimitMb(shape, p).
/// Errors: InvalidArgument when v != 2; ResourceExhausted when the limit
/// cannot hold what one microbatch needs.
absl::StatusOr<Schedule> GenerateVSchedule(const Problem& problem,
                                           VShape shape);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_ZB_V_H_
