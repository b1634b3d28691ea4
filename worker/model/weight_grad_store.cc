#include "worker/model/weight_grad_store.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

void Accumulate(const at::Tensor& param, const at::Tensor& grad) {
  // `param` is a leaf; W writes its gradient outside the autograd engine,
  // exactly where AccumulateGrad would, in the parameter's own type (mixed
  // precision computes `grad` in a 16-bit type).
  at::Tensor& slot = const_cast<at::Tensor&>(param).mutable_grad();
  if (slot.defined()) {
    slot.add_(grad);
  } else {
    slot = grad.to(param.scalar_type());
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
  for (const Entry& e : entries) {
    const int64_t out = e.weight.size(0);
    const int64_t in = e.weight.size(1);
    at::Tensor gy = e.grad_output.reshape({-1, out});
    Accumulate(e.weight, gy.t().mm(e.input.reshape({-1, in})));
    // The bias gradient sums over every token: in float32 also under mixed
    // precision.
    if (e.bias.defined()) Accumulate(e.bias, gy.sum(0, /*keepdim=*/false, e.bias.scalar_type()));
  }
  return absl::OkStatus();
}

void WeightGradStore::Clear() {
  absl::MutexLock lock(&mu_);
  pending_.clear();
}

}  // namespace zbpp::worker
