#ifndef ZBPP_SCHEDULER_VOCABULARY_PASSES_H_
#define ZBPP_SCHEDULER_VOCABULARY_PASSES_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// `schedule` with vocabulary parallelism (Yeung et al., "Balancing Pipeline
/// Parallelism with Vocabulary Parallelism", MLSys 2025; PassKind in
/// scheduler/schedule.h): one S and one T of every microbatch inserted into
/// every stage's order, the other actions kept in their order.
///
/// `problem` carries the vocabulary costs (Problem::vocabulary, one entry per
/// stage) and the last virtual stage's cost without the LM head;
/// `schedule` holds F, B, W, BW and maybe REDUCE_GRAD actions, no S or T
/// (any registry schedule, with or without PlaceReductions' reductions).
///
/// The paper inserts its passes into 1F1B and V-Half by hand; this is a
/// simulation-driven insertion that serves every schedule:
///  1. Initial placement: `schedule` is simulated without the vocabulary
///     (the last virtual stage's B then needs only its own F); on every
///     stage, S_j then T_j go right before the first pass that starts at or
///     after the end of F of the last virtual stage for microbatch j, the
///     earliest the paper's S can run. Every dependency then points forward
///     in that simulated time, so the result cannot deadlock.
///  2. Greedy, in microbatch order, S_j then T_j, stage by stage: the pass
///     moves to the earliest position whose simulated start is at or after
///     its inputs' arrival (F of the last virtual stage for S, every
///     stage's S for T, one hop of comm_seconds from another stage); the
///     move is kept when the step is not longer.
///  3. Local refinement: each S and T tries one position earlier and one
///     later, kept when the makespan drops; up to three rounds, stopping at
///     a round that changes nothing.
/// Every kept move simulates without deadlock, passes CheckPairOrders on
/// DerivePairOrders' orders and keeps every stage's peak
/// (SimulationResult::peak_memory_bytes, S's VocabularyCost::m_bytes
/// counted until its T) within problem.limit_of(stage) on the stages where
/// `schedule`'s own peak was (moves that lower a peak above the limit are
/// kept too, for the placement of step 1 to reach it). As the paper
/// observes, the last virtual stage's B of a microbatch now waits for T of every
/// stage, about T_S + T_T + 2·comm_seconds more than after its own F on a
/// critical path, in exchange for the head's work divided over p stages.
///
/// Cost: O(R · p · m) candidate moves (R <= 3 refinement rounds plus the
/// greedy pass), each one simulation and one pair-order derivation and
/// check, O(n log n) for n actions. Errors: InvalidArgument when
/// `problem.vocabulary` is empty or `schedule` already holds an S or T
/// (naming it); those of Problem::Validate, CheckSchedule and Simulate (on
/// `problem` without its vocabulary); ResourceExhausted naming the stage
/// when no placement found keeps a stage within its memory limit that
/// `schedule` kept; FailedPrecondition if the initial placement deadlocks
/// (possible only with zero-second passes, whose simulated times tie).
/// Pure; thread-safe.
absl::StatusOr<Schedule> AddVocabularyPasses(const Problem& problem, const Schedule& schedule);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_VOCABULARY_PASSES_H_
