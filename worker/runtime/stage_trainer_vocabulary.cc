// StageTrainer under vocabulary parallelism (PipelineSpec.vocab_parallel;
// docs/training.md, "Vocabulary parallelism"): the token embedding gathered
// over the shards, and the shard's passes profiled (stage_trainer.h).

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/model/vocabulary_shard.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {

absl::Status StageTrainer::GatherEmbedding(int64_t step, int microbatches,
                                           const BatchFn& batches, bool training) {
  if (embedding_ == nullptr) return absl::OkStatus();
  absl::Status st = embedding_->Gather(*options_.communicator, options_.timeout, step,
                                       microbatches, batches, training);
  gaps_.Mark(GapPhase::kEmbedding);
  return st;
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
