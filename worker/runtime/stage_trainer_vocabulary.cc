// StageTrainer under vocabulary parallelism (PipelineSpec.vocab_parallel;
// docs/training.md, "Vocabulary parallelism"): the tied embedding's gradient
// summed with every stage's shard, and the shard's passes profiled
// (stage_trainer.h).

#include <optional>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "worker/model/vocabulary_shard.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {

absl::StatusOr<double> StageTrainer::SumVocabularyTiedGradients(int64_t step) {
  if (!options_.spec.model().tie_embeddings()) return 0.0;
  at::NoGradGuard no_grad;
  // The whole matrix's gradient: the embedding's (first stage) plus every
  // shard's rows, summed over the pipeline group, so that every copy gets
  // the same bits.
  const at::Tensor& shard = vocabulary_->weight();
  const VocabularyRange range = vocabulary_->range();
  at::Tensor embedding;  // The first virtual stage's token embedding, when held here.
  for (const auto& chunk : chunks_) {
    if (chunk->is_first()) embedding = chunk->tied_embedding();
  }
  at::Tensor sum = embedding.defined()
                       ? embedding.grad().clone()
                       : at::zeros({options_.spec.model().vocab(), shard.size(1)}, shard.options());
  sum.narrow(0, range.begin, range.size()).add_(shard.grad());
  if (absl::Status st = options_.communicator->AllReduceSum(sum, options_.timeout); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("step ", step, ", tied embedding gradient "
                                                "over the vocabulary shards: ",
                                                std::string(st.message())));
  }
  if (embedding.defined()) embedding.mutable_grad().copy_(sum);
  at::Tensor& shard_grad = shard.mutable_grad();
  shard_grad.copy_(sum.narrow(0, range.begin, range.size()));
  // The embedding holds every row: the shard is the copy not to count.
  return at::sum(shard_grad.square(), at::kDouble).item<double>();
}

absl::StatusOr<std::optional<sched::VocabularyCost>> StageTrainer::ProfileVocabulary(
    int repetitions) {
  if (!options_.spec.pipeline().vocab_parallel()) return std::nullopt;
  const StageProfileOptions o =
      ProfileOptions(*chunks_.front(), *stores_.front(), options_.virtual_stages.front(),
                     repetitions);
  SavedGradients saved = SaveGradients();
  absl::StatusOr<sched::VocabularyCost> cost = ProfileVocabularyShard(
      vocabulary_.get(), options_.stage, options_.spec.pipeline().stages(), o);
  RestoreGradients(saved);
  if (!cost.ok()) {
    return absl::Status(cost.status().code(), absl::StrCat("profiling the vocabulary shard: ",
                                                           cost.status().message()));
  }
  return std::optional<sched::VocabularyCost>(*cost);
}

}  // namespace zbpp::worker
