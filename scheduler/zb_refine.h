#ifndef ZBPP_SCHEDULER_ZB_REFINE_H_
#define ZBPP_SCHEDULER_ZB_REFINE_H_

// Internal to the automatic solvers: local search over per-stage pass
// orders. It plays the role of the paper's ILP refinement (§3.1): it starts
// from the greedy's result and only ever accepts a candidate that the
// evaluator (the simulator's semantics) says is better, so it is never
// worse than its start. Its work is bounded by a count of evaluations, so a
// result never depends on the machine's speed.

#include <cstdint>
#include <random>
#include <vector>

#include "scheduler/zb_orders.h"

namespace zbpp::sched::internal {

/// The quality of a candidate, compared "leximax": the largest per-stage
/// span first (the paper's cost), then the second largest, and so on. The
/// tail breaks ties so that the search can move along plateaus of equal
/// makespan without cycling.
class Leximax {
 public:
  /// The worst value: anything complete and within memory beats it.
  static Leximax Worst();
  /// From the last Run of `evaluator` that returned `cost`.
  static Leximax Of(const Evaluator& evaluator, const OrderCost& cost);
  /// From the per-stage spans of a complete candidate within memory.
  static Leximax OfSpans(std::vector<double> spans);

  double makespan() const { return spans_.empty() ? 0 : spans_.front(); }
  /// Strictly better, with a relative slack of 1e-9 per entry.
  bool BetterThan(const Leximax& other) const;

 private:
  std::vector<double> spans_;  // descending; empty means infeasible
};

/// Local search over pass orders. Moves, tried first-improvement:
///  * into each idle gap of a stage, pull one of its next few passes
///    (a W that fits the gap, or an F or B that is ready sooner);
///  * for the pass after a gap, move the pass it waits for (on another
///    stage) a few places earlier;
///  * when those are exhausted: for the pass after a gap, follow its chain
///    of inputs back over the stages and, on every stage where a W held
///    the chain back, move that W's slot later (to the stage's next idle
///    gap or pair of adjacent B's, the W's of its virtual stage keeping
///    first-in first-out order), all in one candidate;
///  * when those are exhausted too and the budget allows, every swap of two
///    adjacent passes.
/// Keeps F before B before W of each (virtual stage, microbatch), first-in
/// first-out order among passes of one kind and virtual stage, and each stage's
/// memory limit; rejects deadlocked candidates.
///
/// `orders` must be complete and within memory. Runs until no move
/// improves or `*evaluations` is spent (decremented per candidate).
/// Returns the leximax of the result. Not thread-safe (uses `evaluator`).
Leximax Polish(const PassModel& model, Evaluator& evaluator, Orders* orders,
               int64_t* evaluations);

/// A step of iterated local search: `moves` random legal moves (as Polish
/// makes them, chosen by `random`), which may make the orders worse, then
/// Polish. Returns the leximax of the result (Leximax::Worst() when the
/// kicked orders deadlock or break memory and Polish cannot start).
/// Deterministic for a given state of `random`. Not thread-safe.
Leximax Kick(const PassModel& model, Evaluator& evaluator, Orders* orders,
             int moves, std::mt19937& random, int64_t* evaluations);

}  // namespace zbpp::sched::internal

#endif  // ZBPP_SCHEDULER_ZB_REFINE_H_
