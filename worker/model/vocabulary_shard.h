#ifndef ZBPP_WORKER_MODEL_VOCABULARY_SHARD_H_
#define ZBPP_WORKER_MODEL_VOCABULARY_SHARD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "api/pipeline_shape.h"
#include "worker/model/model_chunk.h"

namespace zbpp::worker {

// The rows each stage holds: VocabularyRangeOf (api/pipeline_shape.h).

/// The name of rows `range` of the LM head named `head`:
/// "<head>[<begin>:<end>]", e.g. "lm_head.weight[0:4096]".
std::string VocabularyShardName(const std::string& head, const VocabularyRange& range);

/// What an S pass leaves for its T: the hidden state it read, the shard's
/// logits and where each target falls in the shard.
struct VocabularyForward {
  at::Tensor hidden;     ///< [b, s, h] float32: the final norm's output.
  at::Tensor logits;     ///< [b, s, n] float32, n = the shard's rows.
  at::Tensor index;      ///< [b, s] int64: target - begin, clamped to [0, n).
  at::Tensor in_shard;   ///< [b, s] bool: the target is one of the shard's rows.
};

/// One stage's shard of the LM head under vocabulary parallelism (Yeung et
/// al., "Balancing Pipeline Parallelism with Vocabulary Parallelism", MLSys
/// 2025): rows VocabularyRangeOf(vocab, stages, stage) of the head
/// [vocab, h], and the two passes of the schedule's S and T actions
/// (scheduler/schedule.h, PassKind::kS and kT). The softmax cross-entropy of
/// the whole vocabulary is combined from every shard's statistics, so the
/// loss and the gradients equal the unsharded head's (LanguageModelLoss)
/// up to floating-point rounding.
///
/// The shard is initialised as the same rows of the unsharded head
/// (InitialParameter under the head's, or with tied embeddings the
/// embedding's, name), so every partition starts from the same weights.
/// Its weight is float32 (a master weight); the products run in
/// config.compute_type, as SplitLinear's. Its gradient accumulates into
/// weight().grad (the caller zeroes it). Thread-compatible.
class VocabularyShard {
 public:
  /// InvalidArgument when `stage` is not in [0, stages) or the vocabulary
  /// has fewer rows than the pipeline has stages (config.vocab < stages).
  static absl::StatusOr<std::unique_ptr<VocabularyShard>> Create(
      const ModelConfig& config, int stage, int stages, uint64_t seed,
      c10::Device device = c10::Device(c10::kCPU));

  const VocabularyRange& range() const { return range_; }
  /// The shard's name in checkpoints and parameter lists: the head's global
  /// name and the rows, e.g. "lm_head.weight[0:4096]" (VocabularyShardName).
  const std::string& name() const { return name_; }
  /// The shard [n, h] float32, a leaf with requires_grad.
  const at::Tensor& weight() const { return weight_; }

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
  VocabularyShard(const ModelConfig& config, VocabularyRange range, std::string name,
                  at::Tensor weight)
      : config_(config), range_(range), name_(std::move(name)), weight_(std::move(weight)) {}

  const ModelConfig config_;
  const VocabularyRange range_;
  const std::string name_;
  at::Tensor weight_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_VOCABULARY_SHARD_H_
