#ifndef ZBPP_SCHEDULER_ZB_AUTO_H_
#define ZBPP_SCHEDULER_ZB_AUTO_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// Options of the automatic zero-bubble solver.
struct AutoSolverOptions {
  /// Where virtual stages live. kLoop with v == 1 gives ZB-1p/ZB-2p; kV
  /// (needs v == 2) gives ZB-V-style schedules.
  Placement placement = Placement::kLoop;
  /// Run the refinement after the greedy search. The refinement only keeps
  /// changes that the simulator says shorten the makespan, so the result is
  /// never worse than the greedy one.
  bool refine = true;
};

/// The automatic scheduler of the Zero Bubble paper (§3.1): a greedy list
/// scheduler over per-stage heterogeneous costs with the activation memory
/// limit of `problem.memory_limit_bytes` (none when empty), searched over
/// the paper's binary choices, then refined (see AutoSolverOptions::refine).
/// The result respects the limit on every worker, is deadlock-free and
/// complete.
///
/// Errors: InvalidArgument for a bad problem or placement/chunks mismatch;
/// ResourceExhausted when a worker's limit is below what one microbatch
/// needs. Thread-safe (pure).
absl::StatusOr<Schedule> SolveZeroBubble(const Problem& problem,
                                         const AutoSolverOptions& options);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_ZB_AUTO_H_
