#include "worker/daemon/attempt_runner.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "absl/strings/str_cat.h"
#include "api/pipeline_shape.h"
#include "api/schedule_proto.h"
#include "api/snapshots.h"
#include "common/counter_hash.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/latency_probe.h"
#include "worker/comm/rendezvous_store.h"
#include "worker/data/checkpoint.h"
#include "worker/data/corpus.h"
#include "worker/data/sampler.h"
#include "worker/data/snapshot_writer.h"
#include "worker/daemon/step_report.h"
#include "worker/runtime/stage_trainer.h"
#include "worker/runtime/step_timeline.h"

namespace zbpp::worker {
namespace {

// Held-out microbatches per evaluation.
constexpr int kEvalMicrobatches = 8;
// Ping-pong rounds of the link-latency probe.
constexpr int kLatencyRounds = 20;
// Timed repetitions of each pass in the calibration profile.
constexpr int kProfileRepetitions = 3;
// And of the layout parts' passes: the layout is chosen where two layouts
// may predict steps a few per cent apart (the demo's [6, 2] and [7, 1]),
// which medians of 3 on a shared host do not separate
// (bench/results/calibration.md, "The parts first, seven times").
constexpr int kLayoutPartRepetitions = 7;
// Longest wait, after a fault, for a validation state the pipeline may have
// sent before it (StageTrainer::Hold).
constexpr absl::Duration kHoldWait = absl::Seconds(2);

absl::Status WithContext(const absl::Status& st, const std::string& what) {
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat(what, ": ", std::string(st.message())));
}

bool EvaluatesAfter(int64_t step, int64_t start_step, int64_t steps) {
  // A tenth of the run, but not more often than every 10 steps: short jobs
  // (tests, benchmarks) are not mostly evaluation.
  const int64_t every = std::max<int64_t>(10, steps / 10);
  return step == start_step || step == steps - 1 || (step + 1) % every == 0;
}

// A BatchFn over the corpus; the corpus was checked against seq_len at load,
// so sampling cannot fail (a failure is a bug and aborts loudly).
BatchFn Sampler(std::shared_ptr<const Corpus> corpus, Split split, const v1::JobSpec& spec) {
  const uint64_t seed = spec.seed();
  const int b = spec.pipeline().microbatch_size();
  const int s = spec.model().seq_len();
  return [corpus, split, seed, b, s](int64_t step, int microbatch) {
    absl::StatusOr<Batch> batch = SampleBatch(*corpus, split, seed, step, microbatch, b, s);
    TORCH_CHECK(batch.ok(), "sampling: ", std::string(batch.status().message()));
    return MicrobatchData{batch->inputs, batch->targets};
  };
}

// The owner of the job's checkpoint files (worker/data/checkpoint.h): its id
// and a fingerprint of its spec, the same for every attempt and across
// coordinator restarts. The fingerprint tells apart two jobs with the same id
// from different coordinator databases ("job-1" after a fresh start).
std::string CheckpointOwner(const v1::Assignment& assignment) {
  const std::string bytes = assignment.spec().SerializeAsString();
  uint64_t hash = SplitMix64(bytes.size());
  for (size_t i = 0; i < bytes.size(); i += sizeof(uint64_t)) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, std::min(sizeof(word), bytes.size() - i));
    hash = HashCombine(hash, word);
  }
  return absl::StrCat(assignment.job_id(), " spec ", absl::Hex(hash, absl::kZeroPad16));
}

class AttemptRun {
 public:
  AttemptRun(const v1::Assignment& assignment, const AttemptEnvironment& env, HeldStage& held)
      : a_(assignment),
        env_(env),
        held_(held),
        spec_(assignment.spec()),
        checkpoint_owner_(CheckpointOwner(assignment)) {}
  ~AttemptRun() { env_.state->ClearAbortHook(); }

  /// Whether the error Run returned is in the job itself (see
  /// AttemptOutcome).
  bool job_error() const { return job_error_; }
  /// Whether Run ran the job's last step.
  bool finished() const { return finished_; }

  /// After a fault or an abort: settles the trainer (StageTrainer::Hold)
  /// and leaves it in the daemon's HeldStage for a next attempt.
  void HoldState() {
    if (trainer_ == nullptr) return;
    // The trainer changes hands: no abort may reach it from now on.
    env_.state->ClearAbortHook();
    if (data_parallel_ != nullptr) data_parallel_->Abort();
    absl::StatusOr<StageTrainer::Held> held =
        trainer_->Hold(std::min(env_.comm_timeout, kHoldWait));
    if (!held.ok()) {
      std::cerr << "zbpp-worker: not holding stage " << a_.stage() << " of job " << a_.job_id()
                << ": " << held.status().message() << "\n";
      return;
    }
    // A reduction stuck on a silent replica runs to comm_timeout (a Gloo
    // collective cannot be aborted): it and its group wind down on a thread
    // of their own, so that the held state is reported now.
    if (held->reducer != nullptr || data_parallel_ != nullptr) {
      std::thread([reducer = std::move(held->reducer),
                   group = std::move(data_parallel_)]() mutable {
        reducer.reset();
        group.reset();
      }).detach();
    }
    const int64_t step = held->step;
    held_.trainer = std::move(trainer_);
    held_.virtual_stages.assign(a_.virtual_stages().begin(), a_.virtual_stages().end());
    held_.owner = checkpoint_owner_;
    held_.state.set_job_id(a_.job_id());
    held_.state.set_attempt(a_.attempt());
    held_.state.set_stage(a_.stage());
    held_.state.set_step(step);
    held_.state.clear_snapshot_step();
    held_.state.clear_step_report();
    if (last_report_.has_value() && last_report_->step() == step) {
      *held_.state.mutable_step_report() = *last_report_;
    }
    if (snapshots_ != nullptr) {
      // A restart reads what was written: the write in flight ends first.
      snapshots_->Finish();
      if (std::optional<int64_t> written = snapshots_->durable_step()) {
        held_.state.set_snapshot_step(*written);
      }
    }
    env_.state->SetHeld(held_.state);
  }

  absl::Status Run() {
    if (absl::Status st = Prepare(); !st.ok()) {
      // Loading the corpus stops once the attempt is aborted (cancelled,
      // restarted): no failure of this worker.
      if (absl::IsCancelled(st) && env_.state->Aborted(a_.job_id(), a_.attempt())) {
        return absl::OkStatus();
      }
      return st;
    }
    for (int64_t step = a_.start_step(); step < spec_.steps(); ++step) {
      switch (env_.state->WaitForGrant(a_.job_id(), a_.attempt(), step, env_.comm_timeout)) {
        case ControlState::GrantWait::kAborted:
          return absl::OkStatus();
        case ControlState::GrantWait::kTimedOut:
          return absl::DeadlineExceededError(absl::StrCat(
              "no grant for step ", step, " within ", absl::FormatDuration(env_.comm_timeout)));
        case ControlState::GrantWait::kGranted:
          break;
      }
      trainer_->MarkBetweenSteps(GapPhase::kGrant);
      if (absl::Status st = RunOneStep(step); !st.ok()) {
        if (env_.state->Aborted(a_.job_id(), a_.attempt())) return absl::OkStatus();
        return st;
      }
    }
    finished_ = true;
    return absl::OkStatus();
  }

 private:
  // Marks `st` as an error of the job (the corpus, the model, the
  // checkpoint, the schedule): another attempt would meet it again.
  absl::Status JobError(absl::Status st) {
    job_error_ = true;
    return st;
  }

  // Assignment.resume_from_memory: the held trainer, if it is this job's
  // stage at start_step - 1, becomes trainer_; FailedPrecondition naming
  // what is held otherwise (no job error: the coordinator restarts from
  // the checkpoint instead).
  absl::Status TakeHeld() {
    const v1::HeldState& h = held_.state;
    const std::vector<int> wanted(a_.virtual_stages().begin(), a_.virtual_stages().end());
    if (held_.trainer == nullptr || h.job_id() != a_.job_id() || h.stage() != a_.stage() ||
        h.step() != a_.start_step() - 1 || held_.virtual_stages != wanted ||
        held_.owner != checkpoint_owner_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "resume_from_memory: this worker holds ",
          held_.trainer == nullptr
              ? std::string("no stage state")
              : absl::StrCat("stage ", h.stage(), " of job ", h.job_id(), " at step ", h.step(),
                             held_.owner != checkpoint_owner_ ? " under another spec" : ""),
          ", not stage ", a_.stage(), " of job ", a_.job_id(), " at step ",
          a_.start_step() - 1));
    }
    trainer_ = std::move(held_.trainer);
    DropHeld();
    return absl::OkStatus();
  }

  void DropHeld() {
    if (held_.trainer == nullptr && held_.state.job_id().empty()) return;
    held_ = HeldStage{};
    env_.state->SetHeld(std::nullopt);
  }

  // Replica 0's writes every `interval` steps (none when 0) into
  // `directory`: the steps must be free of other jobs' files, and the
  // unfinished writes an earlier attempt's crash left of this stage are
  // removed (PrepareCheckpointDirectory). A refusal is a job error, its
  // message led by `what`.
  absl::Status PrepareWrites(const std::string& directory, int64_t interval,
                             const std::string& what) {
    if (interval <= 0 || a_.replica() != 0) return absl::OkStatus();
    absl::StatusOr<int> removed = PrepareCheckpointDirectory(
        directory, a_.stage(), spec_.pipeline().stages(), checkpoint_owner_,
        CheckpointSteps{a_.start_step(), spec_.steps(), interval});
    if (!removed.ok()) {
      return JobError(WithContext(removed.status(), absl::StrCat(what, directory)));
    }
    if (*removed > 0) {
      std::cerr << "zbpp-worker: removed " << *removed << " unfinished write(s) in "
                << directory << " of an earlier attempt\n";
    }
    return absl::OkStatus();
  }

  absl::Status Prepare() {
    env_.state->SetPhase(v1::WORKER_PHASE_PREPARING);
    CorpusOptions corpus_options;
    corpus_options.cache_dir = env_.cache_dir;
    corpus_options.seq_len = spec_.model().seq_len();
    corpus_options.vocab = spec_.model().vocab();
    corpus_options.roots = env_.data_roots;
    // A cancelled job frees the worker during a long read (a token file's
    // scan), not after it.
    corpus_options.cancelled = [this] { return env_.state->Aborted(a_.job_id(), a_.attempt()); };
    absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
        LoadCorpus(spec_.dataset(), corpus_options);
    if (absl::IsCancelled(corpus.status())) return corpus.status();
    if (!corpus.ok()) return JobError(corpus.status());

    const int p = spec_.pipeline().stages();
    const int d = a_.replicas() > 0 ? a_.replicas() : DataParallelOf(spec_.pipeline());
    // Memory that will not be resumed from is freed before the new chunks
    // are built; memory that will be is checked before anything else.
    if (a_.resume_from_memory()) {
      if (absl::Status st = TakeHeld(); !st.ok()) return st;
    } else {
      DropHeld();
    }
    // The steps this attempt checkpoints must be free of other jobs' files
    // (refused now, before any step runs, rather than overwritten), and a
    // crash of an earlier attempt may have left unfinished writes of this
    // stage behind (the writer of a stage is replica 0). Checked before the
    // groups are joined: a refusal then reaches the coordinator as this job's
    // error, not as a peer's broken connection to a worker that gave up.
    const v1::CheckpointSpec& ckpt = spec_.checkpoint();
    if (absl::Status st = PrepareWrites(ckpt.directory(), ckpt.interval_steps(),
                                        "checkpoint.directory ");
        !st.ok()) {
      return st;
    }
    // Snapshots: the same checks in their own directory (api/snapshots.h).
    if (absl::Status st = PrepareWrites(SnapshotDirectory(ckpt.directory()),
                                        ckpt.snapshot_interval_steps(),
                                        "checkpoint.snapshot_interval_steps: ");
        !st.ok()) {
      return st;
    }
    if (ckpt.snapshot_interval_steps() > 0 && a_.replica() == 0) {
      snapshots_ = std::make_unique<SnapshotWriter>(SnapshotDirectory(ckpt.directory()),
                                                    a_.stage(), p, checkpoint_owner_);
    }
    absl::StatusOr<const CommunicatorFactory*> factory = Transport();
    if (!factory.ok()) return factory.status();
    const char* transport = TransportLabel(a_.transport());
    // Two groups meet through the attempt's scope: this replica's pipeline
    // (p ranks) and this stage's replicas (d ranks, when d > 1).
    auto join = [&](const std::string& group, int rank, int size,
                    const char* what) -> absl::StatusOr<std::unique_ptr<Communicator>> {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = (**factory)(a_, group, rank, size);
      if (!comm.ok()) {
        return WithContext(comm.status(),
                           absl::StrCat("joining the ", what, " ", transport, " group"));
      }
      return comm;
    };
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        join(absl::StrCat("pipeline", a_.replica()), a_.stage(), p, "pipeline's");
    if (!comm.ok()) return comm.status();
    comm_ = *std::move(comm);
    if (d > 1) {
      absl::StatusOr<std::unique_ptr<Communicator>> replicas =
          join(absl::StrCat("replicas", a_.stage()), a_.replica(), d, "data-parallel");
      if (!replicas.ok()) return replicas.status();
      data_parallel_ = *std::move(replicas);
    }

    if (trainer_ != nullptr) {
      // Held from the previous attempt at start_step - 1 (TakeHeld).
      if (absl::Status st = trainer_->Rejoin(comm_.get(), data_parallel_.get(), a_.replica(),
                                             a_.microbatch_offset(), a_.microbatches());
          !st.ok()) {
        return WithContext(st, "resuming from memory");
      }
    } else {
      StageTrainerOptions options;
      options.spec = spec_;
      options.stage = a_.stage();
      options.virtual_stages.assign(a_.virtual_stages().begin(), a_.virtual_stages().end());
      options.communicator = comm_.get();
      options.data_parallel = data_parallel_.get();
      options.replica = a_.replica();
      options.microbatch_offset = a_.microbatch_offset();
      options.microbatches = a_.microbatches();
      options.device = env_.device;
      options.train_batches = Sampler(*corpus, Split::kTrain, spec_);
      options.eval_batches = Sampler(*corpus, Split::kEval, spec_);
      options.timeout = env_.comm_timeout;
      options.faults = env_.faults;
      if (env_.synthetic.has_value()) {
        // The noise is drawn from the job's seed: every worker and every attempt
        // waits the same for the same pass.
        SyntheticComputeSource source = *env_.synthetic;
        source.seed = spec_.seed();
        absl::StatusOr<SyntheticCompute> synthetic = SyntheticFromCostModel(
            a_.schedule().cost_model(), a_.schedule().schedule().stage_of_size(), source);
        if (!synthetic.ok()) return JobError(synthetic.status());
        options.synthetic = *std::move(synthetic);
      }
      absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(options);
      if (!trainer.ok()) return JobError(trainer.status());
      trainer_ = *std::move(trainer);
      if (a_.has_restore()) {
        if (absl::Status st =
                trainer_->RestoreCheckpoint(a_.restore().directory(), a_.restore().step());
            !st.ok()) {
          return JobError(WithContext(st, "restoring the checkpoint"));
        }
      }
    }
    trainer_->StartAt(a_.start_step());
    // An AbortCommand releases a step blocked on a peer at once (the peer may
    // be dead) instead of after comm_timeout; a data-parallel reduction, which
    // Gloo cannot abort, stops being waited for.
    env_.state->SetAbortHook(a_.job_id(), a_.attempt(),
                             [c = comm_.get(), r = data_parallel_.get(), t = trainer_.get()] {
                               c->Abort();
                               if (r != nullptr) r->Abort();
                               t->AbortReductions();
                             });
    // A heal: the replicas that did not run the job's last steps take their
    // stage's state from a live one (docs/elastic.md, "Heal"). Until then a
    // newcomer's trainer holds nothing of the job worth keeping.
    if (a_.receive_state()) {
      if (absl::Status st =
              trainer_->CopyStateFromReplica(a_.state_source_replica(), a_.start_step());
          !st.ok()) {
        if (a_.replica() != a_.state_source_replica() && !a_.resume_from_memory()) {
          trainer_.reset();
        }
        return st;
      }
    }
    // T_comm of the link to the next stage (paper §5: profiled, not
    // assumed), with a message of one microbatch's activation, as the
    // pipeline sends them ([b, s, h] float32 on this worker's device): each
    // stage answers the previous one, then asks the next.
    const at::Tensor activation = at::zeros(
        {spec_.pipeline().microbatch_size(), spec_.model().seq_len(), spec_.model().hidden()},
        at::TensorOptions().dtype(at::kFloat).device(env_.device));
    if (a_.stage() > 0) {
      absl::StatusOr<double> answered =
          MeasureOneWayLatency(*comm_, a_.stage() - 1, /*initiator=*/false, kLatencyRounds,
                               env_.comm_timeout, activation);
      if (!answered.ok()) return WithContext(answered.status(), "latency probe");
    }
    if (a_.stage() + 1 < p) {
      absl::StatusOr<double> latency =
          MeasureOneWayLatency(*comm_, a_.stage() + 1, /*initiator=*/true, kLatencyRounds,
                               env_.comm_timeout, activation);
      if (!latency.ok()) return WithContext(latency.status(), "latency probe");
      next_hop_latency_ = *latency;
    }
    if (a_.profile()) {
      if (absl::Status st = ProfileAndReport(); !st.ok()) return st;
    }
    env_.state->SetPhase(v1::WORKER_PHASE_WAITING);
    return absl::OkStatus();
  }

  // Calibration (Assignment.profile), still PREPARING: profiles this stage's
  // virtual stages and sends them with the next hop's latency; the
  // coordinator grants the first step once every worker's profile is in.
  // The profile's errors are the model's (job errors); an abort meanwhile
  // ends the attempt quietly (Cancelled, as while loading the corpus).
  absl::Status ProfileAndReport() {
    // The layout parts first: every worker profiles the same parts, so
    // run first they run beside each other's, under the same load; each
    // worker's own virtual stages take their own time after them.
    // Synthetic compute has no model to cut: the coordinator then keeps the
    // layout it planned (FailedPrecondition, no job error).
    absl::StatusOr<std::vector<StageProfile>> parts = std::vector<StageProfile>();
    if (a_.layout_part_blocks() > 0) {
      parts = trainer_->ProfileLayoutParts(kLayoutPartRepetitions, a_.layout_part_blocks());
      if (!parts.ok() && !absl::IsFailedPrecondition(parts.status())) {
        return JobError(WithContext(parts.status(), "calibration profile"));
      }
    }
    absl::StatusOr<std::vector<StageProfile>> profiles = trainer_->Profile(kProfileRepetitions);
    if (!profiles.ok()) return JobError(WithContext(profiles.status(), "calibration profile"));
    v1::ReportProfileRequest request;
    request.set_worker_id(env_.reporter->worker_id());
    request.set_job_id(a_.job_id());
    request.set_attempt(a_.attempt());
    request.set_stage(a_.stage());
    request.set_replica(a_.replica());
    request.set_repetitions(kProfileRepetitions);
    auto add = [](const StageProfile& p, v1::VirtualStageProfile* v) {
      v->set_virtual_stage(p.virtual_stage);
      v->set_f_seconds(p.f_seconds);
      v->set_b_seconds(p.b_seconds);
      v->set_w_seconds(p.w_seconds);
      v->set_bw_seconds(p.bw_seconds);
      v->set_m_b_bytes(static_cast<double>(p.m_b_bytes));
      v->set_m_w_bytes(static_cast<double>(p.m_w_bytes));
      v->set_transient_bytes(static_cast<double>(p.transient_bytes));
    };
    for (const StageProfile& p : *profiles) add(p, request.add_virtual_stages());
    if (parts.ok()) {
      for (const StageProfile& p : *parts) add(p, request.add_layout_parts());
    }
    absl::StatusOr<std::optional<sched::VocabularyCost>> vocabulary =
        trainer_->ProfileVocabulary(kProfileRepetitions);
    if (!vocabulary.ok()) {
      return JobError(WithContext(vocabulary.status(), "calibration profile"));
    }
    if (vocabulary->has_value()) {
      v1::VocabularyCost* v = request.mutable_vocabulary();
      v->set_s_seconds((*vocabulary)->s_seconds);
      v->set_t_seconds((*vocabulary)->t_seconds);
      v->set_m_bytes((*vocabulary)->m_bytes);
      v->set_transient_bytes((*vocabulary)->transient_bytes);
    }
    if (next_hop_latency_.has_value()) {
      v1::HopLatency* hop = request.add_hop_latencies();
      hop->set_to_stage(a_.stage() + 1);
      hop->set_one_way_seconds(*next_hop_latency_);
    }
    const bool aborted_before = env_.state->Aborted(a_.job_id(), a_.attempt());
    absl::Status st = aborted_before ? absl::CancelledError("aborted while profiling")
                                     : env_.reporter->ReportProfile(request, env_.report_timeout);
    if (!st.ok() && env_.state->Aborted(a_.job_id(), a_.attempt())) {
      return absl::CancelledError("aborted while profiling");
    }
    return WithContext(st, "reporting the calibration profile");
  }

  // The factory of the assignment's transport (worker.proto
  // Assignment.transport), or why this worker cannot run it.
  absl::StatusOr<const CommunicatorFactory*> Transport() const {
    switch (a_.transport()) {
      case v1::TRANSPORT_AUTO:  // A coordinator that predates the field.
      case v1::TRANSPORT_GLOO:
        return &env_.communicators;
      case v1::TRANSPORT_NCCL:
        if (!env_.device.is_cuda()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the assignment's transport is NCCL, which needs a CUDA device; this worker "
              "runs on ", env_.device.str()));
        }
        if (!env_.nccl_communicators) {
          return absl::FailedPreconditionError(
              "transport NCCL: this worker binary was built without NCCL");
        }
        return &env_.nccl_communicators;
      default:
        return absl::FailedPreconditionError(absl::StrCat(
            "transport ", static_cast<int>(a_.transport()),
            " is unknown to this worker (a newer coordinator?)"));
    }
  }

  // The parsed and validated schedule in force at `step`.
  absl::StatusOr<const sched::Schedule*> ScheduleFor(int64_t step) {
    ControlState::VersionPtr version = env_.state->VersionFor(a_.job_id(), a_.attempt(), step);
    if (version == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("no schedule version for step ", step));
    }
    if (version->version() != version_number_) {
      absl::StatusOr<sched::Schedule> parsed = ScheduleFromProto(version->schedule());
      if (!parsed.ok()) return parsed.status();
      if (absl::Status st = trainer_->ValidateSchedule(*parsed); !st.ok()) {
        return JobError(WithContext(st, absl::StrCat("schedule version ", version->version())));
      }
      schedule_ = *std::move(parsed);
      version_number_ = version->version();
      validation_mode_ = version->validation() == v1::VALIDATION_MODE_POST
                             ? v1::VALIDATION_MODE_POST
                             : v1::VALIDATION_MODE_SYNCHRONOUS;
    }
    return &schedule_;
  }

  absl::Status RunOneStep(int64_t step) {
    absl::StatusOr<const sched::Schedule*> schedule = ScheduleFor(step);
    if (!schedule.ok()) return schedule.status();
    env_.state->SetPhase(v1::WORKER_PHASE_RUNNING);
    absl::StatusOr<StepResult> result = trainer_->RunStep(step, **schedule, validation_mode_);
    if (!result.ok()) return result.status();

    v1::ReportStepRequest report;
    const bool evaluates = EvaluatesAfter(step, a_.start_step(), spec_.steps());
    const v1::CheckpointSpec& ckpt = spec_.checkpoint();
    const bool checkpoints = ckpt.interval_steps() > 0 && (step + 1) % ckpt.interval_steps() == 0;
    const bool last = step == spec_.steps() - 1;
    // A snapshot where no checkpoint is written (docs/elastic.md, "Snapshots").
    const bool snapshots = snapshots_ != nullptr && !checkpoints && !last &&
                           (step + 1) % ckpt.snapshot_interval_steps() == 0;
    if (evaluates || checkpoints || snapshots || last) {
      // The parameters are read: this step's update must be validated first.
      absl::StatusOr<std::optional<StepValidation>> settled = trainer_->Settle();
      if (!settled.ok()) return WithContext(settled.status(), "validating the step");
      if (settled->has_value()) result->validations.push_back(**settled);
    }
    if (evaluates) {
      absl::StatusOr<std::optional<double>> eval =
          trainer_->Evaluate(step, **schedule, kEvalMicrobatches);
      if (!eval.ok()) return WithContext(eval.status(), "evaluation");
      if (eval->has_value()) report.set_eval_loss(**eval);
    }
    // One copy per stage: replica 0's (the replicas' parameters and
    // optimizer states are equal).
    if (checkpoints && a_.replica() == 0) {
      if (absl::Status st = WriteOwnedCheckpoint(
              ckpt.directory(), step, a_.stage(), spec_.pipeline().stages(), checkpoint_owner_,
              trainer_->OptimizerState(), ckpt.keep_last());
          !st.ok()) {
        return WithContext(st, "writing the checkpoint");
      }
      report.set_checkpoint_written(true);
      trainer_->MarkBetweenSteps(GapPhase::kCheckpoint);
    }
    if (snapshots) {
      // The copy now, the write while the next step runs.
      snapshots_->Submit(step, trainer_->CopyCheckpointState());
      trainer_->MarkBetweenSteps(GapPhase::kCheckpoint);
    }
    if (snapshots_ != nullptr) {
      if (std::optional<int64_t> written = snapshots_->durable_step()) {
        report.set_snapshot_step(*written);
      }
    }
    if (last) report.set_parameter_sum(trainer_->ParameterSum());
    Fill(step, **schedule, *result, report);
    trainer_->MarkBetweenSteps(GapPhase::kOther);
    // Nothing blocks on a peer until the next grant: an abort now leaves the
    // groups to StageTrainer::Hold (ControlState::SetQuiet).
    env_.state->SetQuiet();
    const absl::Status reported = Report(report);
    // Kept for the held state (HeldState.step_report), delivered or not: a
    // coordinator that stops before it has every stage's report records the
    // step from these once restarted.
    last_report_ = std::move(report);
    if (!reported.ok()) return reported;
    trainer_->MarkBetweenSteps(GapPhase::kReport);
    env_.state->SetProgress(step, version_number_);
    env_.state->SetPhase(v1::WORKER_PHASE_WAITING);
    return absl::OkStatus();
  }

  void Fill(int64_t step, const sched::Schedule& schedule, const StepResult& result,
            v1::ReportStepRequest& report) {
    report.set_worker_id(env_.reporter->worker_id());
    report.set_job_id(a_.job_id());
    report.set_attempt(a_.attempt());
    report.set_step(step);
    report.set_schedule_version(version_number_);
    report.set_stage(a_.stage());
    report.set_replica(a_.replica());
    FillStepMeasurements(result, schedule, a_.stage(), report);
    if (next_hop_latency_.has_value()) {
      v1::HopLatency* hop = report.add_hop_latencies();
      hop->set_to_stage(a_.stage() + 1);
      hop->set_one_way_seconds(*next_hop_latency_);
      next_hop_latency_.reset();  // One sample per attempt.
    }
  }

  absl::Status Report(const v1::ReportStepRequest& report) {
    return WithContext(env_.reporter->ReportStep(report, env_.report_timeout),
                       absl::StrCat("reporting step ", report.step()));
  }

  const v1::Assignment& a_;
  const AttemptEnvironment& env_;
  HeldStage& held_;
  const v1::JobSpec& spec_;
  const std::string checkpoint_owner_;  // CheckpointOwner(a_)
  // Replica 0's, with CheckpointSpec.snapshot_interval_steps; else null.
  std::unique_ptr<SnapshotWriter> snapshots_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Communicator> data_parallel_;  // Null when d = 1.
  std::unique_ptr<StageTrainer> trainer_;
  sched::Schedule schedule_;
  int64_t version_number_ = 0;
  v1::ValidationMode validation_mode_ = v1::VALIDATION_MODE_SYNCHRONOUS;
  std::optional<double> next_hop_latency_;
  // The last step's report, delivered or not.
  std::optional<v1::ReportStepRequest> last_report_;
  bool job_error_ = false;
  bool finished_ = false;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> AttemptGroupStore(const std::shared_ptr<grpc::Channel>& channel,
                                                  const SessionClient& session,
                                                  const v1::Assignment& assignment,
                                                  const std::string& group,
                                                  absl::Duration timeout) {
  // Each group under its own key prefix of the attempt's scope.
  const c10::intrusive_ptr<c10d::Store> store =
      CreateRendezvousStore(channel, session.worker_id(), assignment.rendezvous_scope(),
                            timeout, session.call_metadata());
  return c10::make_intrusive<c10d::PrefixStore>(group, store);
}

CommunicatorFactory GlooCommunicatorFactory(std::shared_ptr<grpc::Channel> channel,
                                            const SessionClient* session,
                                            std::string gloo_hostname, absl::Duration timeout) {
  return [channel = std::move(channel), session, gloo_hostname = std::move(gloo_hostname),
          timeout](const v1::Assignment& assignment, const std::string& group, int rank,
                   int size) {
    GlooOptions gloo;
    gloo.store = AttemptGroupStore(channel, *session, assignment, group, timeout);
    gloo.rank = rank;
    gloo.size = size;
    gloo.timeout = timeout;
    gloo.hostname = gloo_hostname;
    return CreateGlooCommunicator(gloo);
  };
}

const char* TransportLabel(v1::Transport transport) {
  return transport == v1::TRANSPORT_NCCL ? "NCCL" : "Gloo";
}

AttemptOutcome RunAttempt(const v1::Assignment& assignment, const AttemptEnvironment& env,
                          HeldStage& held) {
  AttemptRun run(assignment, env, held);
  try {
    absl::Status status = run.Run();
    const bool job_error = !status.ok() && run.job_error();
    if (!job_error && !run.finished()) run.HoldState();
    return {status, job_error};
  } catch (const std::exception& e) {
    // LibTorch reports misuse by exception; none should escape a daemon.
    return {absl::InternalError(absl::StrCat("job ", assignment.job_id(), ": ", e.what())),
            false};
  }
}

}  // namespace zbpp::worker
