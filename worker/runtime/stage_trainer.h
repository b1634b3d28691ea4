#ifndef ZBPP_WORKER_RUNTIME_STAGE_TRAINER_H_
#define ZBPP_WORKER_RUNTIME_STAGE_TRAINER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/schedule.h"
#include "worker/comm/communicator.h"
#include "worker/model/gpt.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/adamw.h"
#include "worker/runtime/embedding_exchange.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/loss_scaler.h"
#include "worker/runtime/memory_meter.h"
#include "worker/runtime/stage_profile.h"
#include "worker/runtime/step_timeline.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// Faults injected on purpose, so that the demo and the end-to-end tests can
/// show the mechanisms that handle them (never set in production).
struct FaultInjection {
  /// The worker holding stage `slow_stage` runs every pass
  /// `slow_factor` times slower (ExecutorOptions::pass_slowdown) from step
  /// `slow_from_step` on; -1: no slow stage.
  int slow_stage = -1;
  double slow_factor = 1;
  int64_t slow_from_step = 0;
  /// At this step the worker holding the last stage turns one of its
  /// gradient entries into NaN after its passes (before validation); -1:
  /// none.
  int64_t nan_step = -1;
  /// At this step the worker holding the last stage multiplies its
  /// gradients by 1e4 after its passes (before validation), so that the
  /// step must be clipped where the job clips (OptimizerSpec.max_grad_norm):
  /// under post-update validation the stages that stepped optimistically
  /// roll back and the next step's speculative forwards are replayed. Tests
  /// only; -1: none.
  int64_t clip_step = -1;
};

/// What a stage needs to train its part of a job.
struct StageTrainerOptions {
  v1::JobSpec spec;
  /// This worker's stage in [0, spec.pipeline.stages). The pipeline group
  /// holds one worker per stage in stage order, so its rank in `communicator`'s
  /// group is the stage's number (docs/architecture.md, Vocabulary).
  int stage = 0;
  /// The virtual stages this stage holds (Assignment.virtual_stages); the
  /// model has stages * virtual_stages.size() virtual stages.
  std::vector<int> virtual_stages;
  /// The pipeline group (the p stages of this replica, rank = stage). Not owned; must
  /// outlive the trainer.
  Communicator* communicator = nullptr;
  /// Data parallelism: the group of the d replicas of this stage (its
  /// group rank is the replica: rank() == replica), over which the schedule's REDUCE_GRAD actions
  /// average the gradients; null (or of size 1) when d = 1. Not owned; must
  /// outlive the trainer.
  Communicator* data_parallel = nullptr;
  /// Replica in [0, d) of the attempt (d = data_parallel's size).
  int replica = 0;
  /// This replica's slice of each step's global microbatches: its
  /// microbatch i is train_batches(step, microbatch_offset + i), for i <
  /// microbatches, and the schedule has `microbatches` microbatches. 0: the
  /// spec's m at offset replica·m. A degraded job's replicas take more of
  /// the same global batch (docs/elastic.md, "Recovering from memory").
  int microbatch_offset = 0;
  int microbatches = 0;
  /// Where the chunks, their gradients and the optimizer state live
  /// (ExecutorOptions::device); checkpoints are device-independent.
  c10::Device device = c10::Device(c10::kCPU);
  /// Training and held-out batches (same tokens on every worker for the same
  /// arguments); train_batches is indexed by global microbatch.
  BatchFn train_batches;
  BatchFn eval_batches;
  /// Longest wait for a peer's message or a collective.
  absl::Duration timeout = absl::Seconds(60);
  FaultInjection faults;
  /// Benchmarking, not training: passes wait these times instead of
  /// computing (ExecutorOptions::synthetic); validation and the optimizer
  /// still run, over gradients no pass defines (zero norm, no update).
  std::optional<SyntheticCompute> synthetic;
  /// ExecutorOptions::merge_backward_passes: merged pairs run as one pass.
  bool merge_backward_passes = true;
};

/// One stage's record of the validation of one optimizer step (paper §4):
/// the fully reduced state and what the stage did with its update.
struct StepValidation {
  int64_t step = 0;
  /// POST (post-update validation) or SYNCHRONOUS.
  v1::ValidationMode mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  /// Σ over stages of the local squared gradient norms, and whether any stage
  /// saw an inf or nan gradient.
  double global_grad_norm_sq = 0;
  bool global_found_inf_nan = false;
  /// Factor applied to the gradients: 1 not clipped, in (0, 1) clipped, 0
  /// the step was skipped (inf/nan somewhere).
  double clip_coefficient = 1;
  /// This stage had stepped optimistically and undid that step.
  bool rolled_back = false;
  /// Seconds spent undoing and redoing the update; after a replay, the
  /// whole discarded speculative run instead (its forwards, the wait for the
  /// full state, the undo and redo, the drain).
  double rollback_seconds = 0;
  /// Forward passes of the next step run again after the rollback.
  int replayed_forwards = 0;
  /// The loss scale the step ran with (LossScaler; 1 unless FP16).
  double loss_scale = 1;
};

/// The outcome of one optimizer step on one stage.
struct StepResult {
  /// The step's passes (after a replay: the replayed run's).
  StepTimeline timeline;
  /// The gap before the step, from the previous step's last action end to
  /// this step's start, by phase (StageTrainer::MarkBetweenSteps); nullopt
  /// for the trainer's first step.
  std::optional<StepGap> gap;
  /// Mean training loss over the step's microbatches (nats per token), on the
  /// stage holding the last virtual stage only.
  std::optional<double> loss;
  /// This stage's Σ‖grad‖² before clipping, and whether a gradient entry is
  /// inf or nan.
  double local_grad_norm_sq = 0;
  bool found_inf_nan = false;
  /// Peak activation memory of the step, bytes: the most this stage's
  /// tensors held while its passes ran (the executor's runs of the step,
  /// replays included) above what they held when the passes began — the
  /// parameters, their .grad buffers (allocated by Create, so no step
  /// allocates them), the optimizer's state and the compute-type weight
  /// copies are all older. On the CPU what the trainer's thread allocated
  /// (MemoryMeter); on CUDA the device's allocated bytes (DeviceMemoryMeter:
  /// workers sharing a GPU mix). It includes the step's received activations,
  /// the outputs waiting to be sent and, in a step whose post-update
  /// validation rolls back, the rollback's temporaries; the first
  /// mixed-precision step also counts the compute-type weight copies and
  /// W's 16-bit scratch buffer, which later steps reuse. What
  /// ReportStepRequest.peak_activation_bytes carries.
  uint64_t peak_activation_bytes = 0;
  /// Validations settled during the call, in step order: this step's when
  /// synchronous; the previous step's (settled before this step's first B)
  /// with post-update validation, whose own outcome comes with the next
  /// call or Settle.
  std::vector<StepValidation> validations;
};

/// One stage of a training job: its model chunks, their W stores,
/// the executor and AdamW with gradient validation (global inf/nan check
/// and norm clipping) in one of two modes:
///
/// * SYNCHRONOUS: an all-reduce of [Σ‖g‖², inf/nan] before every update: a
///   barrier, so the pipeline drains between steps.
/// * POST (paper §4, post-update validation): after its last pass of step
///   k, stage s receives the partial state (Σ‖g‖², any inf/nan, how many
///   stages stepped) from stage s−1, adds its own and passes it on to s+1;
///   unless the partial state already demands clipping or a skip, it saves
///   a copy of what the update touches (exact rollback) and steps at once.
///   The last stage, which holds the full state, sends it to every worker
///   directly (one hop each rather than a relay through the single-threaded
///   executors). Each stage checks it just before its first B of step k+1
///   (BeforeFirstBackward): if the step must be clipped or skipped, the
///   stages that stepped roll back (bit for bit from the copy, or by the
///   in-place arithmetic inverse: OptimizerSpec.rollback) and redo it
///   clipped or skip it, and, if any stage had stepped, every worker discards
///   the speculative forwards of step k+1 and replays them with the same
///   data (next message generation). Ranks whose partial state demanded a
///   change never stepped optimistically: they wait for the full state (a
///   stage with an inf/nan gradient therefore never applies it).
///   A schedule that fails sched::CheckSpeculativePrefixes gets each step settled
///   before the next (correct, without the overlap).
///
/// Mixed precision (spec.precision): the chunks compute in bfloat16 or
/// float16 over float32 master weights. With FP16 the gradients carry the
/// LossScaler's scale; the norm and the update divide it out (folded into
/// the clipping coefficient, exact for a power of two), an overflow is the
/// inf/nan outcome above — the step is skipped on every worker — and the scale
/// changes when a step's outcome is known: before the next step's first B,
/// where the last stage applies it.
///
/// Data parallelism (options.data_parallel): the gradients a step leaves are
/// the average over the d replicas (the executor's REDUCE_GRAD actions), the
/// same on every replica, so each replica's validation state, decision and
/// update are too: the states travel along each replica's pipeline as
/// above and every replica decides a rollback identically.
///
/// Every worker must call RunStep for the same steps with the same schedule
/// and mode, and Settle at the same points. Thread-compatible: one thread
/// drives it.
class StageTrainer {
 public:
  /// Builds the chunks (initialised from spec.seed). InvalidArgument for a
  /// bad model spec or virtual stage list.
  static absl::StatusOr<std::unique_ptr<StageTrainer>> Create(StageTrainerOptions options);
  ~StageTrainer();

  /// The checks of PipelineExecutor::Validate; run once per schedule version.
  absl::Status ValidateSchedule(const sched::Schedule& schedule) const;

  /// One optimizer step: run this stage's actions of `schedule`, validate
  /// (`mode` SYNCHRONOUS or POST, see the class comment), update. A POST
  /// step still pending when a SYNCHRONOUS one comes is settled first.
  /// Errors: the executor's and the communicator's (DeadlineExceeded naming
  /// the step and what was awaited); the trainer then runs no step before
  /// Hold and Rejoin.
  absl::StatusOr<StepResult> RunStep(int64_t step, const sched::Schedule& schedule,
                                     v1::ValidationMode mode = v1::VALIDATION_MODE_SYNCHRONOUS);

  /// The calibration profile (worker.proto ReportProfileRequest): each of
  /// this stage's virtual stages, in the order of options.virtual_stages,
  /// profiled by ProfileVirtualStage on one microbatch of the job's shapes
  /// (`repetitions` >= 1 timed F, B, W after a warm-up; under synthetic
  /// compute the passes wait the cost model's times). Call before the first
  /// step or between steps after Settle. Leaves the model as it found it:
  /// parameters, optimizer state and loss scale are not touched, the .grad
  /// buffers the passes add to are restored bit for bit, the random inputs
  /// come from a generator of their own; only caches (compute-type weight
  /// copies, W's scratch buffer) may have been filled. Errors:
  /// InvalidArgument for repetitions < 1, the passes' errors (the model's).
  absl::StatusOr<std::vector<StageProfile>> Profile(int repetitions = 3);

  /// The layout parts' profile (worker.proto ReportProfileRequest.
  /// layout_parts): the job's model cut into three virtual stages of
  /// `blocks` blocks each (Assignment.layout_part_blocks), built on this
  /// worker's device from the job's seed (the chunks apart from this stage's
  /// own, freed on return) and profiled as Profile profiles a virtual stage:
  /// virtual stage 0 (the token embedding and the blocks), 1 (the blocks
  /// alone) and 2 (the blocks, the final norm, the LM head and the loss), in
  /// that order. So every worker measures what a block among blocks, the
  /// embedding and the head cost on it, whatever its own chunks hold, and
  /// the coordinator can plan any layout from measurement (docs/training.md,
  /// "Uneven stages"). Touches nothing of this stage's model or optimizer;
  /// holds one part at a time (up to `blocks` blocks and the head's [vocab,
  /// h] matrix, with their gradients) while it runs. Errors: InvalidArgument
  /// for repetitions < 1 or blocks < 1; FailedPrecondition under synthetic
  /// compute (no model to measure); the passes' errors. Thread-compatible,
  /// as Profile.
  absl::StatusOr<std::vector<StageProfile>> ProfileLayoutParts(int repetitions, int blocks);
  /// Under vocabulary parallelism (PipelineSpec.vocab_parallel): this
  /// stage's S and T passes on its shard of the LM head, profiled as
  /// ProfileVocabularyShard says (stage_profile.h), its gradient put back as
  /// Profile does; nullopt without vocabulary parallelism.
  absl::StatusOr<std::optional<sched::VocabularyCost>> ProfileVocabulary(int repetitions);

  /// Finishes the pending POST step, if any: waits for its full state and
  /// rolls back / redoes / skips as it says (nothing speculative ran, so
  /// nothing is replayed). Returns its validation, or nothing when no step
  /// was pending. Call before reading the parameters (evaluation,
  /// checkpoint, end of the job) at the same step on every worker.
  absl::StatusOr<std::optional<StepValidation>> Settle();

  /// Mean loss on `microbatches` held-out microbatches (eval batch indices
  /// 0..microbatches-1), forward only; a value on the last stage,
  /// nullopt on the others. Call between steps, after Settle, with the same
  /// arguments on every worker.
  absl::StatusOr<std::optional<double>> Evaluate(int64_t tag_step,
                                                 const sched::Schedule& schedule,
                                                 int microbatches);

  /// Writes this stage's parameters and optimizer state for `step` under
  /// `directory` (worker/data/checkpoint.h; atomic per file). Call after
  /// Settle.
  absl::Status SaveCheckpoint(const std::string& directory, int64_t step) const;
  /// What SaveCheckpoint writes, copied to the CPU (fresh tensors the
  /// next steps do not touch), for a background writer (SnapshotWriter).
  /// Call after Settle.
  std::vector<NamedTensor> CopyCheckpointState() const;
  /// Restores them; FailedPrecondition naming the tensor when the file does
  /// not match this stage's model (nothing is changed then), NotFound when it
  /// is missing.
  absl::Status RestoreCheckpoint(const std::string& directory, int64_t step);

  /// The time since the previous mark between two steps was spent in
  /// `phase` (GapClock::Mark): what the caller does between steps
  /// (checkpoint, report, grant) marks its phases here; RunStep, Settle and
  /// Evaluate mark the trainer's own (drain, validation, optimizer,
  /// evaluation), and the next RunStep returns the gap as StepResult::gap.
  void MarkBetweenSteps(GapPhase phase) { gaps_.Mark(phase); }

  /// Every parameter of this stage's chunks, by global name, and under
  /// vocabulary parallelism its shard of the LM head
  /// (VocabularyShard::name).
  std::vector<NamedTensor> Parameters() const;
  /// The sum of every entry of this stage's parameters, each of the model's
  /// parameters once: a last virtual stage's copy of a tied token embedding
  /// (ModelChunk::tied_embedding; the first virtual stage holds the
  /// original) is left out. So the stages' sums add up to the same checksum
  /// (ReportStepRequest.parameter_sum) whatever holds the matrix: any
  /// layout, or its shards under vocabulary parallelism. Each tensor summed
  /// in its own type, the tensors' sums added in double.
  double ParameterSum() const;
  /// Parameters and optimizer moments by name (AdamW::StateForCheckpoint).
  std::vector<NamedTensor> OptimizerState() const;
  int stage() const { return options_.stage; }

  /// The next step to run is `step` (the attempt's start step, after
  /// Create, RestoreCheckpoint or Rejoin); Hold reports step - 1 until a
  /// later step is validated.
  void StartAt(int64_t step) { validated_step_ = step - 1; }

  /// Ends the trainer's use of its groups after a failed or aborted step,
  /// keeping the stage's state for a next attempt (docs/elastic.md, "Held
  /// state"): a pending POST step whose full state has come (or comes
  /// within `wait`) is resolved as Settle would; one whose full state has
  /// not is rolled back (its optimistic update undone). The step in flight
  /// updated nothing (the optimizer steps after its gradients are
  /// complete) and its queued W passes and gradients are dropped. The
  /// validation states this stage sent are waited for, within `wait`, so
  /// that its neighbours can resolve their own pending step. Then the
  /// executor is released, and the gradient reducer handed back: its
  /// destructor waits for a reduction in flight, which on a silent replica
  /// ends only at the communicator's timeout, so the caller destroys it
  /// (and the group it uses) where that blocks no one. Returns the last
  /// validated step and the reducer (null for one replica). Rejoin,
  /// CopyStateFromReplica and AbortReductions are in
  /// stage_trainer_elastic.cc (docs/elastic.md). Afterwards
  /// only Rejoin, the accessors and the checkpoint calls may be used.
  /// Errors: a rollback's (the state is then unknown and must not be
  /// resumed from).
  struct Held {
    int64_t step = -1;
    std::unique_ptr<GradientReducer> reducer;
  };
  absl::StatusOr<Held> Hold(absl::Duration wait);

  /// Ends a wait for the data-parallel reductions at once (GradientReducer::
  /// Abort); nothing without replicas. Thread-safe between Create (or
  /// Rejoin) and Hold: an abort hook may call it.
  void AbortReductions();

  /// Binds a held trainer to a new attempt's groups: `communicator` (the
  /// pipeline, rank = stage), `data_parallel` (null for one replica; rank ==
  /// replica) and this replica's microbatch slice, as in
  /// StageTrainerOptions. InvalidArgument as Create for a replica that does
  /// not match the group.
  absl::Status Rejoin(Communicator* communicator, Communicator* data_parallel, int replica,
                      int microbatch_offset, int microbatches);

  /// A heal's state copy (docs/elastic.md, "Heal"): the worker of replica
  /// `source` sends this stage's parameters, optimizer moments and step
  /// count (AdamW::StateForCheckpoint) and its loss scale to every other
  /// replica of the data-parallel group, which take them bit for bit. Call
  /// on every worker of the group, before the first step `step` (which
  /// tags the messages). Errors: InvalidArgument for a source outside the
  /// group or a state tensor that is neither float32 nor the step count;
  /// the communicator's (DeadlineExceeded after options.timeout).
  absl::Status CopyStateFromReplica(int source, int64_t step);

 private:
  /// InvalidArgument unless the options' stage, replica and groups agree.
  static absl::Status CheckPlace(const StageTrainerOptions& options);
  /// (Re)creates the reducer and the executor over options_'s groups and
  /// slice, with chunks_ and stores_.
  void Bind();
  /// What ProfileVirtualStage needs to profile `chunk` (with its W store)
  /// as virtual stage `virtual_stage` of the job's shapes, on this stage's
  /// device and meter.
  StageProfileOptions ProfileOptions(const ModelChunk& chunk, WeightGradStore& store,
                                     int virtual_stage, int repetitions);
  // The reduced validation state travelling along the stages.
  struct ValidationState {
    double grad_norm_sq = 0;
    bool found_inf_nan = false;
    int stepped_ranks = 0;  // Ranks that stepped optimistically.
  };
  // A POST step whose full state this stage has not acted on yet.
  struct Pending;

  explicit StageTrainer(StageTrainerOptions options);

  // Clipping coefficient the state calls for: 0 skip, < 1 clip, 1 none.
  double CoefficientFor(const ValidationState& state) const;
  // Records the validated outcome of the step that ran with the current
  // loss scale and hands the next scale to the executor.
  void UpdateLossScale(bool found_inf_nan);
  // Tied embeddings split over two chunks (ModelChunk::tied_embedding):
  // gives both copies of the tied matrix the sum of their gradients (the
  // same bits on both stages) before the norm and the update, so that the
  // copies stay equal. Returns the head copy's squared gradient norm, which
  // the local norm must not count a second time.
  absl::StatusOr<double> SumTiedGradients(int64_t step, const sched::Schedule& schedule);
  // Under vocabulary parallelism, EmbeddingExchange::Gather of the step's
  // (or an evaluation's) microbatches over the pipeline group; nothing
  // otherwise.
  absl::Status GatherEmbedding(int64_t step, int microbatches, const BatchFn& batches,
                               bool training);
  // Every parameter's gradient copied (none under synthetic compute), for
  // RestoreGradients to put back after a profile's passes added to them.
  using SavedGradients = std::vector<std::pair<at::Tensor, at::Tensor>>;  // (parameter, .grad)
  SavedGradients SaveGradients() const;
  static void RestoreGradients(SavedGradients& saved);
  absl::Status ValidateSynchronously(int64_t step, StepResult& result);
  absl::Status StepOptimistically(int64_t step, StepResult& result);
  // Waits for the pending step's full state and acts on it; sets *replay
  // when speculative forwards run since then must be replayed.
  absl::StatusOr<StepValidation> Resolve(bool* replay);
  absl::Status SendState(const ValidationState& state, int peer, uint32_t tag);
  // Waits up to `timeout` for a validation-state receive into `buffer` and
  // decodes it; `what` names it in errors.
  absl::StatusOr<ValidationState> AwaitState(PendingOp& op, const at::Tensor& buffer,
                                             const std::string& what,
                                             absl::Duration timeout) const;
  // Fills pending_->full from its receive unless already known.
  absl::Status AwaitFullState();
  // Completes the validation-state sends in flight (`step` for errors).
  absl::Status WaitStateSends(int64_t step);

  StageTrainerOptions options_;
  std::vector<std::unique_ptr<ModelChunk>> chunks_;
  // This stage's shard of the LM head under vocabulary parallelism
  // (PipelineSpec.vocab_parallel); null otherwise.
  std::unique_ptr<VocabularyShard> vocabulary_;
  // Its token embedding's exchanges (null without vocabulary parallelism
  // and under synthetic compute, where no pass reads the embedding).
  std::unique_ptr<EmbeddingExchange> embedding_;
  // The training microbatches of this replica's steps, by step and index
  // in [0, m): what the executor runs and GatherEmbedding reads.
  BatchFn step_batches_;
  std::vector<std::unique_ptr<WeightGradStore>> stores_;
  std::unique_ptr<GradientReducer> reducer_;  // Null when d = 1.
  std::unique_ptr<PipelineExecutor> executor_;
  std::unique_ptr<AdamW> optimizer_;
  LossScaler loss_scaler_;
  std::unique_ptr<Pending> pending_;
  int64_t validated_step_ = -1;
  // Validation-state sends in flight, with their buffers.
  std::vector<std::pair<at::Tensor, std::unique_ptr<PendingOp>>> state_sends_;
  // The gap since the last step's last action, by phase.
  GapClock gaps_;
  // What this stage's tensors hold on its device (StepResult's peak).
  DeviceMemoryMeter memory_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_STAGE_TRAINER_H_
