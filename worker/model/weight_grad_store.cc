#include "worker/model/weight_grad_store.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

// `param.grad() += grad`, outside the autograd engine, exactly where
// AccumulateGrad would write it, in the parameter's own type (mixed
// precision computes `grad` in a 16-bit type). `param` is a leaf.
void Accumulate(const at::Tensor& param, const at::Tensor& grad) {
  at::Tensor& slot = const_cast<at::Tensor&>(param).mutable_grad();
  if (slot.defined()) {
    slot.add_(grad);
  } else {
    slot = grad.to(param.scalar_type());
  }
}

// `weight.grad() += dyᵀ x` (dy [tokens, out], x [tokens, in]). The GEMM
// writes straight into .grad, adding with beta = 1 where a gradient is
// already there — no [out, in] temporary and no separate add — when the
// product's type is the gradient's, and on CUDA also for 16-bit products
// into a float32 gradient (at::addmm's out_dtype, which LibTorch offers on
// CUDA only). Elsewhere the 16-bit product goes to `scratch`, a buffer
// kept between W passes, and is added from there: a fresh [out, in] block
// per layer and pass would be faulted in anew each time, since glibc hands
// large freed blocks back to the kernel.
void AccumulateWeight(const at::Tensor& weight, const at::Tensor& dy, const at::Tensor& x,
                      at::Tensor* scratch) {
  const at::ScalarType type = weight.scalar_type();
  const bool same_type = dy.scalar_type() == type;
  if (!same_type && !(weight.is_cuda() && type == at::kFloat)) {
    const int64_t n = weight.numel();
    if (!scratch->defined() || scratch->numel() < n || scratch->dtype() != dy.dtype() ||
        scratch->device() != dy.device()) {
      *scratch = at::empty({n}, dy.options());
    }
    at::Tensor product = scratch->narrow(0, 0, n).view(weight.sizes());
    at::mm_out(product, dy.t(), x);
    Accumulate(weight, product);
    return;
  }
  at::Tensor& slot = const_cast<at::Tensor&>(weight).mutable_grad();
  if (!slot.defined()) {
    slot = same_type ? at::mm(dy.t(), x) : at::mm(dy.t(), x, type);
  } else if (same_type) {
    at::addmm_out(slot, slot, dy.t(), x);
  } else {
    at::addmm_out(slot, slot, dy.t(), x, type);
  }
}

}  // namespace

void WeightGradStore::Push(int microbatch, Entry entry) {
  absl::MutexLock lock(&mu_);
  pending_[microbatch].push_back(std::move(entry));
}

absl::Status WeightGradStore::RunW(int microbatch, const std::vector<at::Tensor>* only) {
  std::vector<Entry> entries;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(microbatch);
    if (it != pending_.end()) {
      // What `only` leaves out stays queued, in order; the rest moves to
      // `entries`, in order.
      const auto stays = [&](const Entry& e) {
        return only != nullptr &&
               std::none_of(only->begin(), only->end(),
                            [&](const at::Tensor& t) { return t.is_same(e.weight); });
      };
      std::vector<Entry>& queued = it->second;
      const auto taken = std::stable_partition(queued.begin(), queued.end(), stays);
      entries.assign(std::make_move_iterator(taken), std::make_move_iterator(queued.end()));
      queued.erase(taken, queued.end());
      if (queued.empty()) pending_.erase(it);
    }
    if (entries.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "W of microbatch ", microbatch, only == nullptr ? "" : " (one gradient bucket)",
          " has no queued weight-gradient work (W before its B, or twice)"));
    }
  }
  at::NoGradGuard no_grad;
  // ∂L/∂y and x as [tokens, features] (views unless a queued tensor is not
  // contiguous), then the weight GEMMs back to back, then the bias sums.
  std::vector<std::pair<at::Tensor, at::Tensor>> rows;
  rows.reserve(entries.size());
  for (const Entry& e : entries) {
    rows.emplace_back(e.grad_output.reshape({-1, e.weight.size(0)}),
                      e.input.reshape({-1, e.weight.size(1)}));
  }
  absl::MutexLock scratch_lock(&scratch_mu_);
  for (size_t i = 0; i < entries.size(); ++i) {
    AccumulateWeight(entries[i].weight, rows[i].first, rows[i].second, &scratch_);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const at::Tensor& bias = entries[i].bias;
    // The bias gradient sums over every token: in float32 also under mixed
    // precision.
    if (!bias.defined()) continue;
    Accumulate(bias, rows[i].first.sum(0, /*keepdim=*/false, bias.scalar_type()));
  }
  return absl::OkStatus();
}

void WeightGradStore::Clear() {
  absl::MutexLock lock(&mu_);
  pending_.clear();
}

}  // namespace zbpp::worker
