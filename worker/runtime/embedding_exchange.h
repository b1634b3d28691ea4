#ifndef ZBPP_WORKER_RUNTIME_EMBEDDING_EXCHANGE_H_
#define ZBPP_WORKER_RUNTIME_EMBEDDING_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/model/vocabulary_shard.h"
#include "worker/runtime/executor.h"

namespace zbpp::worker {

/// The token embedding under vocabulary parallelism (docs/training.md,
/// "Vocabulary parallelism"): every stage holds its VocabularyShard's rows of
/// the embedding, so the first virtual stage's input is the sum of the
/// stages' lookups, and the gradient of that input reaches every stage's
/// rows. Two collectives over the pipeline group per run, outside the
/// schedule (the inputs are known before the step, the gradients needed
/// only after it):
///
///  * Gather, before a step (or an evaluation): each stage looks its rows up
///    for every microbatch (VocabularyShard::Embed); one all-reduce of
///    [m, b, s, h] float32 sums them; the stage holding virtual stage 0
///    keeps microbatch j's sum as the leaf its F reads (Batches) and its B
///    fills with the input's gradient.
///  * Scatter, after a training step: one all-reduce of the leaves'
///    gradients (zeros on the other stages) gives every stage the gradient
///    of each microbatch's lookup, which it adds to its rows
///    (VocabularyShard::AddEmbeddingGradient).
///
/// Against the unsharded embedding on the first stage this moves 2·m·b·s·h
/// floats per step and no V×h matrix, balances the embedding's memory (and
/// AdamW's state of it) over the stages, and with tied embeddings leaves one
/// copy of the matrix: the shard is both embedding and head, so no tied
/// gradient is exchanged. The all-reduces synchronise the stages at the
/// step's ends (StepBreakdown.embedding_exchange_seconds names the wait).
///
/// Thread-compatible: the stage's training thread.
class EmbeddingExchange {
 public:
  /// `shard`: this stage's, not owned. `holds_first`: this stage holds
  /// virtual stage 0 (stage 0 under every placement).
  EmbeddingExchange(const VocabularyShard* shard, bool holds_first)
      : shard_(shard), holds_first_(holds_first) {}

  /// Gathers the token embedding of microbatches [0, microbatches) of
  /// `batches` at `step` (see the class comment); the leaves require grad
  /// when `training`. Collective over `pipeline` (rank = stage): every stage
  /// calls it with the same step and microbatches. Replaces the previous
  /// Gather's leaves. Errors: the communicator's, prefixed with the step.
  absl::Status Gather(Communicator& pipeline, absl::Duration timeout, int64_t step,
                      int microbatches, const BatchFn& batches, bool training);

  /// `batches` with the inputs of the last Gather's microbatches replaced
  /// by their gathered embedding, on the stage holding virtual stage 0
  /// (unchanged elsewhere, and for a microbatch not gathered). The returned
  /// function reads this object: it must outlive the function's calls.
  BatchFn Batches(BatchFn batches) const;

  /// Scatters the gradients of the last (training) Gather's leaves into the
  /// shard's embedding rows (see the class comment), then drops the leaves.
  /// Collective over `pipeline`. FailedPrecondition when no training Gather
  /// preceded; the communicator's errors, prefixed with the step.
  absl::Status Scatter(Communicator& pipeline, absl::Duration timeout, int64_t step);

 private:
  const VocabularyShard* shard_;
  const bool holds_first_;
  bool training_ = false;
  std::vector<at::Tensor> tokens_;  // By microbatch, on the shard's device.
  std::vector<at::Tensor> inputs_;  // By microbatch: the leaves (stage 0 only).
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_EMBEDDING_EXCHANGE_H_
