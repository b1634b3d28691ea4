#ifndef ZBPP_WORKER_RUNTIME_ADAMW_H_
#define ZBPP_WORKER_RUNTIME_ADAMW_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/model/gpt.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// AdamW hyper-parameters (zbpp.v1.OptimizerSpec after defaults).
struct AdamWOptions {
  double learning_rate = 1e-3;  ///< Peak learning rate.
  double beta1 = 0.9;
  double beta2 = 0.95;
  double epsilon = 1e-8;
  double weight_decay = 0.1;  ///< Decoupled; applied to matrices only.
  int64_t warmup_steps = 0;   ///< Linear warm-up from 0 over these steps.
  double max_grad_norm = 0;   ///< Global-norm clipping threshold; 0: none.

  static AdamWOptions FromSpec(const v1::OptimizerSpec& spec);
  /// Learning rate of optimizer step `step` (0-based): peak·(step+1)/warmup
  /// during warm-up, then the peak.
  double LearningRateAt(int64_t step) const;
};

/// AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization",
/// Algorithm 2) over one worker's parameters, with bias correction. Weight
/// decay applies to 2-D parameters (linear weights, embeddings), not to
/// biases and LayerNorm gains, as GPT training does.
///
/// zbpp owns this optimizer rather than using torch::optim::AdamW because the
/// pipeline runtime needs its state in the open: checkpoints save it by
/// parameter name, and post-update validation (paper §4) must undo a step.
///
/// Thread-compatible.
class AdamW {
 public:
  AdamW(std::vector<NamedTensor> parameters, AdamWOptions options);

  /// One update with the parameters' current `.grad` multiplied by
  /// `grad_scale` (the clipping coefficient), at learning rate
  /// LearningRateAt(step). Parameters without a gradient are left alone;
  /// `.grad` is not changed. LibTorch's fused AdamW kernel
  /// (at::_fused_adamw_, one per weight-decay group), computing in float32:
  /// p ← p·(1 − lr·λ); m ← lerp(m, g, 1 − β1); v ← β2·v + (1 − β2)·g²;
  /// p ← p − (lr / (1 − β1ᵗ))·m / (√v / √(1 − β2ᵗ) + ε). Bumps the
  /// parameters' version counters (the kernel does not).
  void Step(int64_t step, double grad_scale);

  /// Copies what the next Step touches (parameters with a gradient, their
  /// moments, the update counter) into buffers kept between calls, so that
  /// RestoreSnapshot can undo that Step bit for bit (exact rollback, paper
  /// §4). Memory: 3 float32 copies of those parameters.
  void Snapshot();
  /// Puts back what Snapshot copied. Only after a Snapshot.
  void RestoreSnapshot();
  /// Undoes the last Step(step, grad_scale) arithmetically, in place: the
  /// update is recomputed from the new moments as Step's kernel computed it
  /// and added back, then the decoupled decay and the moments are inverted
  /// from the same gradients (which must still be those that Step used),
  /// with no copy kept. Exact up to rounding: a few float32 ulps per entry
  /// (measured in worker_post_validation_tests). Needs beta1 > 0 and
  /// beta2 > 0.
  void InvertStep(int64_t step, double grad_scale);

  /// Sets every `.grad` to zero (keeps the buffers; one fused kernel on a
  /// GPU).
  void ZeroGrad();

  /// Fault injection: sets the first entry of the first parameter's
  /// gradient to NaN (FaultInjection::nan_step).
  void PoisonGradient();

  /// Fault injection: multiplies every `.grad` by `factor`
  /// (FaultInjection::clip_step).
  void ScaleGradients(double factor);

  /// Σ over parameters of ‖grad‖² (float64), and whether some entry is inf
  /// or nan. Missing gradients count as zero. One read back from the device.
  double LocalGradNormSquared(bool* found_inf_nan) const;

  /// Parameters and moments by name ("<param>", "<param>.exp_avg",
  /// "<param>.exp_avg_sq") plus "optimizer.step" (int64 scalar): what a
  /// checkpoint holds.
  std::vector<NamedTensor> StateForCheckpoint() const;
  /// Expected names and shapes of StateForCheckpoint.
  std::vector<std::pair<std::string, std::vector<int64_t>>> CheckpointLayout() const;
  /// Copies a checkpoint's tensors in. InvalidArgument naming a tensor that is
  /// missing or of another shape (nothing is changed then).
  absl::Status RestoreFromCheckpoint(const std::vector<NamedTensor>& state);

  const AdamWOptions& options() const { return options_; }

 private:
  struct Slot {
    std::string name;
    at::Tensor param;
    at::Tensor exp_avg;
    at::Tensor exp_avg_sq;
    bool decay;
  };
  // With the step count t = updates_: sqrt(v) / sqrt(1 - beta2^t) +
  // epsilon, and lr(step) / (1 - beta1^t), as the fused kernel has them.
  at::Tensor Denominator(const Slot& s) const;
  double StepSize(int64_t step) const;
  // The slots whose parameter has a gradient, in order.
  std::vector<Slot*> SlotsWithGradient();

  std::vector<Slot> slots_;
  // updates_ as a float32 scalar on the parameters' device, for the kernel.
  at::Tensor step_count_;
  // Snapshot: parameter, exp_avg, exp_avg_sq per slot (undefined for slots
  // without a gradient at the time), and the update counter.
  std::vector<std::array<at::Tensor, 3>> snapshot_;
  int64_t snapshot_updates_ = 0;
  AdamWOptions options_;
  int64_t updates_ = 0;  // Bias-correction counter (steps taken).
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_ADAMW_H_
