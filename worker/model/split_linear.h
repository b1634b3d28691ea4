#ifndef ZBPP_WORKER_MODEL_SPLIT_LINEAR_H_
#define ZBPP_WORKER_MODEL_SPLIT_LINEAR_H_

#include <cstdint>
#include <unordered_map>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

/// Copies of a chunk's float32 parameters in a 16-bit compute type, each made
/// once and reused until its parameter changes: mixed precision otherwise
/// casts every weight in every F (as autocast does) and again in every B,
/// each cast a read of 4 and a write of 2 bytes per parameter — on a GPU at
/// h = 4096, s = 1024 about as long as a layer's element-wise work
/// (bench/results/compute.md, "The split's cost"). Memory: 2 bytes per
/// cached parameter for as long as this object lives, instead of one copy
/// per microbatch in flight.
///
/// A copy is current while its parameter's version counter and storage are
/// those it was made from. Every in-place write through ATen bumps the
/// version (the optimizer's step and its rollbacks, checkpoint restores);
/// a kernel that skips the counter (at::_fused_adamw_) must be followed by
/// c10::TensorImpl::bump_version (worker/runtime/adamw.cc does).
/// Thread-safe.
class ComputeTypeCopies {
 public:
  /// `param` in `type` without autograd history (so no gradient flows to
  /// `param` through it): `param` itself, detached, when it has that type,
  /// else the cached copy, made now if missing or stale (a new tensor: one
  /// an earlier pass still holds is never overwritten).
  at::Tensor Get(const at::Tensor& param, at::ScalarType type);

 private:
  struct Copy {
    at::Tensor tensor;
    int64_t version = 0;
    const void* data = nullptr;
  };
  absl::Mutex mu_;
  std::unordered_map<const c10::TensorImpl*, Copy> copies_ ABSL_GUARDED_BY(mu_);
};

/// y = x Wᵀ + b with the backward split in two (Zero Bubble paper §2).
/// Inside a WeightGradScope, autograd's backward through this layer computes
/// only ∂L/∂x = ∂L/∂y W (the B pass) and queues (x, ∂L/∂y) in the scope's
/// store for the W pass; the weight never gets a gradient from autograd.
/// Outside a scope with grad mode on it is at::linear with the usual fused
/// backward (autograd through the casts, no copies reused); with grad mode
/// off (evaluation) at::linear on the copies.
///
/// Mixed precision: x, W and b are cast to `compute_type` for the product
/// (as autocast does; no-ops when they have it already), so y has that type;
/// W and b through `copies` when given (they are reused across passes; the
/// split backward keeps W's for its B pass, whose ∂L/∂x product needs it),
/// else cast for this call. ∂L/∂x comes back in x's type and the W pass
/// accumulates ∂L/∂W in W's.
///
/// x: [..., in]; weight: [out, in]; bias: [out] or undefined; returns
/// [..., out] of `compute_type`. Thread-safe as at::linear is.
at::Tensor SplitLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       at::ScalarType compute_type = at::kFloat,
                       ComputeTypeCopies* copies = nullptr);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_SPLIT_LINEAR_H_
