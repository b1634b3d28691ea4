#ifndef ZBPP_SCHEDULER_ZB_GREEDY_H_
#define ZBPP_SCHEDULER_ZB_GREEDY_H_

// Internal to the automatic solvers: the greedy list schedulers of the Zero
// Bubble paper (§3.1 for one chunk per stage, §6 for the V placement). Each
// builds per-stage orders pass by pass, timing every pass as it is appended,
// so the times it reasons with are those the simulator will compute. Each
// respects model.Limit on every stage by construction and, when `spans` is
// set, also returns every stage's span (first start to last end, seconds)
// exactly as Evaluator::Run would, sparing the caller an evaluation.

#include <limits>
#include <vector>

#include "scheduler/zb_orders.h"

namespace zbpp::sched::internal {

/// The binary choices the paper searches exhaustively (§3.1). Every
/// combination is a different greedy; the shortest result is kept.
struct GreedyChoices {
  /// Warm-up: count only the F's that end before the first B can arrive
  /// (true), or also the one that overruns it (false).
  bool bubble_before_first_b = false;
  /// Steady state: a virtual stage two or more F's ahead of the next one may skip
  /// its F so that the next B is not delayed.
  bool favour_b = false;
  /// A W goes into a gap shorter than T_W even when idling through the gap
  /// would not make this stage the one with the largest bubble.
  bool fill_partial_gaps = false;
  /// When not empty (size p): the number of F's each virtual stage runs before its
  /// first B, instead of the warm-up rule's estimate. Clamped to [1, m] and
  /// to memory. Used by the refinement to search over warm-up depth.
  std::vector<int> warmup;
  /// Seconds: give up (return false) as soon as some stage's span is
  /// bound to exceed this (its idle time so far plus all of its passes'
  /// seconds), so that a search looking only for a shorter makespan does
  /// not finish runs that cannot give one. Infinity: never.
  double abandon_above = std::numeric_limits<double>::infinity();
};

/// The paper's greedy for one chunk per stage (Placement::kLoop, v == 1):
/// warm-up F's bounded by memory and by the first B's arrival, steady
/// 1F-1B with W's in the gaps, leftover W's at the end. Under each of its
/// choices it builds the same orders as the Zero Bubble authors' published
/// greedy (`manual_order` in their zb.py). Respects model.Limit on every
/// stage. Returns false when the limit leaves no feasible move (e.g. it
/// cannot hold one F's activations) or on choices.abandon_above. `trace`
/// (may be null) receives what the run says about its twins (also when it
/// gives up: up to there).
/// What a LoopGreedy run tells about the runs under other choices.
struct LoopGreedyTrace {
  /// favour_b made a virtual stage skip its F at least once. When false (with
  /// favour_b set), the run without favour_b builds the same orders.
  bool favour_b_decided = false;
  /// Without fill_partial_gaps: a W was left out of a gap shorter than
  /// T_W that fill_partial_gaps would have filled. When false, the run
  /// with fill_partial_gaps builds the same orders.
  bool partial_gap_left = false;
};

bool LoopGreedy(const PassModel& model, const GreedyChoices& choices,
                Orders* orders, std::vector<double>* spans = nullptr,
                LoopGreedyTrace* trace = nullptr);

/// The number of extra F's (beyond microbatch 0) each virtual stage runs before its
/// first B in LoopGreedy under `choices`, the only use of
/// bubble_before_first_b and choices.warmup: two choices that differ only
/// there and give equal warm-ups build the same orders. Empty when a virtual stage
/// cannot hold one F.
std::vector<int> LoopGreedyWarmup(const PassModel& model,
                                  const GreedyChoices& choices);

/// Choices of the event-driven list scheduler (ListGreedy).
struct ListChoices {
  /// Do not start an F when a B is known to arrive before the F would end:
  /// wait for the B (filling the wait with W's).
  bool favour_b = true;
  /// As GreedyChoices::fill_partial_gaps.
  bool fill_partial_gaps = false;
  /// When two B's are ready, run the one of the later virtual stage (the
  /// backward that has further to go) instead of the one that arrived
  /// first.
  bool later_virtual_stage_first = false;
};

/// An event-driven list scheduler for any placement (used for the V
/// placement, §6, and as extra candidates for kLoop): each stage, when it
/// is free or an input arrives, runs a ready B (the backward is what
/// upstream virtual stages wait for), else a ready F of the virtual stage closest
/// to the loss, else waits; W's fill the gaps by the §3.1 rules and run
/// whenever memory must be released. An F that starts a microbatch on a
/// stage holding several virtual stages keeps room for one activation of
/// its later virtual stage, so the forward can always reach the loss (no memory
/// deadlock). Respects model.Limit; returns false when a stage cannot
/// hold one microbatch's activations.
bool ListGreedy(const PassModel& model, const ListChoices& choices,
                Orders* orders, std::vector<double>* spans = nullptr);

/// Choices of the round-based V greedy (VRoundGreedy): whether a W may go
/// into a gap shorter than T_W (by the §3.1 rule, see GreedyChoices::
/// fill_partial_gaps) before an F, and before a B of a stage's second
/// chunk (the backward that runs from the loss towards stage p-1). Before
/// a B of the first chunk it always may.
struct VRoundChoices {
  bool fill_before_f = true;
  bool fill_before_second_b = true;
};

/// A round-based greedy for the V placement (Zero Bubble paper §6; the
/// search the paper's authors publish for ZB-V runs such rounds): warm-up
/// F's of the first chunk as deep as memory and the second chunk's first
/// arrival allow (the upper stages deepened together, so the forward stays
/// aligned), the second chunk's F's interleaved until each stage holds at
/// least as many as the one above; then rounds of one B per stage (first
/// the first chunk's, from stage p-1 up, then the second chunk's, from
/// stage 0 down) and one F per stage, W's filling the gaps by the §3.1
/// rules under `choices`, leftovers at the end. `allowance` (size p or
/// empty) is passed to the gap rule as each stage's bubble allowance: a
/// second run given max(bubbles) - bubbles of a first one (see `bubbles`)
/// leaves alone the stages that will idle anyway. Respects model.Limit.
/// Returns false when the placement is not kV or the rounds cannot place
/// every pass within memory. When set, `bubbles` receives each stage's idle
/// seconds between its first and last pass.
bool VRoundGreedy(const PassModel& model, const VRoundChoices& choices,
                  const std::vector<double>& allowance, Orders* orders,
                  std::vector<double>* spans = nullptr,
                  std::vector<double>* bubbles = nullptr);

/// Keeps the order of the F's and B's of `orders` on every stage and
/// places the W's anew by the §3.1 rules (into the gaps the real costs leave,
/// and when memory must be released before an F), with the leftovers at the
/// end. Adapts a pattern built for unit pass times (ZB-H1, the V building
/// blocks) to heterogeneous costs. Memory never exceeds that of `orders`
/// on any stage, so a candidate within the limit stays within it. Returns
/// false when `orders` is not first-in first-out per (pass, virtual stage) or
/// deadlocks.
bool RetimeW(const PassModel& model, const Orders& orders,
             bool fill_partial_gaps, Orders* retimed,
             std::vector<double>* spans = nullptr);

}  // namespace zbpp::sched::internal

#endif  // ZBPP_SCHEDULER_ZB_GREEDY_H_
