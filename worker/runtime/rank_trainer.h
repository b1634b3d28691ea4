#ifndef ZBPP_WORKER_RUNTIME_RANK_TRAINER_H_
#define ZBPP_WORKER_RUNTIME_RANK_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/schedule.h"
#include "worker/comm/communicator.h"
#include "worker/model/gpt.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/adamw.h"
#include "worker/runtime/executor.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// Faults injected on purpose, so that the demo and the end-to-end tests can
/// show the mechanisms that handle them (never set in production).
struct FaultInjection {
  /// The worker holding pipeline rank `slow_stage` runs every pass
  /// `slow_factor` times slower (ExecutorOptions::pass_slowdown) from step
  /// `slow_from_step` on; -1: no slow stage.
  int slow_stage = -1;
  double slow_factor = 1;
  int64_t slow_from_step = 0;
  /// At this step the worker holding the last pipeline rank turns one of its
  /// gradient entries into NaN after its passes (before validation); -1:
  /// none.
  int64_t nan_step = -1;
};

/// What a rank needs to train its part of a job.
struct RankTrainerOptions {
  v1::JobSpec spec;
  /// Pipeline rank in [0, spec.pipeline.stages).
  int rank = 0;
  /// The virtual stages this rank holds (Assignment.virtual_stages); the
  /// model has stages * virtual_stages.size() virtual stages.
  std::vector<int> virtual_stages;
  /// Not owned; must outlive the trainer.
  Communicator* communicator = nullptr;
  /// Training and held-out batches (same tokens on every rank).
  BatchFn train_batches;
  BatchFn eval_batches;
  /// ExecutorOptions::compute_mutex: only for several ranks in one process.
  std::mutex* compute_mutex = nullptr;
  /// Longest wait for a peer's message or a collective.
  absl::Duration timeout = absl::Seconds(60);
  FaultInjection faults;
};

/// The outcome of one optimizer step on one rank.
struct StepResult {
  StepTimeline timeline;
  /// Mean training loss over the step's microbatches (nats per token), on the
  /// rank holding the last virtual stage only.
  std::optional<double> loss;
  /// This rank's Σ‖grad‖² before clipping, and whether a gradient entry is
  /// inf or nan.
  double local_grad_norm_sq = 0;
  bool found_inf_nan = false;
  /// The same summed over all ranks (synchronous validation).
  double global_grad_norm_sq = 0;
  bool global_found_inf_nan = false;
  /// Factor applied to the gradients: 1 not clipped, in (0, 1) clipped, 0
  /// the step was skipped (inf/nan somewhere).
  double clip_coefficient = 1;
};

/// One pipeline rank of a training job: its model chunks, their W stores,
/// the executor and AdamW with synchronous validation (a global all-reduce
/// of the squared gradient norm and the inf/nan flag before every update;
/// paper §4 describes the post-update alternative).
///
/// Thread-compatible: one thread drives it.
class RankTrainer {
 public:
  /// Builds the chunks (initialised from spec.seed). InvalidArgument for a
  /// bad model spec or virtual stage list.
  static absl::StatusOr<std::unique_ptr<RankTrainer>> Create(RankTrainerOptions options);

  /// The checks of PipelineExecutor::Validate; run once per schedule version.
  absl::Status ValidateSchedule(const sched::Schedule& schedule) const;

  /// One optimizer step: zero gradients, run this rank's actions of
  /// `schedule`, all-reduce the validation state, clip, update. Every rank
  /// must call it for the same steps with the same schedule. Errors: the
  /// executor's and the communicator's (the step is then not applied).
  absl::StatusOr<StepResult> RunStep(int64_t step, const sched::Schedule& schedule);

  /// Mean loss on `microbatches` held-out microbatches (eval batch indices
  /// 0..microbatches-1), forward only; a value on the last stage's rank,
  /// nullopt on the others. Call between steps, with the same arguments on
  /// every rank.
  absl::StatusOr<std::optional<double>> Evaluate(int64_t tag_step,
                                                 const sched::Schedule& schedule,
                                                 int microbatches);

  /// Writes this rank's parameters and optimizer state for `step` under
  /// `directory` (worker/data/checkpoint.h; atomic per file).
  absl::Status SaveCheckpoint(const std::string& directory, int64_t step) const;
  /// Restores them; FailedPrecondition naming the tensor when the file does
  /// not match this rank's model (nothing is changed then), NotFound when it
  /// is missing.
  absl::Status RestoreCheckpoint(const std::string& directory, int64_t step);

  /// Every parameter of this rank's chunks, by global name.
  std::vector<NamedTensor> Parameters() const;
  int rank() const { return options_.rank; }

 private:
  explicit RankTrainer(RankTrainerOptions options) : options_(std::move(options)) {}

  RankTrainerOptions options_;
  std::vector<std::unique_ptr<GptChunk>> chunks_;
  std::vector<std::unique_ptr<WeightGradStore>> stores_;
  std::unique_ptr<PipelineExecutor> executor_;
  std::unique_ptr<AdamW> optimizer_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_RANK_TRAINER_H_
