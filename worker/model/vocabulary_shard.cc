#include "worker/model/vocabulary_shard.h"

#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {

VocabularyRange VocabularyRangeOf(int64_t vocab, int stages, int stage) {
  const int64_t base = vocab / stages;
  const int64_t longer = vocab % stages;  // The first `longer` shards hold base + 1 rows.
  VocabularyRange range;
  range.begin = stage * base + std::min<int64_t>(stage, longer);
  range.end = range.begin + base + (stage < longer ? 1 : 0);
  return range;
}

absl::StatusOr<std::unique_ptr<VocabularyShard>> VocabularyShard::Create(
    const ModelConfig& config, int stage, int stages, uint64_t seed, c10::Device device) {
  if (stages < 1 || stage < 0 || stage >= stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary shard: stage ", stage, " is not in [0, ", stages, ")"));
  }
  if (config.vocab < stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.vocab (", config.vocab, ") must be at least the ", stages,
        " stages to split the LM head by vocabulary"));
  }
  const VocabularyNames names = VocabularyNamesOf(config.architecture);
  if (names.head.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model.architecture: unknown architecture \"",
                                                   config.architecture, "\""));
  }
  const VocabularyRange range = VocabularyRangeOf(config.vocab, stages, stage);
  // The unsharded head's initial value, then this shard's rows of it.
  const at::Tensor full =
      InitialParameter(seed, config.tie_embeddings ? names.embedding : names.head,
                       {config.vocab, config.hidden}, 0.02);
  at::Tensor weight = full.narrow(0, range.begin, range.size()).clone().to(device);
  weight.set_requires_grad(true);
  return std::unique_ptr<VocabularyShard>(new VocabularyShard(config, range, std::move(weight)));
}

at::Tensor VocabularyShard::Forward(const at::Tensor& hidden, const at::Tensor& targets,
                                    VocabularyForward* state) const {
  at::NoGradGuard no_grad;
  const at::ScalarType compute = config_.compute_type;
  state->hidden = hidden.detach();
  state->logits =
      at::matmul(state->hidden.to(compute), weight_.detach().to(compute).t()).to(at::kFloat);
  const at::Tensor local = targets - range_.begin;
  state->in_shard = (local >= 0).logical_and(local < range_.size());
  state->index = local.clamp(0, range_.size() - 1);
  const at::Tensor max = std::get<0>(state->logits.max(-1));
  const at::Tensor sum_exp = (state->logits - max.unsqueeze(-1)).exp().sum(-1);
  const at::Tensor target_logit =
      state->logits.gather(-1, state->index.unsqueeze(-1)).squeeze(-1) *
      state->in_shard.to(at::kFloat);
  return at::stack({max, sum_exp, target_logit});
}

at::Tensor VocabularyShard::Backward(const VocabularyForward& state,
                                     const std::vector<at::Tensor>& statistics, double scale,
                                     at::Tensor* loss) const {
  at::NoGradGuard no_grad;
  const at::Tensor all = at::stack(statistics);  // [stages, 3, b, s]
  const at::Tensor maxes = all.select(1, 0);
  const at::Tensor global_max = std::get<0>(maxes.max(0));  // [b, s]
  const at::Tensor normaliser = (all.select(1, 1) * (maxes - global_max).exp()).sum(0);
  const at::Tensor target_logit = all.select(1, 2).sum(0);
  if (loss != nullptr) *loss = (normaliser.log() + global_max - target_logit).mean();
  // d(mean loss)/d(logits) = (softmax - one-hot) / tokens, on this shard's
  // columns of the softmax.
  const int64_t tokens = state.index.numel();
  at::Tensor grad_logits = (state.logits - global_max.unsqueeze(-1)).exp() /
                           normaliser.unsqueeze(-1);
  grad_logits.scatter_add_(-1, state.index.unsqueeze(-1),
                           -state.in_shard.to(at::kFloat).unsqueeze(-1));
  grad_logits.mul_(scale / static_cast<double>(tokens));
  const at::ScalarType compute = config_.compute_type;
  const at::Tensor g = grad_logits.to(compute);
  const at::Tensor weight_grad =
      at::matmul(g.reshape({tokens, -1}).t(),
                 state.hidden.to(compute).reshape({tokens, -1}))
          .to(at::kFloat);
  at::Tensor& grad = weight_.mutable_grad();
  if (grad.defined()) {
    grad.add_(weight_grad);
  } else {
    grad = weight_grad;
  }
  return at::matmul(g, weight_.detach().to(compute)).to(at::kFloat);
}

}  // namespace zbpp::worker
