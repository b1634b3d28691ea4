#ifndef ZBPP_SCHEDULER_ZB_AUTO_H_
#define ZBPP_SCHEDULER_ZB_AUTO_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// Options of the automatic zero-bubble solver.
struct AutoSolverOptions {
  /// Where virtual stages live. kLoop with v == 1 gives ZB-1p/ZB-2p (kLoop
  /// with v >= 2 is accepted too); kV (needs v == 2) gives ZB-V-style
  /// schedules, and V-Half / V-Min under their smaller limits.
  Placement placement = Placement::kLoop;
  /// Run the refinement after the greedy search. The refinement only keeps
  /// changes that the simulator's semantics say shorten the makespan (or,
  /// at equal makespan, the other stages' spans), so the result is never
  /// worse than the greedy one.
  bool refine = true;
  /// Work bound of the refinement, in candidate evaluations (each costs one
  /// pass over all N = 3·p·v·m passes). 0 chooses it from the problem
  /// size: about 4.4·10^7 / N^1.5 up to N = 4096, shrinking like N^-3
  /// beyond, at least 4 and at most 20000 (a few ms for small pipelines,
  /// where search pays off most; 6 evaluations, about 0.3 ms, at p = 32,
  /// m = 128, v = 1). Deterministic: the result never depends on the
  /// machine's speed.
  int64_t refine_evaluations = 0;
};

/// The automatic scheduler of the Zero Bubble paper (§3.1): a greedy list
/// scheduler over per-virtual stage heterogeneous costs with the activation memory
/// limit of `problem.memory_limit_bytes` (none when empty), searched over
/// the paper's binary choices, then refined (see AutoSolverOptions::refine).
///
/// Candidates: the paper's round-based greedy under its 8 binary choices
/// (kLoop, v == 1; those with fill_partial_gaps only where shorter than
/// every other candidate), so never worse than the Zero Bubble authors'
/// own greedy; an event-driven list scheduler (every placement; under 8
/// choices for kLoop with v >= 2, its default ones otherwise), ZB-H1 and
/// ZB-H2 when they fit the limit (kLoop, v == 1);
/// for kV a round-based V greedy (zb_greedy.h, VRoundGreedy) under its 4
/// choices, ZB-V's pattern and, where that does not fit, the V building
/// blocks of Qi et al. (arXiv 2405.15362) of the largest pace that fits,
/// plain and squeezed. Problems of 2^18 passes and more get fewer variants
/// (so that p = 128, m = 1024 solves in about a second). The shortest is
/// refined by local search over W placement and pass order and, for kLoop
/// with v == 1, by a search over each virtual stage's warm-up depth; with
/// the budget left, the next three distinct candidates (constructions that
/// build the same orders count once) by local search too, then the best
/// by iterated local search. The result respects the
/// limit on every stage, is deadlock-free and complete; any m >= 1 is
/// served.
///
/// Errors: InvalidArgument for a bad problem or a placement/chunks
/// mismatch (kV needs v == 2); ResourceExhausted, naming the stage, when
/// a stage's limit is below one microbatch's activations on it (for kV:
/// the M_B of both of its chunks). Thread-safe (pure).
absl::StatusOr<Schedule> SolveZeroBubble(const Problem& problem,
                                         const AutoSolverOptions& options);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_ZB_AUTO_H_
