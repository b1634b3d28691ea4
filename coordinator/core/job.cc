// Job: its state machine, views, watchers, attempts, grants and versions
// (job.h). Step reports, completion and re-solves: job_steps.cc.

#include "coordinator/core/job.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/time_proto.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/job_state.h"
#include "coordinator/core/schedule_file.h"

namespace zbpp::coordinator {

using zbpp::v1::JobEvent;
using zbpp::v1::SessionResponse;

Job::Job(int64_t seq, zbpp::v1::Job proto, const JobContext& context)
    : context_(context), seq_(seq), job_(std::move(proto)) {
  job_.clear_schedule();
}

int Job::stages() const { return job_.spec().pipeline().stages(); }

int Job::replicas() const { return DataParallelOf(job_.spec().pipeline()); }

std::string Job::scope() const { return absl::StrCat(id(), "/attempt-", attempt_); }

bool Job::Waiting() const {
  return state() == zbpp::v1::JOB_STATE_PENDING ||
         (state() == zbpp::v1::JOB_STATE_RECOVERING && workers_.empty());
}

zbpp::v1::Job Job::View(bool full) const {
  zbpp::v1::Job view = job_;
  if (full) {
    if (!versions_.empty()) *view.mutable_schedule() = versions_.latest();
    return view;
  }
  if (view.has_last_step()) view.mutable_last_step()->clear_stages();
  if (view.has_first_step()) view.mutable_first_step()->clear_stages();
  view.clear_last_step_timeline();
  return view;
}

// ------------------------------------------------------- state machine

absl::Status Job::SetState(zbpp::v1::JobState state, const std::string& message) {
  const zbpp::v1::JobState old = job_.state();
  if (absl::Status legal = Transition(old, state); !legal.ok()) {
    return absl::Status(legal.code(), absl::StrCat("job ", id(), ": ", legal.message()));
  }
  job_.set_state(state);
  job_.set_state_message(message);
  const absl::Time now = context_.clock->Now();
  if (state == zbpp::v1::JOB_STATE_RUNNING && !job_.has_start_time()) {
    *job_.mutable_start_time() = ToTimestamp(now);
  }
  if (state == zbpp::v1::JOB_STATE_RECOVERING) {
    job_.set_recoveries_total(job_.recoveries_total() + 1);
  }
  JobEvent event;
  zbpp::v1::JobStateChange* change = event.mutable_state_change();
  change->set_old_state(old);
  change->set_new_state(state);
  change->set_message(message);
  Emit(std::move(event), /*droppable=*/false);
  if (IsTerminal(state)) {
    *job_.mutable_end_time() = ToTimestamp(now);
    job_.clear_assignments();
    CloseWatchers(absl::OkStatus());
    if (context_.observer != nullptr) context_.observer->OnJobFinished(id());
  }
  return absl::OkStatus();
}

absl::Status Job::Fail(const std::string& why) {
  absl::Status failed = SetState(zbpp::v1::JOB_STATE_FAILED, why);
  Persist();
  if (!failed.ok()) return failed;
  return absl::FailedPreconditionError(absl::StrCat("job ", id(), " failed: ", why));
}

void Job::Persist() {
  context_.writer->Enqueue(
      [snapshot = job_](Store& store) { return store.UpdateJob(snapshot); },
      absl::StrCat("storing job ", id()));
}

void Job::Emit(JobEvent event, bool droppable) {
  event.set_job_id(id());
  event.set_sequence(++event_sequence_);
  *event.mutable_time() = ToTimestamp(context_.clock->Now());
  for (auto& watcher : watchers_) watcher->Push(event, droppable);
}

// ------------------------------------------------------------ watchers

std::shared_ptr<WatchOutbox> Job::Watch(size_t capacity) {
  auto outbox = std::make_shared<WatchOutbox>(capacity);
  JobEvent snapshot;
  snapshot.set_job_id(id());
  snapshot.set_sequence(++event_sequence_);
  *snapshot.mutable_time() = ToTimestamp(context_.clock->Now());
  *snapshot.mutable_snapshot() = View(/*full=*/false);
  outbox->Push(std::move(snapshot));
  if (IsTerminal(state())) {
    outbox->Close(absl::OkStatus());
  } else {
    watchers_.push_back(outbox);
  }
  return outbox;
}

void Job::Unwatch(const std::shared_ptr<WatchOutbox>& outbox) {
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), outbox),
                  watchers_.end());
}

void Job::CloseWatchers(const absl::Status& status) {
  for (auto& watcher : watchers_) watcher->Close(status);
  watchers_.clear();
}

// ------------------------------------------------------------ attempts

absl::Status Job::PrepareProblem(std::optional<sched::Schedule>* auto_choice) {
  const zbpp::v1::JobSpec& spec = job_.spec();
  // "auto" runs ChooseAutoSchedule's pick (job_spec_check.h): version 1 is
  // its schedule and the base problem is that schedule's (its chunks); a
  // restored job keeps the schedule its versions name.
  absl::StatusOr<sched::Problem> problem = absl::InternalError("no problem");
  if (spec.schedule().name() != kAutoScheduleName) {
    problem = context_.initial_problem(spec);
  } else if (!versions_.empty()) {
    problem = context_.initial_problem(
        AutoCandidateSpec(spec, versions_.latest().schedule().name()));
  } else {
    absl::StatusOr<AutoChoice> choice =
        ChooseAutoSchedule(spec, context_.initial_problem);
    if (choice.ok()) {
      problem = std::move(choice->problem);
      *auto_choice = std::move(choice->schedule);
    } else {
      problem = choice.status();
    }
  }
  if (!problem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cost model: ", problem.status().message()));
  }
  base_ = *std::move(problem);
  return absl::OkStatus();
}

absl::Status Job::PrepareModel() {
  const zbpp::v1::JobSpec& spec = job_.spec();
  const auto& resolve = spec.schedule().resolve();
  absl::StatusOr<std::unique_ptr<CostModel>> costs = CostModel::Create(
      {base_->num_stages(), resolve.has_window_steps() ? resolve.window_steps() : 8});
  ResolvePolicy::Options policy_options;
  policy_options.clock = context_.clock;
  policy_options.min_improvement_fraction =
      resolve.has_min_improvement() ? resolve.min_improvement() : 0.02;
  policy_options.data_parallel = replicas();
  absl::StatusOr<std::unique_ptr<ResolvePolicy>> policy =
      ResolvePolicy::Create(policy_options);
  if (!costs.ok() || !policy.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resolve policy: ", (costs.ok() ? policy.status() : costs.status()).message()));
  }
  costs_ = *std::move(costs);
  policy_ = *std::move(policy);
  validation_ = std::make_unique<ValidationPolicy>(
      spec.validation(), job_.validation_mode(), context_.validation_policy);
  return absl::OkStatus();
}

absl::Status Job::PublishFirstVersion(std::optional<sched::Schedule> auto_choice) {
  const zbpp::v1::JobSpec& spec = job_.spec();
  const std::string& name = spec.schedule().name();
  absl::StatusOr<sched::Schedule> schedule = absl::InternalError("no schedule");
  if (name == kAutoScheduleName) {
    if (auto_choice.has_value()) schedule = *std::move(auto_choice);
  } else if (!spec.schedule().file().empty()) {
    schedule = ScheduleFromFile(spec, *base_);
  } else {
    schedule = GenerateSchedule(name, *base_, replicas());
  }
  if (!schedule.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("schedule ", name, ": ", schedule.status().message()));
  }
  // Version 1 from the analytic cost model.
  absl::StatusOr<zbpp::v1::ScheduleVersion> version =
      BuildVersion(id(), *schedule, *base_, zbpp::v1::SCHEDULE_CHANGE_REASON_INITIAL,
                   "", nullptr);
  if (!version.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("schedule ", name, ": ", version.status().message()));
  }
  PublishVersion(*std::move(version), *schedule);
  return absl::OkStatus();
}

absl::Status Job::Prepare() {
  std::optional<sched::Schedule> auto_choice;
  if (!base_.has_value()) {
    if (absl::Status st = PrepareProblem(&auto_choice); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  if (costs_ == nullptr) {
    if (absl::Status st = PrepareModel(); !st.ok()) return Fail(std::string(st.message()));
  }
  start_step_ = std::max<int64_t>(0, job_.last_checkpoint_step() + 1);
  if (versions_.empty()) {
    if (absl::Status st = PublishFirstVersion(std::move(auto_choice)); !st.ok()) {
      return Fail(std::string(st.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<RankMemoryEstimate> Job::EstimateMemory() const {
  const zbpp::v1::ScheduleVersion* first = versions_.InForce(start_step_);
  if (first == nullptr) return {};
  return EstimateRankMemory(job_.spec(), *first);
}

void Job::NoteWaiting(const absl::Status& refused,
                      const std::vector<RankMemoryEstimate>& estimate) {
  // A job that fits no free worker waits, saying why, rather than having
  // its workers fail to allocate.
  if (!absl::IsResourceExhausted(refused) || estimate.empty()) return;
  const auto largest = std::max_element(
      estimate.begin(), estimate.end(),
      [](const auto& a, const auto& b) { return a.total_bytes() < b.total_bytes(); });
  std::string waiting = absl::StrCat(
      "waiting for workers: ", refused.message(), "; ",
      DescribeRankMemory(static_cast<int>(largest - estimate.begin()), *largest));
  if (job_.state_message() != waiting) {
    job_.set_state_message(std::move(waiting));
    Persist();
  }
}

absl::Status Job::BeginAttempt(std::vector<std::string> worker_ids) {
  ++attempt_;
  workers_ = std::move(worker_ids);
  const int needed = static_cast<int>(workers_.size());
  acknowledged_.clear();
  last_completed_.assign(needed, start_step_ - 1);
  granted_ = start_step_ - 1;
  pending_.clear();
  validations_.clear();
  job_.set_steps_completed(std::min(job_.steps_completed(), start_step_));
  job_.clear_assignments();
  for (int i = 0; i < needed; ++i) {
    zbpp::v1::StageAssignment* a = job_.add_assignments();
    a->set_stage(stage_of(i));
    a->set_replica(replica_of(i));
    a->set_worker_id(workers_[i]);
  }
  absl::Status status = absl::OkStatus();
  if (state() == zbpp::v1::JOB_STATE_PENDING) {
    status = SetState(zbpp::v1::JOB_STATE_ASSIGNING, "");
  } else {
    job_.set_state_message(absl::StrCat(job_.state_message(), "; attempt ", attempt_,
                                        " assigned, restarting at step ", start_step_));
  }
  // Versions after the one in force, one shared message each.
  std::vector<SessionMessage> later;
  for (const zbpp::v1::ScheduleVersion* version : versions_.After(start_step_)) {
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_schedule() = *version;
    later.push_back(std::move(message));
  }
  for (int i = 0; i < needed; ++i) {
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_assignment() = BuildAssignment(i);
    context_.workers->Send(workers_[i], std::move(message));
    for (const SessionMessage& version : later) context_.workers->Send(workers_[i], version);
  }
  UpdateGrant();
  Persist();
  return status;
}

bool Job::EndAttempt(const std::string& abort_reason) {
  if (workers_.empty()) return false;
  auto message = std::make_shared<SessionResponse>();
  zbpp::v1::Command* command = message->mutable_command();
  command->set_job_id(id());
  command->set_attempt(attempt_);
  command->mutable_abort()->set_reason(abort_reason);
  SendToWorkers(message);
  workers_.clear();
  acknowledged_.clear();
  last_completed_.clear();
  pending_.clear();
  validations_.clear();
  granted_ = -1;
  job_.clear_assignments();
  return true;
}

zbpp::v1::Assignment Job::BuildAssignment(int index) const {
  zbpp::v1::Assignment assignment;
  assignment.set_job_id(id());
  assignment.set_attempt(attempt_);
  *assignment.mutable_spec() = job_.spec();
  const int rank = stage_of(index);
  assignment.set_stage(rank);
  assignment.set_replica(replica_of(index));
  if (const zbpp::v1::ScheduleVersion* version = versions_.InForce(start_step_)) {
    const auto& owners = version->schedule().worker_of_stage();
    for (int s = 0; s < owners.size(); ++s) {
      if (owners[s] == rank) assignment.add_virtual_stages(s);
    }
    *assignment.mutable_schedule() = *version;
  }
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    zbpp::v1::Peer* peer = assignment.add_peers();
    peer->set_stage(stage_of(i));
    peer->set_replica(replica_of(i));
    peer->set_worker_id(workers_[i]);
    if (const zbpp::v1::WorkerDescription* d = context_.workers->Description(workers_[i])) {
      *peer->mutable_description() = *d;
    }
  }
  assignment.set_rendezvous_scope(scope());
  assignment.set_start_step(start_step_);
  if (job_.last_checkpoint_step() >= 0) {
    assignment.mutable_restore()->set_step(job_.last_checkpoint_step());
    assignment.mutable_restore()->set_directory(job_.spec().checkpoint().directory());
  }
  return assignment;
}

void Job::ReplaySession(const std::string& worker_id, int index) {
  if (index < 0 || index >= static_cast<int>(workers_.size()) ||
      workers_[index] != worker_id) {
    return;
  }
  auto assignment = std::make_shared<SessionResponse>();
  *assignment->mutable_assignment() = BuildAssignment(index);
  context_.workers->Send(worker_id, std::move(assignment));
  for (const zbpp::v1::ScheduleVersion* version : versions_.After(start_step_)) {
    auto later = std::make_shared<SessionResponse>();
    *later->mutable_schedule() = *version;
    context_.workers->Send(worker_id, std::move(later));
  }
  if (granted_ >= start_step_) {
    auto grant = std::make_shared<SessionResponse>();
    grant->mutable_grant()->set_job_id(id());
    grant->mutable_grant()->set_attempt(attempt_);
    grant->mutable_grant()->set_through_step(granted_);
    context_.workers->Send(worker_id, std::move(grant));
  }
}

void Job::SendToWorkers(const SessionMessage& message) {
  for (const std::string& worker_id : workers_) context_.workers->Send(worker_id, message);
}

void Job::UpdateGrant() {
  if (workers_.empty()) return;
  // A failing store pauses every job here; the writer's recovery grants
  // again (Coordinator::ResumeGrants).
  if (!context_.writer->Healthy()) return;
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int64_t done : last_completed_) slowest = std::min(slowest, done);
  const int64_t through =
      std::min(slowest + context_.grant_lookahead_steps, job_.spec().steps() - 1);
  if (through <= granted_) return;
  granted_ = through;
  auto message = std::make_shared<SessionResponse>();
  zbpp::v1::StepGrant* grant = message->mutable_grant();
  grant->set_job_id(id());
  grant->set_attempt(attempt_);
  grant->set_through_step(through);
  SendToWorkers(message);
}

absl::StatusOr<bool> Job::Acknowledge(const std::string& worker_id) {
  acknowledged_.insert(worker_id);
  if (acknowledged_.size() != workers_.size() ||
      (state() != zbpp::v1::JOB_STATE_ASSIGNING &&
       state() != zbpp::v1::JOB_STATE_RECOVERING)) {
    return false;
  }
  if (absl::Status st = SetState(zbpp::v1::JOB_STATE_RUNNING, ""); !st.ok()) return st;
  return true;
}

absl::Status Job::RecoverAfterFailure(const std::string& why, int max_recoveries,
                                      bool count) {
  if (job_.steps_completed() != steps_at_failed_recovery_) {
    failed_recoveries_ = 0;
    steps_at_failed_recovery_ = job_.steps_completed();
  }
  if (count && ++failed_recoveries_ > max_recoveries) {
    return SetState(zbpp::v1::JOB_STATE_FAILED,
                    absl::StrCat(why, " (", max_recoveries,
                                 " recoveries made no progress)"));
  }
  return SetState(zbpp::v1::JOB_STATE_RECOVERING, why);
}

// ------------------------------------------------------------ versions

int64_t Job::PublishVersion(zbpp::v1::ScheduleVersion version,
                            const sched::Schedule& schedule) {
  versions_.Stamp(version, granted_, start_step_, context_.clock->Now());
  if (version.validation() == zbpp::v1::VALIDATION_MODE_UNSPECIFIED) {
    version.set_validation(validation_->mode());
  }
  context_.writer->Enqueue(
      [version](Store& store) { return store.AddScheduleVersion(version); },
      absl::StrCat("storing schedule version ", version.version(), " of job ", id()));
  versions_.Add(version, schedule);
  job_.set_schedule_version(version.version());
  job_.set_validation_mode(version.validation());
  if (context_.observer != nullptr) {
    context_.observer->OnScheduleVersion(id(), version.version());
  }
  if (watchers_.empty()) {
    ++event_sequence_;  // The event nobody watches: no copy of it.
  } else {
    JobEvent event;
    *event.mutable_schedule_change() = version;
    Emit(std::move(event), /*droppable=*/false);
  }
  const int64_t number = version.version();
  if (!workers_.empty()) {
    // One message for all p workers: the version is moved in, not copied.
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_schedule() = std::move(version);
    SendToWorkers(message);
  }
  return number;
}

// ------------------------------------------------------------ recovery

absl::Status Job::RestoreVersion(zbpp::v1::ScheduleVersion version) {
  return versions_.Restore(std::move(version));
}

absl::StatusOr<bool> Job::Restore(
    const std::vector<zbpp::v1::ValidationOutcome>& outcomes) {
  versions_.Sort();
  job_.clear_assignments();
  // The outcomes are stored as they are gathered, the job's counters with
  // the job after them: a crash in between would lose an increment.
  if (!IsTerminal(state())) {
    int64_t rollbacks = 0, skipped = 0, clipped = 0;
    for (const zbpp::v1::ValidationOutcome& o : outcomes) {
      validated_through_ = std::max(validated_through_, o.step());
      rollbacks += o.rolled_back_stages_size() > 0;
      skipped += o.decision() == zbpp::v1::VALIDATION_DECISION_SKIPPED;
      clipped += o.decision() == zbpp::v1::VALIDATION_DECISION_CLIPPED;
    }
    job_.set_rollbacks_total(rollbacks);
    job_.set_skipped_steps_total(skipped);
    job_.set_clipped_steps_total(clipped);
  }
  absl::Status status;
  switch (state()) {
    case zbpp::v1::JOB_STATE_ASSIGNING:
      status = SetState(zbpp::v1::JOB_STATE_PENDING, "coordinator restarted while assigning");
      break;
    case zbpp::v1::JOB_STATE_RUNNING:
      status = SetState(zbpp::v1::JOB_STATE_RECOVERING, "coordinator restarted");
      break;
    default:
      return false;
  }
  if (!status.ok()) return status;
  return true;
}

}  // namespace zbpp::coordinator
