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
  /// Every reduction after the stage's last pass, as the Zero Bubble
  /// authors' runtime reduces after the schedule.
  kAfterSchedule,
  /// Each right after its virtual stage's last W (or BW), as PyTorch pipelining
  /// inserts REDUCE_GRAD.
  kAfterLastBackward,
  /// zbpp's: the solver reorders W passes (holding some back, within the
  /// memory limit), splits the last ones and their virtual stage's reduction into
  /// gradient buckets where that helps, and places the reductions so that
  /// they finish under the remaining work; the simulator decides, and the
  /// result is never slower than kAfterLastBackward.
  kSolved,
};

/// Seconds of a ring all-reduce of `bytes` over `replicas` (d) data-parallel
/// replicas at `bytes_per_second` per link: 2(d-1)/d * bytes / bandwidth,
/// each replica sending and receiving 2(d-1)/d of the buffer (reduce-scatter
/// then all-gather). 0 when d = 1. Latency is not modelled. Requires
/// replicas >= 1 and bytes_per_second > 0.
double RingAllReduceSeconds(double bytes, int replicas, double bytes_per_second);

/// "after-schedule", "after-last-backward", "solved".
std::string_view ReducePlacementName(ReducePlacement placement);

/// Parses ReducePlacementName's text; InvalidArgument listing the choices.
absl::StatusOr<ReducePlacement> ParseReducePlacement(std::string_view text);

/// `schedule` with one kReduce per virtual stage (kSolved: or one per
/// gradient bucket, with the partial W passes they follow) added at
/// `placement`, timed by `problem`'s VirtualStageCost::reduce_seconds (see
/// Simulate for how a reduction runs: issued where it stands, on the
/// stage's communication timeline, one at a time).
///
/// kAfterSchedule appends each stage's reductions after its last pass, in
/// the order of their virtual stages' last W or BW; kAfterLastBackward puts each
/// right after its virtual stage's last W or BW, the earliest it can be issued.
///
/// kSolved. Issuing a reduction as early as possible is best for a given
/// order of passes (one communication queue, served in issue order), so
/// the solver only changes the order of W passes, which no other stage
/// waits for (Zero Bubble paper §2: W has no successor but the optimizer),
/// and keeps every other pass in its order. Two moves, on a stage holding
/// two or more virtual stages (ZB-V, interleaved placements), for a virtual stage
/// s: hold back the last k W passes of the stage's other virtual stages that
/// precede s's last W, putting them right after it, so that s's W passes
/// end earlier and its reduction overlaps the held-back work (at the price
/// of holding their M_W longer); and pull all of s's W passes after an F or
/// B that follows s's last B to right before it, so that they jump a pass
/// waiting for another stage. Each stage is solved alone against the
/// after-last-backward simulation: its passes are re-timed with the
/// arrivals from other stages fixed, and a move is kept only if no F or B
/// starts later than it did there (so no other stage is delayed and the
/// estimate bounds the real step from above) and the stage's peak memory
/// stays within problem.limit_of(stage), or within the input's peak where
/// that already exceeds it. Greedy: each round tries every move and applies
/// the best, up to one round per virtual stage the stage holds; k stops once the
/// held-back work exceeds the stage's reductions plus one pass. The goal
/// is the stage's end (its last pass or reduction) measured from its first
/// start, counted no lower than the makespan the passes alone set (a
/// reduction that ends within it is hidden already); ties go to the
/// smallest move. The result is simulated and replaced by
/// kAfterLastBackward's if its makespan or step would be longer, so it
/// never is.
///
/// Then the bucket phase: on a stage with one virtual stage (1F1B, ZB-H1/H2,
/// ZB-1p/2p) every W of the virtual stage precedes its whole reduction, and on a
/// stage with several the last of its reductions still follows its last
/// W, so whole reductions leave that one exposed. Split into K gradient
/// buckets (PassKind in scheduler/schedule.h) it need not be: the virtual stage's
/// last W passes run bucket by bucket, each bucket's reduction issued as
/// soon as its partial W passes end, so all but the last bucket's reduction
/// overlap the W work after it. On the stage that sets the makespan (the
/// one with the most exposed reduction), for each of its virtual stages, K in
/// {2, 4} and 1, 2, ... held W passes (while one more still shortens the
/// makespan, and their work stays below the reduction plus one W), the
/// simulator times the result; the best change that shortens the step
/// within the memory bound is kept, and the phase repeats on the next
/// critical stage. What remains exposed is at least the last bucket's
/// reduction (R/K) and, where the held W work is shorter than the
/// reduction, the difference; fused BW passes (1F1B, interleaved 1F1B) are
/// not split. The search of the W-order phase takes one
/// move at a time, so a reduction can stay partly exposed where hiding it
/// needs two at once; e.g. ZB-V, p = 4, m = 8, every pass 1 s, 3 s
/// reductions on virtual stages p..2p-1 only: 1 s stays exposed (2 s after the last
/// backward). Cost: O(passes * reduce_seconds / T_W) pass timings per
/// stage, plus a few simulations per virtual stage of the critical stages; under
/// 50 ms on every row of bench/dp_bench.
///
/// Errors: InvalidArgument when `schedule` already holds reductions, or for
/// kSolved vocabulary passes (PassKind::kS, kT: the solver times a stage
/// alone, which they do not allow; AddVocabularyPasses takes a schedule
/// with reductions); those
/// of Problem::Validate and CheckSchedule; for kSolved, FailedPrecondition
/// when `schedule` deadlocks (Simulate). Pure; thread-safe.
absl::StatusOr<Schedule> PlaceReductions(const Problem& problem, const Schedule& schedule,
                                         ReducePlacement placement);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_REDUCE_PLACEMENT_H_
