#include "worker/runtime/embedding_exchange.h"

#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

absl::Status Prefixed(const absl::Status& status, int64_t step, const char* what) {
  return absl::Status(status.code(),
                      absl::StrCat("step ", step, ", ", what, ": ", status.message()));
}

}  // namespace

absl::Status EmbeddingExchange::Gather(Communicator& pipeline, absl::Duration timeout,
                                       int64_t step, int microbatches, const BatchFn& batches,
                                       bool training) {
  at::NoGradGuard no_grad;
  tokens_.clear();
  inputs_.clear();
  training_ = training;
  std::vector<at::Tensor> parts;
  for (int j = 0; j < microbatches; ++j) {
    tokens_.push_back(batches(step, j).inputs.to(shard_->embedding().device()));
    parts.push_back(shard_->Embed(tokens_.back()));
  }
  if (parts.empty()) return absl::OkStatus();
  at::Tensor sum = at::stack(parts);
  parts.clear();
  if (absl::Status st = pipeline.AllReduceSum(sum, timeout); !st.ok()) {
    return Prefixed(st, step, "the token embedding's rows over the vocabulary shards");
  }
  if (!holds_first_) return absl::OkStatus();
  for (int j = 0; j < microbatches; ++j) {
    inputs_.push_back(sum[j].detach().requires_grad_(training));
  }
  return absl::OkStatus();
}

BatchFn EmbeddingExchange::Batches(BatchFn batches) const {
  return [this, batches = std::move(batches)](int64_t step, int microbatch) {
    MicrobatchData data = batches(step, microbatch);
    if (microbatch >= 0 && microbatch < static_cast<int>(inputs_.size())) {
      data.inputs = inputs_[static_cast<size_t>(microbatch)];
    }
    return data;
  };
}

absl::Status EmbeddingExchange::Scatter(Communicator& pipeline, absl::Duration timeout,
                                        int64_t step) {
  if (!training_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, ": no training run's token embedding to scatter"));
  }
  at::NoGradGuard no_grad;
  training_ = false;
  if (tokens_.empty()) return absl::OkStatus();
  const at::Tensor& rows = shard_->embedding();
  const at::Tensor& first = tokens_.front();
  at::Tensor grads = at::zeros({static_cast<int64_t>(tokens_.size()), first.size(0),
                                first.size(1), rows.size(1)},
                               rows.options().requires_grad(false));
  for (size_t j = 0; j < inputs_.size(); ++j) {
    if (inputs_[j].grad().defined()) grads[static_cast<int64_t>(j)].copy_(inputs_[j].grad());
  }
  inputs_.clear();
  if (absl::Status st = pipeline.AllReduceSum(grads, timeout); !st.ok()) {
    return Prefixed(st, step, "the token embedding's gradient over the vocabulary shards");
  }
  for (size_t j = 0; j < tokens_.size(); ++j) {
    shard_->AddEmbeddingGradient(tokens_[j], grads[static_cast<int64_t>(j)]);
  }
  tokens_.clear();
  return absl::OkStatus();
}

}  // namespace zbpp::worker
