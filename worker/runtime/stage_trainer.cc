#include "worker/runtime/stage_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "worker/data/checkpoint.h"
#include "worker/model/vocabulary_shard.h"

namespace zbpp::worker {

absl::Status StageTrainer::CheckPlace(const StageTrainerOptions& options) {
  if (options.communicator == nullptr) {
    return absl::InvalidArgumentError("StageTrainer needs a communicator");
  }
  const int p = options.spec.pipeline().stages();
  const int v = static_cast<int>(options.virtual_stages.size());
  if (v < 1 || options.stage < 0 || options.stage >= p) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", options.stage, " of ", p,
                                                   " holding ", v, " virtual stages"));
  }
  const int d = options.data_parallel == nullptr ? 1 : options.data_parallel->size();
  if (options.replica < 0 || options.replica >= d ||
      (options.data_parallel != nullptr && options.data_parallel->rank() != options.replica)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replica ", options.replica, " of ", d, " data-parallel replicas (group rank ",
        options.data_parallel == nullptr ? 0 : options.data_parallel->rank(), ")"));
  }
  if (options.microbatches < 0 || options.microbatch_offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("microbatch slice [",
                                                   options.microbatch_offset, ", +",
                                                   options.microbatches, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StageTrainer>> StageTrainer::Create(StageTrainerOptions options) {
  absl::StatusOr<ModelConfig> config = ModelConfigFromSpec(options.spec.model());
  if (!config.ok()) return config.status();
  if (absl::Status st = CheckPlace(options); !st.ok()) return st;
  const int p = options.spec.pipeline().stages();
  const int v = static_cast<int>(options.virtual_stages.size());
  std::unique_ptr<StageTrainer> trainer(new StageTrainer(std::move(options)));
  const StageTrainerOptions& o = trainer->options_;
  config->compute_type = ComputeTypeOf(o.spec.precision());
  config->layout.assign(o.spec.pipeline().layout().begin(), o.spec.pipeline().layout().end());
  config->vocab_parallel = o.spec.pipeline().vocab_parallel();
  for (int stage : o.virtual_stages) {
    absl::StatusOr<std::unique_ptr<ModelChunk>> chunk =
        ModelChunk::Create(*config, stage, p * v, o.spec.seed(), o.device);
    if (!chunk.ok()) return chunk.status();
    trainer->stores_.push_back(std::make_unique<WeightGradStore>());
    trainer->chunks_.push_back(*std::move(chunk));
  }
  if (config->vocab_parallel) {
    absl::StatusOr<std::unique_ptr<VocabularyShard>> shard =
        VocabularyShard::Create(*config, o.stage, p, o.spec.seed(), o.device);
    if (!shard.ok()) return shard.status();
    trainer->vocabulary_ = *std::move(shard);
    if (!o.synthetic.has_value()) {
      const bool holds_first = std::any_of(trainer->chunks_.begin(), trainer->chunks_.end(),
                                           [](const auto& chunk) { return chunk->is_first(); });
      trainer->embedding_ =
          std::make_unique<EmbeddingExchange>(trainer->vocabulary_.get(), holds_first);
    }
  }
  std::vector<NamedTensor> parameters = trainer->Parameters();
  if (!o.synthetic.has_value()) {
    // Every gradient buffer exists before the first step (each step's B and
    // W passes give every parameter a gradient, adding 0 + g = g into a
    // zero buffer): a step allocates activations only, which its peak
    // (StepResult::peak_activation_bytes) and the profile's M_W measure.
    at::NoGradGuard no_grad;
    for (NamedTensor& t : parameters) t.second.mutable_grad() = at::zeros_like(t.second);
  }
  trainer->optimizer_ = std::make_unique<AdamW>(std::move(parameters),
                                                AdamWOptions::FromSpec(o.spec.optimizer()));
  trainer->Bind();
  return trainer;
}

void StageTrainer::Bind() {
  const StageTrainerOptions& o = options_;
  const int m = o.microbatches > 0 ? o.microbatches : o.spec.pipeline().microbatches();
  const int64_t first =
      o.microbatches > 0 ? int64_t{o.microbatch_offset} : int64_t{o.replica} * m;
  executor_.reset();
  reducer_.reset();
  ExecutorOptions exec;
  exec.stage = o.stage;
  exec.communicator = o.communicator;
  if (o.data_parallel != nullptr && o.data_parallel->size() > 1) {
    reducer_ = std::make_unique<GradientReducer>(o.data_parallel, o.timeout);
    exec.reducer = reducer_.get();
  }
  exec.device = o.device;
  exec.microbatch_size = o.spec.pipeline().microbatch_size();
  exec.seq_len = chunks_.front()->config().seq_len;
  exec.hidden = chunks_.front()->config().hidden;
  step_batches_ = [batches = o.train_batches, first](int64_t step, int microbatch) {
    return batches(step, first + microbatch);
  };
  exec.batches = embedding_ != nullptr ? embedding_->Batches(step_batches_) : step_batches_;
  exec.recv_timeout = o.timeout;
  exec.loss_scale = loss_scaler_.scale();
  exec.synthetic = o.synthetic;
  exec.merge_backward_passes = o.merge_backward_passes;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    exec.chunks[o.virtual_stages[i]] = {chunks_[i].get(), stores_[i].get()};
  }
  exec.vocabulary = vocabulary_.get();
  executor_ = std::make_unique<PipelineExecutor>(std::move(exec));
}

absl::Status StageTrainer::ValidateSchedule(const sched::Schedule& schedule) const {
  const int m = options_.microbatches > 0 ? options_.microbatches
                                          : options_.spec.pipeline().microbatches();
  if (schedule.microbatches != m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule has ", schedule.microbatches, " microbatches, this replica runs ", m,
        options_.microbatches > 0 ? " (Assignment.microbatches)" : " (pipeline.microbatches)"));
  }
  return executor_->Validate(schedule);
}

// A POST step whose full state this stage has not acted on yet.
struct StageTrainer::Pending {
  int64_t step = 0;
  // This stage stepped optimistically (its partial state demanded nothing).
  bool stepped = false;
  // The fully reduced state, once known: at once on the last stage (and on a
  // stage that had to wait for it), else after `full_recv` completed.
  std::optional<ValidationState> full;
  at::Tensor full_buffer;
  std::unique_ptr<PendingOp> full_recv;
};

namespace {

// Tags of the validation states of `step`: partial (stage s-1 -> s) and full
// (last stage -> every worker).
uint32_t PartialStateTag(int64_t step) { return MakeTag(step, MessageKind::kValidation, 0, 0); }
uint32_t FullStateTag(int64_t step) { return MakeTag(step, MessageKind::kValidation, 1, 0); }

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

StageTrainer::StageTrainer(StageTrainerOptions options)
    : options_(std::move(options)),
      loss_scaler_(LossScaler::FromSpec(options_.spec)),
      memory_(options_.device) {}
StageTrainer::~StageTrainer() = default;

double StageTrainer::CoefficientFor(const ValidationState& state) const {
  if (state.found_inf_nan) return 0;
  const double max_norm = optimizer_->options().max_grad_norm;
  const double norm = std::sqrt(state.grad_norm_sq);
  if (max_norm > 0 && norm > max_norm) return max_norm / (norm + 1e-6);
  return 1;
}

void StageTrainer::UpdateLossScale(bool found_inf_nan) {
  loss_scaler_.Update(found_inf_nan);
  executor_->set_loss_scale(loss_scaler_.scale());
}

absl::StatusOr<StepResult> StageTrainer::RunStep(int64_t step, const sched::Schedule& schedule,
                                                v1::ValidationMode mode) {
  const FaultInjection& faults = options_.faults;
  executor_->set_pass_slowdown(
      faults.slow_stage == options_.stage && step >= faults.slow_from_step ? faults.slow_factor
                                                                          : 1.0);
  const bool post = mode == v1::VALIDATION_MODE_POST;
  StepResult result;
  // What the caller did since its last mark (a new schedule version
  // parsed) is bookkeeping.
  gaps_.Mark(GapPhase::kOther);
  if (pending_ != nullptr && (!post || !executor_->SpeculationAllowed(schedule))) {
    absl::StatusOr<std::optional<StepValidation>> settled = Settle();
    if (!settled.ok()) return settled.status();
    result.validations.push_back(**settled);
  }
  // The step's activation memory: what the passes allocate on this thread
  // (CPU) or the device (CUDA) above what is held now.
  MemoryMeterScope metered(memory_.cpu_meter());
  // The gathered embedding is the step's input, held like the parameters
  // (the activations' peak is above it).
  if (absl::Status st = GatherEmbedding(step, schedule.microbatches, step_batches_, true);
      !st.ok()) {
    return st;
  }
  memory_.ResetPeak();
  const int64_t held_before = memory_.current_bytes();
  absl::StatusOr<StepTimeline> timeline;
  if (pending_ == nullptr) {
    optimizer_->ZeroGrad();
    timeline = executor_->RunStep(step, schedule);
  } else {
    // The previous step is validated while this one's warm-up forwards run.
    BeforeFirstBackward check = [&]() -> absl::StatusOr<bool> {
      bool replay = false;
      absl::StatusOr<StepValidation> validation = Resolve(&replay);
      if (!validation.ok()) return validation.status();
      result.validations.push_back(*validation);
      optimizer_->ZeroGrad();
      return replay;
    };
    timeline = executor_->RunStep(step, schedule, /*generation=*/0, check);
    if (timeline.ok() && pending_ != nullptr) {
      return absl::InternalError(absl::StrCat("step ", step, ": stage ", options_.stage,
                                              " has no B pass to validate step ", step - 1,
                                              " before"));
    }
    if (timeline.ok() && timeline->discarded) {
      // The discarded run's time holds the undo and redo (done at its
      // check), the wait for the full state and the drain.
      StepValidation& validation = result.validations.back();
      validation.rollback_seconds = timeline->step_seconds;
      validation.replayed_forwards = timeline->discarded_forwards;
      // The step starts again: the discarded run was validation's; its
      // embedding is gathered again from the parameters rolled back.
      gaps_.Mark(GapPhase::kValidation);
      if (absl::Status st = GatherEmbedding(step, schedule.microbatches, step_batches_, true);
          !st.ok()) {
        return st;
      }
      timeline = executor_->RunStep(step, schedule, /*generation=*/1);
    }
  }
  if (!timeline.ok()) return timeline.status();
  result.peak_activation_bytes =
      static_cast<uint64_t>(std::max<int64_t>(0, memory_.peak_bytes() - held_before));
  // The gap before this step ends at its start; the next one opens at its
  // last action's end, and what follows until the executor returned was
  // the drain of its sends.
  result.gap = gaps_.Close(timeline->start);
  gaps_.Open(timeline->start + std::chrono::duration_cast<GapClock::Clock::duration>(
                                   std::chrono::duration<double>(timeline->step_seconds)));
  gaps_.Mark(GapPhase::kDrain);
  const bool last_rank = options_.stage == options_.spec.pipeline().stages() - 1;
  if (step == faults.nan_step && last_rank) optimizer_->PoisonGradient();
  if (step == faults.clip_step && last_rank) optimizer_->ScaleGradients(1e4);
  if (embedding_ != nullptr) {
    if (absl::Status st = embedding_->Scatter(*options_.communicator, options_.timeout, step);
        !st.ok()) {
      return st;
    }
  }
  absl::StatusOr<double> tied_copy_norm_sq = SumTiedGradients(step, schedule);
  if (!tied_copy_norm_sq.ok()) return tied_copy_norm_sq.status();
  const bool holds_tied_copy = std::any_of(chunks_.begin(), chunks_.end(), [](const auto& c) {
    return c->tied_embedding().defined();
  });
  if (embedding_ != nullptr || (holds_tied_copy && !options_.synthetic.has_value())) {
    gaps_.Mark(GapPhase::kEmbedding);
  }
  result.timeline = *std::move(timeline);
  if (result.timeline.loss_count > 0) {
    result.loss = result.timeline.loss_sum / result.timeline.loss_count;
  }
  // The gradients carry the loss scale (a power of two: dividing its square
  // out is exact).
  const double scale = loss_scaler_.scale();
  result.local_grad_norm_sq =
      (optimizer_->LocalGradNormSquared(&result.found_inf_nan) - *tied_copy_norm_sq) /
      (scale * scale);
  gaps_.Mark(GapPhase::kOptimizer);
  absl::Status validated =
      post ? StepOptimistically(step, result) : ValidateSynchronously(step, result);
  if (!validated.ok()) return validated;
  return result;
}

absl::StatusOr<double> StageTrainer::SumTiedGradients(int64_t step,
                                                      const sched::Schedule& schedule) {
  if (options_.synthetic.has_value()) return 0.0;  // No pass defines a gradient.
  at::Tensor first, last;  // This stage's copies of the tied matrix.
  for (const auto& chunk : chunks_) {
    if (!chunk->tied_embedding().defined()) continue;
    (chunk->is_first() ? first : last) = chunk->tied_embedding();
  }
  if (!first.defined() && !last.defined()) return 0.0;
  auto grad = [](at::Tensor& param) -> at::Tensor& {
    if (!param.mutable_grad().defined()) param.mutable_grad() = at::zeros_like(param);
    return param.mutable_grad();
  };
  if (first.defined() && last.defined()) {
    const at::Tensor sum = grad(first) + grad(last);
    grad(first).copy_(sum);
    grad(last).copy_(sum);
  } else {
    // The other end is on stage `peer`: each stage adds the other's gradient
    // to its own; a + b == b + a in IEEE arithmetic, so both hold the same
    // bits. The lower stage sends first and the higher receives first, so
    // that a transport matching by order (NCCL) pairs them.
    at::Tensor& mine = grad(first.defined() ? first : last);
    const int peer =
        schedule.StageOf(VirtualStage(first.defined() ? schedule.num_virtual_stages() - 1 : 0))
            .value();
    const uint32_t tag = MakeTag(step, MessageKind::kValidation, 2, 0);
    const at::Tensor outgoing = mine.clone(at::MemoryFormat::Contiguous);
    at::Tensor incoming = at::empty_like(outgoing);
    std::unique_ptr<PendingOp> ops[2];
    for (int i = 0; i < 2; ++i) {
      const bool send = (i == 0) == (options_.stage < peer);
      absl::StatusOr<std::unique_ptr<PendingOp>> op =
          send ? options_.communicator->Send(outgoing, peer, tag)
               : options_.communicator->Recv(incoming, peer, tag);
      if (!op.ok()) return op.status();
      ops[i] = *std::move(op);
    }
    for (auto& op : ops) {
      if (absl::Status st = op->Wait(options_.timeout); !st.ok()) {
        return absl::Status(st.code(), absl::StrCat("step ", step, ", tied embedding gradient "
                                                    "with stage ", peer, ": ",
                                                    std::string(st.message())));
      }
    }
    mine.add_(incoming);
  }
  // The LocalGradNormSquared of the optimizer counts the tied matrix once per
  // copy; the head's copy is the one not to count.
  if (!last.defined()) return 0.0;
  return at::sum(last.grad().square(), at::kDouble).item<double>();
}

absl::Status StageTrainer::ValidateSynchronously(int64_t step, StepResult& result) {
  at::Tensor state = at::tensor({result.found_inf_nan ? 0.0 : result.local_grad_norm_sq,
                                 result.found_inf_nan ? 1.0 : 0.0},
                                at::kDouble);
  if (absl::Status st = options_.communicator->AllReduceSum(state, options_.timeout); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("step ", step, ", validation all-reduce: ",
                                                std::string(st.message())));
  }
  gaps_.Mark(GapPhase::kValidation);
  StepValidation validation;
  validation.step = step;
  validation.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  validation.global_grad_norm_sq = state[0].item<double>();
  validation.global_found_inf_nan = state[1].item<double>() > 0;
  validation.clip_coefficient = CoefficientFor(
      {validation.global_grad_norm_sq, validation.global_found_inf_nan, 0});
  validation.loss_scale = loss_scaler_.scale();
  if (validation.clip_coefficient > 0) {
    optimizer_->Step(step, validation.clip_coefficient / validation.loss_scale);
  }
  UpdateLossScale(validation.global_found_inf_nan);
  validated_step_ = step;
  result.validations.push_back(validation);
  gaps_.Mark(GapPhase::kOptimizer);
  return absl::OkStatus();
}

absl::Status StageTrainer::WaitStateSends(int64_t step) {
  for (auto& [buffer, op] : state_sends_) {
    if (absl::Status st = op->Wait(options_.timeout); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("step ", step, ", validation state send: ",
                                                  std::string(st.message())));
    }
  }
  state_sends_.clear();
  return absl::OkStatus();
}

absl::Status StageTrainer::SendState(const ValidationState& state, int peer, uint32_t tag) {
  at::Tensor buffer = at::tensor(
      {state.grad_norm_sq, state.found_inf_nan ? 1.0 : 0.0, double(state.stepped_ranks)},
      at::kDouble);
  absl::StatusOr<std::unique_ptr<PendingOp>> op =
      options_.communicator->Send(buffer, peer, tag);
  if (!op.ok()) return op.status();
  state_sends_.emplace_back(std::move(buffer), *std::move(op));
  return absl::OkStatus();
}

absl::StatusOr<StageTrainer::ValidationState> StageTrainer::AwaitState(
    PendingOp& op, const at::Tensor& buffer, const std::string& what,
    absl::Duration timeout) const {
  if (absl::Status st = op.Wait(timeout); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat(what, ": ", std::string(st.message())));
  }
  return ValidationState{buffer[0].item<double>(), buffer[1].item<double>() > 0,
                         static_cast<int>(buffer[2].item<double>())};
}

absl::Status StageTrainer::AwaitFullState() {
  Pending& pending = *pending_;
  if (pending.full.has_value()) return absl::OkStatus();
  absl::StatusOr<ValidationState> full = AwaitState(
      *pending.full_recv, pending.full_buffer,
      absl::StrCat("step ", pending.step, ", full validation state from stage ",
                   options_.communicator->size() - 1),
      options_.timeout);
  if (!full.ok()) return full.status();
  pending.full = *full;
  return absl::OkStatus();
}

absl::Status StageTrainer::StepOptimistically(int64_t step, StepResult& result) {
  // The previous step's state messages were received long ago (the next
  // stage needed them to finish that step): release their buffers.
  if (absl::Status st = WaitStateSends(step); !st.ok()) return st;
  const int p = options_.communicator->size();
  const int r = options_.stage;
  ValidationState state;
  if (r > 0) {
    at::Tensor buffer = at::empty({3}, at::kDouble);
    absl::StatusOr<std::unique_ptr<PendingOp>> op =
        options_.communicator->Recv(buffer, r - 1, PartialStateTag(step));
    if (!op.ok()) return op.status();
    absl::StatusOr<ValidationState> partial = AwaitState(
        **op, buffer, absl::StrCat("step ", step, ", partial validation state from stage ", r - 1),
        options_.timeout);
    if (!partial.ok()) return partial.status();
    state = *partial;
  }
  state.grad_norm_sq += result.found_inf_nan ? 0.0 : result.local_grad_norm_sq;
  state.found_inf_nan = state.found_inf_nan || result.found_inf_nan;
  auto pending = std::make_unique<Pending>();
  pending->step = step;
  pending->stepped = CoefficientFor(state) == 1;
  if (pending->stepped) ++state.stepped_ranks;
  if (r + 1 < p) {
    if (absl::Status st = SendState(state, r + 1, PartialStateTag(step)); !st.ok()) return st;
    pending->full_buffer = at::empty({3}, at::kDouble);
    absl::StatusOr<std::unique_ptr<PendingOp>> op =
        options_.communicator->Recv(pending->full_buffer, p - 1, FullStateTag(step));
    if (!op.ok()) return op.status();
    pending->full_recv = *std::move(op);
  } else {
    pending->full = state;
    for (int q = 0; q + 1 < p; ++q) {
      if (absl::Status st = SendState(state, q, FullStateTag(step)); !st.ok()) return st;
    }
  }
  pending_ = std::move(pending);
  gaps_.Mark(GapPhase::kValidation);
  if (pending_->stepped) {
    if (options_.spec.optimizer().rollback() != v1::ROLLBACK_MODE_IN_PLACE_INVERSE) {
      optimizer_->Snapshot();
    }
    optimizer_->Step(step, 1.0 / loss_scaler_.scale());
    gaps_.Mark(GapPhase::kOptimizer);
    return absl::OkStatus();
  }
  // The partial state already calls for clipping or a skip: no optimistic
  // update; wait for the full state and take the validated one (Resolve
  // then has nothing to undo).
  if (absl::Status st = AwaitFullState(); !st.ok()) return st;
  gaps_.Mark(GapPhase::kValidation);
  const double coefficient = CoefficientFor(*pending_->full);
  if (coefficient > 0) optimizer_->Step(step, coefficient / loss_scaler_.scale());
  validated_step_ = step;
  gaps_.Mark(GapPhase::kOptimizer);
  return absl::OkStatus();
}

absl::StatusOr<StepValidation> StageTrainer::Resolve(bool* replay) {
  if (absl::Status st = AwaitFullState(); !st.ok()) return st;
  Pending& pending = *pending_;
  const ValidationState& full = *pending.full;
  StepValidation validation;
  validation.step = pending.step;
  validation.mode = v1::VALIDATION_MODE_POST;
  validation.global_grad_norm_sq = full.grad_norm_sq;
  validation.global_found_inf_nan = full.found_inf_nan;
  validation.clip_coefficient = CoefficientFor(full);
  // The pending step's gradients are still in `.grad`, with its loss scale.
  validation.loss_scale = loss_scaler_.scale();
  const double unscale = 1.0 / validation.loss_scale;
  if (pending.stepped && validation.clip_coefficient != 1) {
    const auto start = std::chrono::steady_clock::now();
    if (options_.spec.optimizer().rollback() == v1::ROLLBACK_MODE_IN_PLACE_INVERSE) {
      optimizer_->InvertStep(pending.step, unscale);
    } else {
      optimizer_->RestoreSnapshot();
    }
    if (validation.clip_coefficient > 0) {
      optimizer_->Step(pending.step, validation.clip_coefficient * unscale);
    }
    validation.rolled_back = true;
    validation.rollback_seconds = SecondsSince(start);
  }
  UpdateLossScale(full.found_inf_nan);
  *replay = validation.clip_coefficient != 1 && full.stepped_ranks > 0;
  validated_step_ = pending.step;
  pending_.reset();
  return validation;
}

absl::StatusOr<std::optional<StepValidation>> StageTrainer::Settle() {
  if (pending_ == nullptr) return std::optional<StepValidation>();
  const int64_t step = pending_->step;
  bool replay = false;  // Nothing speculative ran: nothing to replay.
  absl::StatusOr<StepValidation> validation = Resolve(&replay);
  if (!validation.ok()) return validation.status();
  // Every worker settles here and has its receives posted: complete the sends
  // now, so that nothing is left in flight if the trainer ends after this.
  if (absl::Status st = WaitStateSends(step); !st.ok()) return st;
  gaps_.Mark(GapPhase::kValidation);
  return std::optional<StepValidation>(*std::move(validation));
}

absl::StatusOr<StageTrainer::Held> StageTrainer::Hold(absl::Duration wait) {
  if (pending_ != nullptr) {
    Pending& pending = *pending_;
    if (!pending.full.has_value() && pending.full_recv != nullptr) {
      // Its own pipeline may have sent it before the fault: resolving it
      // keeps this stage at the step its pipeline neighbours hold.
      absl::StatusOr<ValidationState> full =
          AwaitState(*pending.full_recv, pending.full_buffer, "full validation state", wait);
      pending.full_recv.reset();
      if (full.ok()) pending.full = *full;
    }
    if (pending.full.has_value()) {
      bool replay = false;  // Nothing runs after: nothing to replay.
      absl::StatusOr<StepValidation> validation = Resolve(&replay);
      if (!validation.ok()) return validation.status();
    } else {
      if (pending.stepped) {
        if (options_.spec.optimizer().rollback() == v1::ROLLBACK_MODE_IN_PLACE_INVERSE) {
          optimizer_->InvertStep(pending.step, 1.0 / loss_scaler_.scale());
        } else {
          optimizer_->RestoreSnapshot();
        }
      }
      pending_.reset();
    }
  }
  // What this stage sent (the last stage's full state above all) is what
  // its neighbours resolve their pending step with: delivered, within the
  // same wait, before the groups go.
  for (auto& [buffer, op] : state_sends_) op->Wait(wait).IgnoreError();
  state_sends_.clear();
  for (auto& store : stores_) store->Clear();
  executor_.reset();
  options_.communicator = nullptr;
  options_.data_parallel = nullptr;
  gaps_ = GapClock();
  return Held{validated_step_, std::move(reducer_)};
}

absl::StatusOr<std::optional<double>> StageTrainer::Evaluate(int64_t tag_step,
                                                            const sched::Schedule& schedule,
                                                            int microbatches) {
  // Metered like the steps: the compute-type weight copies its forwards
  // remake are then counted when made and when released, so the next step's
  // peak does not see them.
  MemoryMeterScope metered(memory_.cpu_meter());
  if (absl::Status st = GatherEmbedding(tag_step, microbatches, options_.eval_batches, false);
      !st.ok()) {
    return st;
  }
  absl::StatusOr<StepTimeline> timeline = executor_->RunForwardOnly(
      tag_step, schedule, microbatches,
      embedding_ != nullptr ? embedding_->Batches(options_.eval_batches) : options_.eval_batches);
  if (!timeline.ok()) return timeline.status();
  gaps_.Mark(GapPhase::kEvaluation);
  if (timeline->loss_count == 0) return std::optional<double>();
  return std::optional<double>(timeline->loss_sum / timeline->loss_count);
}

std::vector<NamedTensor> StageTrainer::OptimizerState() const {
  return optimizer_->StateForCheckpoint();
}

std::vector<NamedTensor> StageTrainer::Parameters() const {
  std::vector<NamedTensor> out;
  for (const auto& chunk : chunks_) {
    for (const NamedTensor& t : chunk->parameters()) out.push_back(t);
  }
  if (vocabulary_ != nullptr) {
    for (const NamedTensor& t : vocabulary_->parameters()) out.push_back(t);
  }
  return out;
}

double StageTrainer::ParameterSum() const {
  double sum = 0;
  for (const auto& chunk : chunks_) {
    // The copy a last chunk holds apart from the first chunk's embedding.
    const bool copy = chunk->is_last() && !chunk->is_first() && chunk->tied_embedding().defined();
    for (const NamedTensor& t : chunk->parameters()) {
      if (copy && t.second.is_same(chunk->tied_embedding())) continue;
      sum += t.second.sum().item<double>();
    }
  }
  if (vocabulary_ != nullptr) {
    for (const NamedTensor& t : vocabulary_->parameters()) sum += t.second.sum().item<double>();
  }
  return sum;
}

absl::Status StageTrainer::SaveCheckpoint(const std::string& directory, int64_t step) const {
  return WriteCheckpoint(directory, step, options_.stage, optimizer_->StateForCheckpoint());
}

std::vector<NamedTensor> StageTrainer::CopyCheckpointState() const {
  std::vector<NamedTensor> state = optimizer_->StateForCheckpoint();
  for (NamedTensor& t : state) {
    t.second = t.second.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }
  return state;
}

absl::Status StageTrainer::RestoreCheckpoint(const std::string& directory, int64_t step) {
  absl::StatusOr<std::vector<NamedTensor>> state =
      ReadCheckpointOfAnyLayout(directory, step, options_.stage,
                                optimizer_->CheckpointLayout());
  if (!state.ok()) return state.status();
  return optimizer_->RestoreFromCheckpoint(*state);
}

}  // namespace zbpp::worker
