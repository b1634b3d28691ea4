#include "worker/runtime/rank_trainer.h"

#include <cmath>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "worker/data/checkpoint.h"

namespace zbpp::worker {

absl::StatusOr<std::unique_ptr<RankTrainer>> RankTrainer::Create(RankTrainerOptions options) {
  absl::StatusOr<GptConfig> config = GptConfigFromSpec(options.spec.model());
  if (!config.ok()) return config.status();
  if (options.communicator == nullptr) {
    return absl::InvalidArgumentError("RankTrainer needs a communicator");
  }
  const int p = options.spec.pipeline().stages();
  const int v = static_cast<int>(options.virtual_stages.size());
  if (v < 1 || options.rank < 0 || options.rank >= p) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " of ", p,
                                                   " holding ", v, " virtual stages"));
  }
  std::unique_ptr<RankTrainer> trainer(new RankTrainer(std::move(options)));
  const RankTrainerOptions& o = trainer->options_;
  ExecutorOptions exec;
  exec.rank = o.rank;
  exec.communicator = o.communicator;
  exec.microbatch_size = o.spec.pipeline().microbatch_size();
  exec.seq_len = config->seq_len;
  exec.hidden = config->hidden;
  exec.batches = o.train_batches;
  exec.recv_timeout = o.timeout;
  exec.compute_mutex = o.compute_mutex;
  std::vector<NamedTensor> parameters;
  for (int stage : o.virtual_stages) {
    absl::StatusOr<std::unique_ptr<GptChunk>> chunk =
        GptChunk::Create(*config, stage, p * v, o.spec.seed());
    if (!chunk.ok()) return chunk.status();
    for (const NamedTensor& t : (*chunk)->parameters()) parameters.push_back(t);
    trainer->stores_.push_back(std::make_unique<WeightGradStore>());
    exec.chunks[stage] = {chunk->get(), trainer->stores_.back().get()};
    trainer->chunks_.push_back(*std::move(chunk));
  }
  trainer->executor_ = std::make_unique<PipelineExecutor>(std::move(exec));
  trainer->optimizer_ = std::make_unique<AdamW>(std::move(parameters),
                                                AdamWOptions::FromSpec(o.spec.optimizer()));
  return trainer;
}

absl::Status RankTrainer::ValidateSchedule(const sched::Schedule& schedule) const {
  if (schedule.microbatches != options_.spec.pipeline().microbatches()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule has ", schedule.microbatches, " microbatches, pipeline.microbatches is ",
        options_.spec.pipeline().microbatches()));
  }
  return executor_->Validate(schedule);
}

absl::StatusOr<StepResult> RankTrainer::RunStep(int64_t step, const sched::Schedule& schedule) {
  const FaultInjection& faults = options_.faults;
  executor_->set_pass_slowdown(
      faults.slow_stage == options_.rank && step >= faults.slow_from_step ? faults.slow_factor
                                                                          : 1.0);
  optimizer_->ZeroGrad();
  absl::StatusOr<StepTimeline> timeline = executor_->RunStep(step, schedule);
  if (!timeline.ok()) return timeline.status();
  if (step == faults.nan_step && options_.rank == options_.spec.pipeline().stages() - 1) {
    optimizer_->PoisonGradient();
  }
  StepResult result;
  result.timeline = *std::move(timeline);
  if (result.timeline.loss_count > 0) {
    result.loss = result.timeline.loss_sum / result.timeline.loss_count;
  }
  result.local_grad_norm_sq = optimizer_->LocalGradNormSquared(&result.found_inf_nan);

  // Synchronous validation: the fully reduced state before the update.
  at::Tensor state = at::tensor({result.found_inf_nan ? 0.0 : result.local_grad_norm_sq,
                                 result.found_inf_nan ? 1.0 : 0.0},
                                at::kDouble);
  if (absl::Status st = options_.communicator->AllReduceSum(state, options_.timeout); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("step ", step, ", validation all-reduce: ",
                                                std::string(st.message())));
  }
  result.global_grad_norm_sq = state[0].item<double>();
  result.global_found_inf_nan = state[1].item<double>() > 0;
  const double max_norm = optimizer_->options().max_grad_norm;
  if (result.global_found_inf_nan) {
    result.clip_coefficient = 0;
  } else {
    const double norm = std::sqrt(result.global_grad_norm_sq);
    if (max_norm > 0 && norm > max_norm) result.clip_coefficient = max_norm / (norm + 1e-6);
    optimizer_->Step(step, result.clip_coefficient);
  }
  return result;
}

absl::StatusOr<std::optional<double>> RankTrainer::Evaluate(int64_t tag_step,
                                                            const sched::Schedule& schedule,
                                                            int microbatches) {
  absl::StatusOr<StepTimeline> timeline =
      executor_->RunForwardOnly(tag_step, schedule, microbatches, options_.eval_batches);
  if (!timeline.ok()) return timeline.status();
  if (timeline->loss_count == 0) return std::optional<double>();
  return std::optional<double>(timeline->loss_sum / timeline->loss_count);
}

std::vector<NamedTensor> RankTrainer::Parameters() const {
  std::vector<NamedTensor> out;
  for (const auto& chunk : chunks_) {
    for (const NamedTensor& t : chunk->parameters()) out.push_back(t);
  }
  return out;
}

absl::Status RankTrainer::SaveCheckpoint(const std::string& directory, int64_t step) const {
  return WriteCheckpoint(directory, step, options_.rank, optimizer_->StateForCheckpoint());
}

absl::Status RankTrainer::RestoreCheckpoint(const std::string& directory, int64_t step) {
  absl::StatusOr<std::vector<NamedTensor>> state =
      ReadCheckpoint(directory, step, options_.rank, optimizer_->CheckpointLayout());
  if (!state.ok()) return state.status();
  return optimizer_->RestoreFromCheckpoint(*state);
}

}  // namespace zbpp::worker
