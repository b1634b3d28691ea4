// Job: its state machine, views, watchers, attempts, grants and versions
// (job.h). Step reports, completion and re-solves: job_steps.cc.

#include "coordinator/core/job.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "api/time_proto.h"
#include "coordinator/core/checkpoint_directory.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_state.h"
#include "coordinator/core/schedule_file.h"

namespace zbpp::coordinator {

using zbpp::v1::JobEvent;
using zbpp::v1::SessionResponse;

Job::Job(int64_t seq, zbpp::v1::Job proto, const JobContext& context,
         std::shared_ptr<const std::string> schedule_file)
    : context_(context),
      seq_(seq),
      job_(std::move(proto)),
      schedule_file_(std::move(schedule_file)),
      attempt_(job_.spec().pipeline().stages(), DataParallelOf(job_.spec().pipeline())) {
  job_.clear_schedule();
  effects_.job_id = id();
}

JobEffects Job::TakeEffects() {
  JobEffects taken = std::move(effects_);
  effects_ = JobEffects();
  effects_.job_id = id();
  return taken;
}

std::string Job::scope() const { return attempt_.scope(id()); }

bool Job::Waiting() const {
  return state() == zbpp::v1::JOB_STATE_PENDING ||
         (state() == zbpp::v1::JOB_STATE_RECOVERING && !attempt_.active() &&
          !awaited_.has_value()) ||
         (state() == zbpp::v1::JOB_STATE_RUNNING && relayout_pending_ && !attempt_.active());
}

zbpp::v1::Job Job::View(bool full) const {
  zbpp::v1::Job view = job_;
  if (full) {
    if (!versions_.empty()) *view.mutable_schedule() = versions_.latest();
    // A schedule file's text may be MiBs (job_spec.proto); the full view of
    // one job carries it, lists do not.
    AttachScheduleFileText(schedule_file_, *view.mutable_spec());
    return view;
  }
  if (view.has_last_step()) view.mutable_last_step()->clear_stages();
  if (view.has_first_step()) view.mutable_first_step()->clear_stages();
  view.clear_last_step_timeline();
  return view;
}

// ------------------------------------------------------- state machine

absl::Status Job::ChangeState(zbpp::v1::JobState state, const std::string& message,
                              const std::optional<std::string>& abort_reason) {
  const zbpp::v1::JobState old = job_.state();
  // 1. The edge, before anything changes.
  const bool recovers_again =
      old == zbpp::v1::JOB_STATE_RECOVERING && state == zbpp::v1::JOB_STATE_RECOVERING;
  if (!recovers_again) {
    if (absl::Status legal = Transition(old, state); !legal.ok()) {
      return absl::Status(legal.code(), absl::StrCat("job ", id(), ": ", legal.message()));
    }
  }
  // 2. The attempt; a terminal job holds no worker, nor any state. An
  // attempt a fault ended leaves its workers holding their stages: the
  // recovery waits to hear what they hold (docs/elastic.md).
  const bool terminal = IsTerminal(state);
  const bool fault = state == zbpp::v1::JOB_STATE_RECOVERING;
  healing_ = false;
  const absl::Time now = context_.clock->Now();
  if (abort_reason.has_value() || terminal) {
    if (fault && attempt_.active()) awaited_ = EndingAttempt(now, /*heal=*/false);
    EndAttempt(abort_reason.value_or(message), fault);
  }
  if (terminal) DropHeld(abort_reason.value_or(message));
  // 3. The record.
  job_.set_state(state);
  job_.set_state_message(message);
  const bool running = IsRunning(state);
  if (running && !job_.has_start_time()) {
    *job_.mutable_start_time() = ToTimestamp(now);
  }
  // The replicas running steps: the attempt's while it runs (DEGRADED:
  // fewer than the spec's), none otherwise.
  job_.set_replicas_active(running ? attempt_.replicas() : 0);
  if (state == zbpp::v1::JOB_STATE_RECOVERING && !recovers_again) {
    job_.set_recoveries_total(job_.recoveries_total() + 1);
    restart_counted_ = false;
  }
  if (terminal) {
    *job_.mutable_end_time() = ToTimestamp(now);
    job_.clear_assignments();
  }
  RecordTransition(old, state, message, now);
  // 4. The store, 5. the watchers and metrics.
  Persist();
  EmitStateChange(old, state, message);
  if (terminal) {
    effects_.close_watchers = true;
    effects_.observations.push_back(FinishedObserved{});
  } else {
    ObserveReplicas();
  }
  return absl::OkStatus();
}

absl::Status Job::Fail(const std::string& why) {
  if (absl::Status failed = ChangeState(zbpp::v1::JOB_STATE_FAILED, why, why); !failed.ok()) {
    return failed;
  }
  return absl::FailedPreconditionError(absl::StrCat("job ", id(), " failed: ", why));
}

absl::Status Job::Cancel(const std::string& message) {
  if (IsTerminal(state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id(), " is already ", JobStateName(state())));
  }
  return ChangeState(zbpp::v1::JOB_STATE_CANCELLED, message,
                     absl::StrCat("job cancelled: ", message));
}

void Job::RecordTransition(zbpp::v1::JobState from, zbpp::v1::JobState to,
                           const std::string& message, absl::Time now) {
  zbpp::v1::JobTransition* transition = job_.add_transitions();
  transition->set_from(from);
  transition->set_to(to);
  *transition->mutable_time() = ToTimestamp(now);
  transition->set_steps_completed(job_.steps_completed());
  transition->set_message(message);
  const int excess = job_.transitions_size() - kMaxTransitions;
  if (excess > 0) job_.mutable_transitions()->DeleteSubrange(0, excess);
}

void Job::Persist() { effects_.writes.push_back(job_); }

void Job::ObserveReplicas() {
  const std::pair<int, int> now{job_.replicas_active(), static_cast<int>(spares_.size())};
  if (now == observed_replicas_) return;
  observed_replicas_ = now;
  effects_.observations.push_back(ReplicasObserved{now.first, now.second});
}

void Job::Emit(JobEvent event, bool droppable) {
  effects_.events.push_back({std::move(event), droppable});
}

void Job::EmitStateChange(zbpp::v1::JobState old_state, zbpp::v1::JobState new_state,
                          const std::string& message) {
  JobEvent event;
  zbpp::v1::JobStateChange* change = event.mutable_state_change();
  change->set_old_state(old_state);
  change->set_new_state(new_state);
  change->set_message(message);
  Emit(std::move(event), /*droppable=*/false);
}

std::shared_ptr<WatchOutbox> Job::Watch(size_t capacity) {
  return watchers_.Add(id(), context_.clock->Now(), View(/*full=*/false), capacity,
                       IsTerminal(state()));
}

// ------------------------------------------------------------ attempts

absl::StatusOr<std::optional<ScheduleChoice>> Job::PrepareModel() {
  zbpp::v1::Job planned = job_;  // Planning reads the schedule file.
  AttachScheduleFileText(schedule_file_, *planned.mutable_spec());
  return model_.Prepare(planned, versions_, context_);
}

absl::Status Job::Prepare() {
  absl::StatusOr<std::optional<ScheduleChoice>> first = PrepareModel();
  if (!first.ok()) return Fail(std::string(first.status().message()));
  const RestorePoint restore = NewestRestorePoint(job_);
  attempt_.set_start_step(restore.step + 1);
  // What the attempt restores is every stage's newest snapshot until it
  // writes newer ones; snapshots of the steps it runs again are rewritten.
  job_.clear_snapshot_steps();
  job_.set_last_snapshot_step(-1);
  for (int stage = 0; restore.snapshot && stage < stages(); ++stage) {
    NoteSnapshot(stage, restore.step);
  }
  if (!first->has_value()) {
    // A full attempt after a degrade runs the spec's m microbatches again
    // (docs/elastic.md), from its start step on.
    if (absl::Status planned =
            PublishReplicasVersion(replicas(), job_.spec().pipeline().microbatches());
        !planned.ok()) {
      return Fail(absl::StrCat("no schedule for ", replicas(), " replicas: ",
                               planned.message()));
    }
    return absl::OkStatus();
  }
  // Version 1 from the analytic cost model.
  ScheduleChoice& choice = **first;
  PublishVersion(BuildVersion(id(), choice.schedule, choice.problem, choice.simulation,
                              zbpp::v1::SCHEDULE_CHANGE_REASON_INITIAL, "", nullptr),
                 choice.schedule);
  return absl::OkStatus();
}

std::vector<StageMemoryEstimate> Job::EstimateMemory() const {
  const zbpp::v1::ScheduleVersion* first = versions_.InForce(attempt_.start_step());
  if (first == nullptr) return {};
  return EstimateStageMemory(job_.spec(), *first);
}

void Job::NoteWaiting(const absl::Status& refused,
                      const std::vector<StageMemoryEstimate>& estimate) {
  // A job that fits no free worker waits, saying why, rather than having
  // its workers fail to allocate.
  if (!absl::IsResourceExhausted(refused) || estimate.empty()) return;
  const auto largest = std::max_element(
      estimate.begin(), estimate.end(),
      [](const auto& a, const auto& b) { return a.total_bytes() < b.total_bytes(); });
  std::string waiting = absl::StrCat(
      "waiting for workers: ", refused.message(), "; ",
      DescribeStageMemory(static_cast<int>(largest - estimate.begin()), *largest));
  if (job_.state_message() != waiting) {
    job_.set_state_message(std::move(waiting));
    Persist();
  }
}

absl::Status Job::BeginAttempt(std::vector<std::string> worker_ids,
                               TransportChoice transport) {
  // A heal's attempt (DecideRecovery's shape) follows a DEGRADED one.
  if (!Waiting() && !resume_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id(), ": an attempt begins only while the job waits for workers, "
                     "not while ", JobStateName(state()),
                     attempt_.active() ? " with an attempt" : ""));
  }
  job_.set_transport(transport.transport);
  job_.set_transport_reason(std::move(transport.reason));
  effects_.observations.push_back(TransportObserved{job_.transport()});
  effects_.observations.push_back(
      LayoutObserved{std::vector<int>(job_.layout().begin(), job_.layout().end())});
  const AttemptShape shape = resume_.value_or(AttemptShape{});
  resume_.reset();
  // Before the attempt holds workers, so that a version it publishes
  // reaches them after their Assignment (LaterVersionMessages).
  ValidateOverTransport();
  const zbpp::v1::SchedulePolicy& policy = job_.spec().schedule();
  // A resumed attempt's costs are the measured ones of the attempt before:
  // no calibration (its profile would stop training for nothing).
  attempt_.Start(std::move(worker_ids),
                 !shape.from_memory && (!policy.has_calibrate() || policy.calibrate()), shape);
  attempt_began_ = context_.clock->Now();
  const int64_t start = attempt_.start_step();
  job_.set_steps_completed(std::min(job_.steps_completed(), start));
  job_.clear_assignments();
  const std::vector<std::string>& workers = attempt_.workers();
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    zbpp::v1::StageAssignment* a = job_.add_assignments();
    a->set_stage(stage_of(i));
    a->set_replica(replica_of(i));
    a->set_worker_id(workers[i]);
  }
  absl::Status status = absl::OkStatus();
  if (state() == zbpp::v1::JOB_STATE_PENDING) {
    status = ChangeState(zbpp::v1::JOB_STATE_ASSIGNING, "", std::nullopt);
  } else if (relayout_pending_) {
    // RUNNING goes on: the new layout's attempt (Relayout).
    relayout_pending_ = false;
    job_.set_state_message(absl::StrCat("layout ", LayoutText({job_.layout().begin(), job_.layout().end()}), " chosen at "
                                        "calibration; attempt ", attempt_.number(), " assigned"));
    Persist();
  } else {
    // RECOVERING stays so until every worker holds the attempt (Acknowledge).
    // A recovery that runs steps again is a restart (docs/elastic.md).
    if (!shape.from_memory && !restart_counted_) {
      restart_counted_ = true;
      job_.set_restarts_total(job_.restarts_total() + 1);
    }
    job_.set_state_message(absl::StrCat(
        job_.state_message(), "; attempt ", attempt_.number(), " assigned, ",
        shape.from_memory ? "resuming from memory" : "restarting", " at step ", start));
    Persist();
  }
  const std::vector<SessionMessage> later = LaterVersionMessages();
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    effects_.messages.push_back(
        {workers[i], attempt_.AssignmentMessage(i, job_, versions_, *context_.workers)});
    for (const SessionMessage& version : later) effects_.messages.push_back({workers[i], version});
  }
  UpdateGrant();
  return status;
}

void Job::EndAttempt(const std::string& abort_reason, bool keep_state) {
  if (!attempt_.active()) return;
  auto message = std::make_shared<SessionResponse>();
  zbpp::v1::Command* command = message->mutable_command();
  command->set_job_id(id());
  command->set_attempt(attempt_.number());
  command->mutable_abort()->set_reason(abort_reason);
  command->mutable_abort()->set_keep_state(keep_state);
  MessageWorkers(message);
  effects_.release_workers = true;
  effects_.deleted_scopes.push_back(scope());
  attempt_.End();
  job_.clear_assignments();
}

std::vector<SessionMessage> Job::LaterVersionMessages() const {
  std::vector<SessionMessage> later;
  for (const zbpp::v1::ScheduleVersion* version : versions_.After(attempt_.start_step())) {
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_schedule() = *version;
    later.push_back(std::move(message));
  }
  return later;
}

void Job::ReplaySession(const std::string& worker_id, int index) {
  const std::vector<std::string>& workers = attempt_.workers();
  if (index < 0 || index >= static_cast<int>(workers.size()) ||
      workers[index] != worker_id) {
    return;
  }
  effects_.messages.push_back(
      {worker_id, attempt_.AssignmentMessage(index, job_, versions_, *context_.workers)});
  for (SessionMessage& version : LaterVersionMessages()) {
    effects_.messages.push_back({worker_id, std::move(version)});
  }
  if (attempt_.granted() >= attempt_.start_step()) {
    effects_.messages.push_back({worker_id, attempt_.GrantMessage(id())});
  }
}

void Job::MessageWorkers(const SessionMessage& message) {
  for (const std::string& worker_id : attempt_.workers()) {
    effects_.messages.push_back({worker_id, message});
  }
}

void Job::UpdateGrant() {
  if (!attempt_.active()) return;
  // A failing store pauses every job here; the writer's recovery grants
  // again (Coordinator::ResumeGrants).
  if (context_.store_healthy && !context_.store_healthy()) return;
  // A heal grants up to the step it ends after (BeginHeal).
  if (attempt_.NextGrant(context_.grant_lookahead_steps,
                         healing_ ? heal_through_ : job_.spec().steps() - 1)) {
    MessageWorkers(attempt_.GrantMessage(id()));
  }
}

absl::StatusOr<bool> Job::Acknowledge(const std::string& worker_id) {
  // A degraded attempt keeps the message that says how it degraded; a
  // healed one takes a DEGRADED job back to RUNNING.
  const bool degraded = attempt_.replicas() < replicas();
  if (!attempt_.Acknowledge(worker_id) ||
      (state() != zbpp::v1::JOB_STATE_ASSIGNING &&
       state() != zbpp::v1::JOB_STATE_RECOVERING &&
       (state() != zbpp::v1::JOB_STATE_DEGRADED || degraded))) {
    return false;
  }
  // RUNNING says how the job came back (Job.transitions), and only then.
  if (absl::Status st = ChangeState(
          degraded ? zbpp::v1::JOB_STATE_DEGRADED : zbpp::v1::JOB_STATE_RUNNING,
          degraded ? job_.state_message() : std::exchange(recovered_how_, ""), std::nullopt);
      !st.ok()) {
    return st;
  }
  return true;
}

absl::Status Job::AfterWorkerLost(const std::string& why) {
  const std::string abort_reason = absl::StrCat("attempt ended: ", why);
  switch (state()) {
    case zbpp::v1::JOB_STATE_ASSIGNING:
      return ChangeState(zbpp::v1::JOB_STATE_PENDING, why, abort_reason);
    case zbpp::v1::JOB_STATE_RUNNING:
    case zbpp::v1::JOB_STATE_DEGRADED:
    case zbpp::v1::JOB_STATE_RECOVERING:
      return ChangeState(zbpp::v1::JOB_STATE_RECOVERING, why, abort_reason);
    default:
      return absl::OkStatus();
  }
}

absl::Status Job::CheckCalibrationDeadline(absl::Time now, absl::Duration timeout,
                                           int max_recoveries, bool count) {
  if (!attempt_.active() || now - attempt_began_ < timeout) return absl::OkStatus();
  const std::vector<int> missing = attempt_.MissingProfiles();
  if (missing.empty()) return absl::OkStatus();
  const int index = missing.front();
  const std::string worker_id = attempt_.workers().at(index);
  const std::string error = absl::StrCat(
      "sent no calibration profile within ", absl::FormatDuration(timeout), " (", missing.size(),
      " of ", attempt_.workers().size(), " workers missing; calibration_timeout_seconds)");
  if (state() == zbpp::v1::JOB_STATE_ASSIGNING) {
    return AfterWorkerLost(WorkerFailure(worker_id, index, error));
  }
  return AfterWorkerFailed(worker_id, index, error, /*job_error=*/false, max_recoveries, count);
}

std::string Job::WorkerFailure(const std::string& worker_id, int index,
                               const std::string& error) const {
  return absl::StrCat(
      "worker ", worker_id, " (stage ", stage_of(index),
      replicas() > 1 ? absl::StrCat(", replica ", replica_of(index)) : std::string(),
      ") failed: ", error);
}

absl::Status Job::AfterWorkerFailed(const std::string& worker_id, int index,
                                    const std::string& error, bool job_error,
                                    int max_recoveries, bool count) {
  const std::string why = WorkerFailure(worker_id, index, error);
  const zbpp::v1::JobState now = state();
  // The job cannot run (or never started): retrying would fail again.
  if (job_error || now == zbpp::v1::JOB_STATE_ASSIGNING) {
    return ChangeState(zbpp::v1::JOB_STATE_FAILED, why, why);
  }
  if (now != zbpp::v1::JOB_STATE_RUNNING && now != zbpp::v1::JOB_STATE_DEGRADED &&
      now != zbpp::v1::JOB_STATE_RECOVERING) {
    return absl::OkStatus();
  }
  // Failures in a row: a step completed since the last one starts a new row.
  int failures = failed_recoveries_;
  if (job_.steps_completed() != steps_at_failed_recovery_) failures = 0;
  if (count) ++failures;
  const bool give_up = failures > max_recoveries;
  absl::Status status =
      give_up ? ChangeState(zbpp::v1::JOB_STATE_FAILED,
                            absl::StrCat(why, " (", max_recoveries,
                                         " recoveries made no progress)"),
                            why)
              : ChangeState(zbpp::v1::JOB_STATE_RECOVERING, why, why);
  if (status.ok()) {
    failed_recoveries_ = failures;
    steps_at_failed_recovery_ = job_.steps_completed();
  }
  return status;
}

// ------------------------------------------------------------ recovery

absl::Status Job::RestoreVersion(zbpp::v1::ScheduleVersion version) {
  return versions_.Restore(std::move(version));
}

absl::Status Job::Restore(const std::vector<zbpp::v1::ValidationOutcome>& outcomes) {
  versions_.Sort();
  // The attempt in force when the coordinator stopped: p workers for each
  // replica it ran.
  const int attempt_workers = job_.assignments_size();
  job_.clear_assignments();
  // The snapshot steps stored may be older than the files kept (reports
  // after the job was last stored are lost; api/snapshots.h kSnapshotsKept):
  // only what the workers say from now on is restored from.
  job_.clear_snapshot_steps();
  job_.set_last_snapshot_step(-1);
  // The outcomes are stored as they are gathered, the job's counters with
  // the job after them: a crash in between would lose an increment.
  if (!IsTerminal(state())) {
    job_.set_rollbacks_total(0);
    job_.set_skipped_steps_total(0);
    job_.set_clipped_steps_total(0);
    counted_validations_.clear();
    for (const zbpp::v1::ValidationOutcome& o : outcomes) {
      validated_through_ = std::max(validated_through_, o.step());
      CountValidation(o);
    }
  }
  // The workers of the old process must register again.
  switch (state()) {
    case zbpp::v1::JOB_STATE_ASSIGNING:
      return ChangeState(zbpp::v1::JOB_STATE_PENDING, "coordinator restarted while assigning",
                         std::nullopt);
    case zbpp::v1::JOB_STATE_RUNNING:
    case zbpp::v1::JOB_STATE_DEGRADED:
      // They kept their stages when they left the attempt: the recovery
      // waits to hear what they hold, as after a fault (docs/elastic.md,
      // "Coordinator restart").
      if (attempt_workers > 0 && attempt_workers % stages() == 0 &&
          attempt_workers / stages() <= replicas()) {
        awaited_ = EndedAttempt{0, std::vector<std::string>(attempt_workers),
                                context_.clock->Now(), /*heal=*/false,
                                std::vector<bool>(attempt_workers, false), /*restored=*/true};
      }
      return ChangeState(zbpp::v1::JOB_STATE_RECOVERING, "coordinator restarted",
                         std::nullopt);
    default:
      return absl::OkStatus();
  }
}

}  // namespace zbpp::coordinator
