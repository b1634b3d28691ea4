#ifndef ZBPP_WORKER_MODEL_SPLIT_LINEAR_H_
#define ZBPP_WORKER_MODEL_SPLIT_LINEAR_H_

#include <ATen/core/Tensor.h>

#include "worker/model/weight_grad_store.h"

namespace zbpp::worker {

/// Routes the SplitLinear layers run on this thread, while it lives, to
/// `store` under `microbatch`: the executor opens one around each F pass.
/// Scopes nest (the innermost wins). Not copyable; thread-local.
class WeightGradScope {
 public:
  WeightGradScope(WeightGradStore* store, int microbatch);
  ~WeightGradScope();
  WeightGradScope(const WeightGradScope&) = delete;
  WeightGradScope& operator=(const WeightGradScope&) = delete;

 private:
  WeightGradStore* previous_store_;
  int previous_microbatch_;
};

/// y = x Wᵀ + b with the backward split in two (Zero Bubble paper §2).
/// Inside a WeightGradScope, autograd's backward through this layer computes
/// only ∂L/∂x = ∂L/∂y W (the B pass) and queues (x, ∂L/∂y) in the scope's
/// store for the W pass; the weight never gets a gradient from autograd.
/// Outside a scope (or with grad mode off) it is at::linear with the usual
/// fused backward.
///
/// Mixed precision: x, W and b are cast to `compute_type` for the product
/// (as autocast does; no-ops when they have it already), so y has that type;
/// ∂L/∂x comes back in x's type and the W pass accumulates ∂L/∂W in W's.
///
/// x: [..., in]; weight: [out, in]; bias: [out] or undefined; returns
/// [..., out] of `compute_type`. Thread-safe as at::linear is.
at::Tensor SplitLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       at::ScalarType compute_type = at::kFloat);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_SPLIT_LINEAR_H_
