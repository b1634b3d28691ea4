#ifndef ZBPP_WORKER_MODEL_VOCABULARY_SHARD_H_
#define ZBPP_WORKER_MODEL_VOCABULARY_SHARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "api/pipeline_shape.h"
#include "worker/model/model_chunk.h"

namespace zbpp::worker {

// The rows each stage holds: VocabularyRangeOf (api/pipeline_shape.h).

/// The name of rows `range` of the matrix named `matrix` (the LM head or
/// the token embedding): "<matrix>[<begin>:<end>]", e.g.
/// "lm_head.weight[0:4096]".
std::string VocabularyShardName(const std::string& matrix, const VocabularyRange& range);

/// What an S pass leaves for its T: the hidden state it read, the shard's
/// logits and where each target falls in the shard.
struct VocabularyForward {
  at::Tensor hidden;     ///< [b, s, h] float32: the final norm's output.
  at::Tensor logits;     ///< [b, s, n] float32, n = the shard's rows.
  at::Tensor index;      ///< [b, s] int64: target - begin, clamped to [0, n).
  at::Tensor in_shard;   ///< [b, s] bool: the target is one of the shard's rows.
};

/// One stage's shard of the LM head and of the token embedding under
/// vocabulary parallelism (Yeung et al., "Balancing Pipeline Parallelism
/// with Vocabulary Parallelism", MLSys 2025): rows VocabularyRangeOf(vocab,
/// stages, stage) of the head [vocab, h] and of the embedding [vocab, h]
/// (with tied embeddings one tensor, both), and the two passes of the
/// schedule's S and T actions (scheduler/schedule.h, PassKind::kS and kT).
/// The softmax cross-entropy of the whole vocabulary is combined from every
/// shard's statistics, so the loss and the gradients equal the unsharded
/// head's (LanguageModelLoss) up to floating-point rounding; the
/// embedding's lookup is the sum of the shards' Embed (exact: one shard
/// holds each token's row), its gradient each shard's AddEmbeddingGradient.
///
/// The shards are initialised as the same rows of the unsharded matrices
/// (InitialParameter under their names; a tied head under the embedding's),
/// so every partition starts from the same weights. They are float32
/// (master weights); the products run in config.compute_type, as
/// SplitLinear's. Gradients accumulate into their .grad (the caller zeroes
/// them). Thread-compatible.
class VocabularyShard {
 public:
  /// InvalidArgument when `stage` is not in [0, stages) or the vocabulary
  /// has fewer rows than the pipeline has stages (config.vocab < stages).
  static absl::StatusOr<std::unique_ptr<VocabularyShard>> Create(
      const ModelConfig& config, int stage, int stages, uint64_t seed,
      c10::Device device = c10::Device(c10::kCPU));

  const VocabularyRange& range() const { return range_; }
  /// The shard's parameters under their names in checkpoints
  /// (VocabularyShardName of the matrices' global names, e.g.
  /// "model.embed_tokens.weight[0:4096]"): the embedding's rows, then the
  /// head's; with tied embeddings one tensor, under the embedding's name
  /// (as a tied checkpoint holds the embedding alone).
  const std::vector<NamedTensor>& parameters() const { return parameters_; }
  /// The head's rows [n, h] float32, a leaf with requires_grad.
  const at::Tensor& weight() const { return weight_; }
  /// The embedding's rows [n, h] float32, a leaf with requires_grad;
  /// weight() itself with tied embeddings.
  const at::Tensor& embedding() const { return embedding_; }

  /// This shard's part of the token embedding of `tokens` (int64 [b, s]):
  /// [b, s, h] float32, a token's embedding row where the token is one of
  /// the shard's rows, 0 elsewhere; the stages' parts sum to the whole
  /// lookup. No autograd (AddEmbeddingGradient is its backward).
  at::Tensor Embed(const at::Tensor& tokens) const;
  /// The backward of Embed: adds `grad` ([b, s, h] float32, the gradient of
  /// the whole lookup's output) at each token of `tokens` that is one of the
  /// shard's rows to that row of embedding().grad.
  void AddEmbeddingGradient(const at::Tensor& tokens, const at::Tensor& grad) const;

  /// The S pass: the shard's logits of `hidden` ([b, s, h] float32) and their
  /// statistics, [3, b, s] float32: per token the largest logit of the shard,
  /// the sum of exp(logit - that largest), and the target's logit (0 where
  /// the target, int64 [b, s], is another shard's). `*state` keeps what T
  /// needs: [b, s, h + n] float32 held until T.
  at::Tensor Forward(const at::Tensor& hidden, const at::Tensor& targets,
                     VocabularyForward* state) const;

  /// The T pass: combines `statistics`, every stage's S output for the
  /// microbatch in stage order (size stages), into the softmax's global
  /// maximum and normaliser; adds the shard's weight gradient of the loss
  /// times `scale` to weight().grad and returns the shard's part of the
  /// hidden state's gradient [b, s, h] float32 (the stages' parts sum to the
  /// gradient of the unsharded head). `scale` multiplies the mean next-token
  /// loss (1/m, times the loss scale). `*loss`, when given, receives the
  /// mean loss in nats (a float32 scalar; the same bits on every stage).
  at::Tensor Backward(const VocabularyForward& state, const std::vector<at::Tensor>& statistics,
                      double scale, at::Tensor* loss) const;

  /// The mean next-token loss in nats (a float32 scalar) from every stage's
  /// S statistics in stage order: what Backward reports, without the
  /// gradients (evaluation). Pure.
  static at::Tensor Loss(const std::vector<at::Tensor>& statistics);

 private:
  VocabularyShard(const ModelConfig& config, VocabularyRange range,
                  std::vector<NamedTensor> parameters)
      : config_(config),
        range_(range),
        parameters_(std::move(parameters)),
        weight_(parameters_.back().second),
        embedding_(parameters_.front().second) {}

  // Where each of `tokens` falls in the shard: the row (clamped to [0, n))
  // and whether it is one of the shard's.
  std::pair<at::Tensor, at::Tensor> Rows(const at::Tensor& tokens) const;

  const ModelConfig config_;
  const VocabularyRange range_;
  const std::vector<NamedTensor> parameters_;
  at::Tensor weight_;
  at::Tensor embedding_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_VOCABULARY_SHARD_H_
