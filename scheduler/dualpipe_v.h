#ifndef ZBPP_SCHEDULER_DUALPIPE_V_H_
#define ZBPP_SCHEDULER_DUALPIPE_V_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// DualPipeV: DualPipe (DeepSeek-V3 technical report, arXiv 2412.19437,
/// §3.2.1) "cut in half", as deepseek-ai/DualPipe and PyTorch's
/// ScheduleDualPipeV run it. The model's 2p virtual stages sit in a V
/// (Placement::kV: stage r holds virtual stage r, its chunk 0, and virtual stage 2p-1-r,
/// its chunk 1), so each microbatch goes down and back up the stages once.
/// Stage r runs, F_c/B_c/I_c/W_c being a forward, fused backward (BW),
/// input-gradient backward (B) and weight-gradient pass (W) of its chunk c:
///
///   1. 2(p-1-r) × F_0                    warm-up, deepest on stage 0
///   2. r+1 × (F_0, F_1)
///   3. p-1-r × (I_1, W_1, F_1)            zero-bubble: B and W split
///   4. m-2p+r+1 × (F_0, B_1, F_1, B_0)    steady state
///   5. p-1-r × (B_1, F_1, B_0)
///   6. r+1 × (B_1, B_0)                   the last r+1 of these as I
///   7. p-1-r × (W, I_0)                   W's in the order of their I's
///   8. r+1 × W
///
/// Merged pairs (MergesWithNext): each (I_1, W_1) of phase 3, p-1-r on
/// stage r, and on stage 0 also the I, W pairs its last phases put side by
/// side; the other backwards are fused BW already.
///
/// Each (F, B) pair of phases 4-5 is DualPipe's "F&B" chunk, the forward of
/// one microbatch overlapped with the backward of another; here it is two
/// actions run one after the other (zbpp has no fused kernel), so its time
/// is T_F + T_B + T_W, not their overlap.
///
/// Memory: every stage holds 2p chunk activations after phase 2, keeps
/// that through phase 3 and reaches 2p+1 at the first F of phase 4 (the
/// DualPipe README's "PP+1" with PP = 2p virtual stages), i.e. (p + 1/2)·M_B with
/// uniform M_B, M_B being a stage's two chunks together.
///
/// Needs chunks == 2 and m >= 2p, as deepseek-ai/DualPipe and PyTorch's
/// ScheduleDualPipeV require (stage 0's phase 4 then has m-2p+1 >= 1
/// iterations; below 2p-1 the phases above would not even add up to m). Errors: InvalidArgument naming
/// `microbatches` for m < 2p, `chunks` for v != 2, or the problem's own
/// validation error. Thread-safe (pure).
absl::StatusOr<Schedule> GenerateDualPipeV(const Problem& problem);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_DUALPIPE_V_H_
