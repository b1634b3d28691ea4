#include "worker/model/vocabulary_shard.h"

#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {

std::string VocabularyShardName(const std::string& matrix, const VocabularyRange& range) {
  return absl::StrCat(matrix, "[", range.begin, ":", range.end, "]");
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
  // The unsharded matrix's initial value, then this shard's rows of it.
  auto rows_of = [&](const std::string& name) {
    const at::Tensor full = InitialParameter(seed, name, {config.vocab, config.hidden}, 0.02);
    at::Tensor rows = full.narrow(0, range.begin, range.size()).clone().to(device);
    rows.set_requires_grad(true);
    return NamedTensor(VocabularyShardName(name, range), rows);
  };
  std::vector<NamedTensor> parameters{rows_of(names.embedding)};
  if (!config.tie_embeddings) parameters.push_back(rows_of(names.head));
  return std::unique_ptr<VocabularyShard>(
      new VocabularyShard(config, range, std::move(parameters)));
}

std::pair<at::Tensor, at::Tensor> VocabularyShard::Rows(const at::Tensor& tokens) const {
  const at::Tensor local = tokens - range_.begin;
  return {local.clamp(0, range_.size() - 1), (local >= 0).logical_and(local < range_.size())};
}

at::Tensor VocabularyShard::Embed(const at::Tensor& tokens) const {
  at::NoGradGuard no_grad;
  const auto [row, in_shard] = Rows(tokens);
  return at::embedding(embedding_.detach(), row) * in_shard.unsqueeze(-1).to(at::kFloat);
}

void VocabularyShard::AddEmbeddingGradient(const at::Tensor& tokens,
                                           const at::Tensor& grad) const {
  at::NoGradGuard no_grad;
  const auto [row, in_shard] = Rows(tokens.reshape({-1}));
  const at::Tensor mine = in_shard.nonzero().squeeze(-1);
  at::Tensor& g = embedding_.mutable_grad();
  if (!g.defined()) g = at::zeros_like(embedding_);
  g.index_add_(0, row.index_select(0, mine),
               grad.reshape({-1, grad.size(-1)}).index_select(0, mine));
}

at::Tensor VocabularyShard::Forward(const at::Tensor& hidden, const at::Tensor& targets,
                                    VocabularyForward* state) const {
  at::NoGradGuard no_grad;
  const at::ScalarType compute = config_.compute_type;
  state->hidden = hidden.detach();
  state->logits =
      at::matmul(state->hidden.to(compute), weight_.detach().to(compute).t()).to(at::kFloat);
  std::tie(state->index, state->in_shard) = Rows(targets);
  const at::Tensor max = std::get<0>(state->logits.max(-1));
  const at::Tensor sum_exp = (state->logits - max.unsqueeze(-1)).exp().sum(-1);
  const at::Tensor target_logit =
      state->logits.gather(-1, state->index.unsqueeze(-1)).squeeze(-1) *
      state->in_shard.to(at::kFloat);
  return at::stack({max, sum_exp, target_logit});
}

namespace {

// The softmax over the whole vocabulary from every shard's statistics
// (VocabularyShard::Forward), per token [b, s]: its largest logit, the sum
// of exp(logit - that largest) and the target's logit.
struct Softmax {
  at::Tensor max;
  at::Tensor normaliser;
  at::Tensor target_logit;

  explicit Softmax(const std::vector<at::Tensor>& statistics) {
    const at::Tensor all = at::stack(statistics);  // [stages, 3, b, s]
    const at::Tensor maxes = all.select(1, 0);
    max = std::get<0>(maxes.max(0));
    normaliser = (all.select(1, 1) * (maxes - max).exp()).sum(0);
    target_logit = all.select(1, 2).sum(0);
  }
  // The mean cross-entropy: log(sum exp(logits)) - target logit.
  at::Tensor MeanLoss() const { return (normaliser.log() + max - target_logit).mean(); }
};

}  // namespace

at::Tensor VocabularyShard::Loss(const std::vector<at::Tensor>& statistics) {
  at::NoGradGuard no_grad;
  return Softmax(statistics).MeanLoss();
}

at::Tensor VocabularyShard::Backward(const VocabularyForward& state,
                                     const std::vector<at::Tensor>& statistics, double scale,
                                     at::Tensor* loss) const {
  at::NoGradGuard no_grad;
  const Softmax softmax(statistics);
  const at::Tensor& global_max = softmax.max;
  const at::Tensor& normaliser = softmax.normaliser;
  if (loss != nullptr) *loss = softmax.MeanLoss();
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
