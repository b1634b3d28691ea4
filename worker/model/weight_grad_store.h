#ifndef ZBPP_WORKER_MODEL_WEIGHT_GRAD_STORE_H_
#define ZBPP_WORKER_MODEL_WEIGHT_GRAD_STORE_H_

#include <cstdint>
#include <map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace zbpp::worker {

/// The deferred weight-gradient work of one virtual stage (chunk): what the
/// B pass leaves for the W pass (Zero Bubble paper §2). For every linear
/// layer y = x Wᵀ + b that ran backward, B queues (x, ∂L/∂y); W of the
/// microbatch computes ∂L/∂W = (∂L/∂y)ᵀ x and ∂L/∂b = Σ ∂L/∂y and adds them
/// to the parameters' `.grad`. The queued tensors are the M_W of the memory
/// model (Qi et al. 2024, §2.1; docs/schedules.md): they are
/// released when W runs.
///
/// Memory besides the queues: under mixed precision off CUDA, one 16-bit
/// buffer as large as the largest linear layer's weight (W's products
/// before they are added into float32 .grad).
///
/// Thread-safe (a mutex guards the queues); the executor uses one thread.
class WeightGradStore {
 public:
  /// One linear layer's share of a W pass. input: [..., in]; grad_output:
  /// [..., out] with the same leading shape; weight: [out, in] (a parameter);
  /// bias: [out] or undefined.
  struct Entry {
    at::Tensor input;
    at::Tensor grad_output;
    at::Tensor weight;
    at::Tensor bias;
  };

  /// Queues an entry for `microbatch`'s W pass.
  void Push(int microbatch, Entry entry);

  /// The W pass of `microbatch`: accumulates the weight (and bias) gradients
  /// of every queued entry into `.grad` and releases the entries; with
  /// `only`, a partial W pass: only the entries whose weight is one of
  /// `only` (a gradient bucket, GradientBuckets in worker/model/gpt.h), the
  /// others stay queued. FailedPrecondition when nothing (of `only`) is
  /// queued for it (W before its B, or twice).
  absl::Status RunW(int microbatch, const std::vector<at::Tensor>* only = nullptr);

  /// Drops everything queued (an aborted step).
  void Clear();

 private:
  mutable absl::Mutex mu_;
  std::map<int, std::vector<Entry>> pending_ ABSL_GUARDED_BY(mu_);
  // W's 16-bit weight gradients before they are added into float32 .grad,
  // where no GEMM writes that directly (not CUDA): as large as the largest
  // linear layer, kept between W passes.
  absl::Mutex scratch_mu_;
  at::Tensor scratch_ ABSL_GUARDED_BY(scratch_mu_);
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_WEIGHT_GRAD_STORE_H_
