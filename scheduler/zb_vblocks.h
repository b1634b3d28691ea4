#ifndef ZBPP_SCHEDULER_ZB_VBLOCKS_H_
#define ZBPP_SCHEDULER_ZB_VBLOCKS_H_

// Internal to the V solvers: the building blocks of "Pipeline Parallelism
// with Controllable Memory" (Qi et al., arXiv 2405.15362, §3-4). With unit
// pass times, stage w runs the six passes of microbatch j (F and B of both
// of its chunks, and the two W's) at fixed slot offsets plus 6j, so the
// steady state has no bubble; the offsets fix how long each activation
// lives, hence the memory. The pattern only fixes each stage's order;
// real, heterogeneous costs are then timed by the evaluator.

#include <vector>

#include "scheduler/zb_orders.h"

namespace zbpp::sched::internal {

/// Idle slots added at the three turns of the V: on stage p-1 from the
/// first chunk's F to the second's, on stage 0 from the second chunk's F
/// to its B (the loss), and on stage p-1 from the second chunk's B to the
/// first's.
struct VTurnDelays {
  int top = 0;
  int bottom = 0;
  int back = 0;
};

/// Every turn-delay triple, by increasing total up to `max_extra` slots
/// beyond the smallest, that keeps the four F/B passes of every stage in
/// distinct slots modulo 6 for `pace` (see VBlockOrders). Empty when none
/// exists within 3*6 slots.
std::vector<VTurnDelays> VTurnDelayOptions(int stages, int pace,
                                           int max_extra);

/// Per-stage orders of a V building block repeated over the model's
/// microbatches. `pace` is the number of slots between the first chunk's F
/// on stage w and on stage w+1, and the same for the second chunk's B; the
/// other two passes travel one slot per stage. Pace 1 gives the shortest
/// activation lifespans (V-Min, about 1/3 of 1F1B's memory), pace 2 about
/// 1/2 (V-Half). Each W takes the first free slot after its B.
///
/// Needs the V placement (two virtual stages per stage, PlaceVirtualStages kV)
/// and `delays` from VTurnDelayOptions(p, pace, ...).
Orders VBlockOrders(const PassModel& model, int pace,
                    const VTurnDelays& delays);

/// VBlockOrders with the building block's warm-up and cool-down compacted
/// ("squeezing", Qi et al., arXiv 2405.15362, §4): with unit pass times,
/// every pass before the first microbatch's backward reaches stage 0 and
/// every pass after stage 0's last first-chunk F moves to the earliest
/// free slot its inputs allow, as long as no stage's activation count
/// (F +1, W -1) exceeds the block's peak; once with W's in the gaps, once
/// (cool-down only) with W's implied by the free slots. The W's then take
/// free slots per chunk, the second chunk's first (its W's are the ones
/// whose B's the loss releases first). Same arguments as VBlockOrders.
Orders SqueezedVBlockOrders(const PassModel& model, int pace,
                            const VTurnDelays& delays);

/// ZB-V's per-stage orders (Zero Bubble paper §6): stage r warms up with
/// 2(p-r)-1 first-chunk F's, then r pairs (second-chunk F, first-chunk F),
/// then p-r triples (second-chunk F, B, W); in the steady state it repeats
/// (first-chunk F, B, W, second-chunk F, B, W); it cools down with r pairs
/// of B's and p-r (first-chunk B, W) and runs the W's it still owes last.
/// Built for max(m, 2p-1) microbatches with the extra ones dropped, so any
/// m >= 1 is served. For T_F = T_B = T_W, no communication and m >= 2p the
/// bubble is zero at a peak of p·M_B. Needs the V placement.
Orders ZbVOrders(const PassModel& model);

}  // namespace zbpp::sched::internal

#endif  // ZBPP_SCHEDULER_ZB_VBLOCKS_H_
