#ifndef ZBPP_SCHEDULER_LAYOUT_SEARCH_H_
#define ZBPP_SCHEDULER_LAYOUT_SEARCH_H_

#include <vector>

namespace zbpp::sched {

/// What a layout search balances: the work of one transformer block and the
/// fixed work of each virtual stage besides its blocks (the LM head, the
/// final norm and the loss on the last; the embedding on the first), in
/// seconds of compute per microbatch (T_F + T_B + T_W), and the stage
/// that runs each virtual stage (PlaceVirtualStages, schedule.h).
struct LayoutWork {
  /// stage_of[k]: the stage of virtual stage k; its size is the number of
  /// virtual stages n.
  std::vector<int> stage_of;
  /// T_F + T_B + T_W of one block, seconds; > 0.
  double block_seconds = 1.0;
  /// extra_seconds[k]: virtual stage k's work besides its blocks, seconds
  /// (>= 0); size n.
  std::vector<double> extra_seconds;
};

/// The most even split of `blocks` over `n` virtual stages: blocks / n
/// each, the first blocks mod n one more. Requires n >= 1. Pure.
std::vector<int> MostEvenLayout(int blocks, int n);

/// Each stage's work per microbatch under `layout` (blocks per virtual
/// stage, size n): the sum over its virtual stages of blocks ·
/// block_seconds + extra_seconds. Size: the largest stage_of + 1. Pure.
std::vector<double> StageWork(const LayoutWork& work, const std::vector<int>& layout);

/// Layouts of `blocks` blocks (every virtual stage >= 1 block; requires
/// blocks >= n) worth simulating, best first by the balance of the
/// stages' work: the layout a steepest-descent search reaches from
/// MostEvenLayout, moving one block at a time between virtual stages of
/// different stages and ordering layouts by (largest stage work, then the
/// sum of the squares of the stages' work), followed by its one-move
/// neighbours in the same order; at most `max_layouts` (>= 1) of them.
///
/// In a pipeline whose microbatches keep every stage busy the step is
/// about m times the largest stage's work (the Zero Bubble paper's §3
/// steady state), which is what this balances; the warm-up and cool-down
/// differ between layouts of equal balance, so the caller simulates the
/// layouts returned and keeps the best (coordinator/core/planning.h,
/// ChooseLayout). At most n² work evaluations per move and at most
/// `blocks` · n moves. Pure.
std::vector<std::vector<int>> BalancedLayouts(int blocks, const LayoutWork& work,
                                              int max_layouts);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_LAYOUT_SEARCH_H_
