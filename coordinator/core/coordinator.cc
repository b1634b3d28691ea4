#include "coordinator/core/coordinator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/job_state.h"
#include "api/schedule_proto.h"
#include "api/schedule_version.h"
#include "api/time_proto.h"
#include "coordinator/core/coordinator_internal.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/job_state.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/schedule_file.h"
#include "coordinator/core/worker_credential.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace internal {

void LogError(const absl::Status& status, const std::string& context) {
  if (!status.ok()) {
    std::fprintf(stderr, "zbpp-coordinator: %s: %s\n", context.c_str(),
                 status.ToString().c_str());
  }
}

absl::StatusOr<zbpp::v1::ScheduleVersion> BuildVersion(
    const std::string& job_id, const sched::Schedule& schedule,
    const sched::Problem& costs, zbpp::v1::ScheduleChangeReason reason,
    const std::string& detail, const zbpp::v1::SchedulePrediction* previous) {
  absl::StatusOr<sched::SimulationResult> simulated =
      sched::Simulate(costs, schedule);
  if (!simulated.ok()) return simulated.status();
  zbpp::v1::ScheduleVersion version;
  version.set_job_id(job_id);
  *version.mutable_schedule() = ScheduleToProto(schedule);
  *version.mutable_cost_model() = CostModelToProto(costs);
  *version.mutable_predicted() = PredictionToProto(*simulated);
  if (previous != nullptr) *version.mutable_previous_predicted() = *previous;
  version.set_reason(reason);
  version.set_reason_detail(detail);
  return version;
}

}  // namespace internal

using internal::BuildVersion;
using internal::LogError;
using zbpp::v1::JobEvent;
using zbpp::v1::SessionResponse;

Coordinator::Coordinator(Options options) : options_(std::move(options)) {}

Coordinator::~Coordinator() {
  StopResolveThread();
  // Drains the writes (retrying a failing one up to store_drain_timeout)
  // while everything its on_recovered callback touches is still alive.
  writer_.reset();
  absl::MutexLock lock(&mu_);
  for (auto& [id, slot] : sessions_) {
    slot.outbox->Close(absl::UnavailableError("coordinator shutting down"));
  }
  for (auto& [seq, job] : jobs_) {
    for (auto& watcher : job->watchers) {
      watcher->Close(absl::UnavailableError("coordinator shutting down"));
    }
  }
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    Options options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("Coordinator::Options.clock is null");
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("Coordinator::Options.store is null");
  }
  if (!options.validate_spec || !options.initial_problem) {
    return absl::InvalidArgumentError(
        "Coordinator::Options.validate_spec and initial_problem are required");
  }
  if (!(options.heartbeat_interval_seconds > 0) ||
      !(options.heartbeat_timeout_seconds >
        options.heartbeat_interval_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 0 < heartbeat_interval_seconds < heartbeat_timeout_seconds, got ",
        options.heartbeat_interval_seconds, " and ",
        options.heartbeat_timeout_seconds));
  }
  if (options.max_recoveries_without_progress < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_recoveries_without_progress must be >= 1, got ",
                     options.max_recoveries_without_progress));
  }
  if (options.grant_lookahead_steps < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("grant_lookahead_steps must be >= 2 (1 would hold every rank at "
                     "each step boundary), got ",
                     options.grant_lookahead_steps));
  }
  std::unique_ptr<Coordinator> coordinator(new Coordinator(options));
  absl::StatusOr<std::unique_ptr<Membership>> membership =
      Membership::Create({options.clock, options.heartbeat_timeout_seconds,
                          options.max_workers,
                          options.lost_worker_retention_seconds});
  if (!membership.ok()) return membership.status();
  coordinator->membership_ = *std::move(membership);
  absl::StatusOr<std::unique_ptr<RendezvousStore>> rendezvous =
      RendezvousStore::Create({});
  if (!rendezvous.ok()) return rendezvous.status();
  coordinator->rendezvous_ = *std::move(rendezvous);
  StoreWriter::Options writer_options;
  writer_options.store = options.store;
  writer_options.initial_backoff = options.store_retry_initial_backoff;
  writer_options.max_backoff = options.store_retry_max_backoff;
  writer_options.drain_timeout = options.store_drain_timeout;
  Coordinator* self = coordinator.get();
  writer_options.on_recovered = [self] { self->ResumeGrants(); };
  absl::StatusOr<std::unique_ptr<StoreWriter>> writer =
      StoreWriter::Create(std::move(writer_options));
  if (!writer.ok()) return writer.status();
  coordinator->writer_ = *std::move(writer);
  if (options.resolve_on_background_thread) {
    coordinator->resolve_thread_ = std::thread([self] { self->ResolveLoop(); });
  }
  return coordinator;
}

// ------------------------------------------------------------- helpers

Coordinator::JobRuntime* Coordinator::FindJob(const std::string& job_id) const {
  auto it = seq_of_job_.find(job_id);
  if (it == seq_of_job_.end()) return nullptr;
  return jobs_.at(it->second).get();
}

void Coordinator::PersistJob(JobRuntime& job) {
  writer_->Enqueue([snapshot = job.job](Store& store) {
    return store.UpdateJob(snapshot);
  }, absl::StrCat("storing job ", job.job.id()));
}

absl::Status Coordinator::FlushStore() { return writer_->Flush(); }

StoreWriter::Health Coordinator::StoreHealth() const {
  return writer_->GetHealth();
}

void Coordinator::ResumeGrants() {
  absl::MutexLock lock(&mu_);
  for (auto& [seq, job] : jobs_) UpdateGrant(*job);
}

void Coordinator::Emit(JobRuntime& job, JobEvent event, bool droppable) {
  event.set_job_id(job.job.id());
  event.set_sequence(++job.event_sequence);
  *event.mutable_time() = ToTimestamp(options_.clock->Now());
  for (auto& watcher : job.watchers) watcher->Push(event, droppable);
}

void Coordinator::SetState(JobRuntime& job, zbpp::v1::JobState state,
                           const std::string& message) {
  const zbpp::v1::JobState old = job.job.state();
  if (absl::Status legal = Transition(old, state);
      !legal.ok()) {
    LogError(legal, absl::StrCat("job ", job.job.id()));
    return;
  }
  job.job.set_state(state);
  job.job.set_state_message(message);
  const absl::Time now = options_.clock->Now();
  if (state == zbpp::v1::JOB_STATE_RUNNING && !job.job.has_start_time()) {
    *job.job.mutable_start_time() = ToTimestamp(now);
  }
  if (state == zbpp::v1::JOB_STATE_RECOVERING) {
    job.job.set_recoveries_total(job.job.recoveries_total() + 1);
  }
  JobEvent event;
  zbpp::v1::JobStateChange* change = event.mutable_state_change();
  change->set_old_state(old);
  change->set_new_state(state);
  change->set_message(message);
  Emit(job, std::move(event), /*droppable=*/false);
  if (IsTerminal(state)) {
    *job.job.mutable_end_time() = ToTimestamp(now);
    job.job.clear_assignments();
    for (auto& watcher : job.watchers) watcher->Close(absl::OkStatus());
    job.watchers.clear();
    if (options_.observer != nullptr) {
      options_.observer->OnJobFinished(job.job.id());
    }
  }
}

void Coordinator::SendToWorker(const std::string& worker_id,
                               SessionMessage message) {
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) return;  // Replayed when the Session reopens.
  it->second.outbox->Push(std::move(message));
}

void Coordinator::SendToJobWorkers(JobRuntime& job,
                                   const SessionMessage& message) {
  for (const std::string& worker_id : job.workers) {
    SendToWorker(worker_id, message);
  }
}

zbpp::v1::Assignment Coordinator::BuildAssignment(const JobRuntime& job,
                                                  int index) const {
  zbpp::v1::Assignment assignment;
  assignment.set_job_id(job.job.id());
  assignment.set_attempt(job.attempt);
  *assignment.mutable_spec() = job.job.spec();
  const int rank = job.stage_of(index);
  assignment.set_stage(rank);
  assignment.set_replica(job.replica_of(index));
  const zbpp::v1::ScheduleVersion* version =
      VersionInForce(job.versions, job.start_step);
  if (version != nullptr) {
    const auto& owners = version->schedule().worker_of_stage();
    for (int s = 0; s < owners.size(); ++s) {
      if (owners[s] == rank) assignment.add_virtual_stages(s);
    }
    *assignment.mutable_schedule() = *version;
  }
  for (int i = 0; i < static_cast<int>(job.workers.size()); ++i) {
    zbpp::v1::Peer* peer = assignment.add_peers();
    peer->set_stage(job.stage_of(i));
    peer->set_replica(job.replica_of(i));
    peer->set_worker_id(job.workers[i]);
    auto it = descriptions_.find(job.workers[i]);
    if (it != descriptions_.end()) *peer->mutable_description() = it->second;
  }
  assignment.set_rendezvous_scope(job.scope());
  assignment.set_start_step(job.start_step);
  if (job.job.last_checkpoint_step() >= 0) {
    assignment.mutable_restore()->set_step(job.job.last_checkpoint_step());
    assignment.mutable_restore()->set_directory(
        job.job.spec().checkpoint().directory());
  }
  return assignment;
}

int64_t Coordinator::PublishVersion(
    JobRuntime& job, zbpp::v1::ScheduleVersion version,
    const sched::Schedule& schedule) {
  version.set_version(static_cast<int64_t>(job.versions.size()) + 1);
  // Strictly after every step already granted and after the previous
  // version's first step: no worker can have started the new version's
  // first step under the old one (worker.proto StepGrant).
  int64_t effective = job.start_step;
  if (!job.versions.empty()) {
    effective = std::max({job.granted + 1,
                          job.versions.back().effective_step() + 1,
                          job.start_step});
  }
  version.set_effective_step(effective);
  *version.mutable_publish_time() = ToTimestamp(options_.clock->Now());
  if (version.validation() == zbpp::v1::VALIDATION_MODE_UNSPECIFIED) {
    version.set_validation(job.validation->mode());
  }
  writer_->Enqueue(
      [version](Store& store) { return store.AddScheduleVersion(version); },
      absl::StrCat("storing schedule version ", version.version(), " of job ",
                   job.job.id()));
  job.versions.push_back(version);
  job.parsed[version.version()] = schedule;
  job.job.set_schedule_version(version.version());
  job.job.set_validation_mode(version.validation());
  if (options_.observer != nullptr) {
    options_.observer->OnScheduleVersion(job.job.id(), version.version());
  }
  if (job.watchers.empty()) {
    ++job.event_sequence;  // The event nobody watches: no copy of it.
  } else {
    JobEvent event;
    *event.mutable_schedule_change() = version;
    Emit(job, std::move(event), /*droppable=*/false);
  }
  const int64_t number = version.version();
  if (!job.workers.empty()) {
    // One message for all p workers: the version is moved in, not copied.
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_schedule() = std::move(version);
    SendToJobWorkers(job, message);
  }
  return number;
}

void Coordinator::UpdateGrant(JobRuntime& job) {
  if (job.workers.empty()) return;
  // A failing store pauses every job here; ResumeGrants undoes it.
  if (!writer_->Healthy()) return;
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int64_t done : job.last_completed) slowest = std::min(slowest, done);
  const int64_t through =
      std::min(slowest + options_.grant_lookahead_steps,
               job.job.spec().steps() - 1);
  if (through <= job.granted) return;
  job.granted = through;
  auto message = std::make_shared<SessionResponse>();
  zbpp::v1::StepGrant* grant = message->mutable_grant();
  grant->set_job_id(job.job.id());
  grant->set_attempt(job.attempt);
  grant->set_through_step(through);
  SendToJobWorkers(job, message);
}

absl::Status Coordinator::FailJob(JobRuntime& job, const std::string& why) {
  SetState(job, zbpp::v1::JOB_STATE_FAILED, why);
  PersistJob(job);
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job.job.id(), " failed: ", why));
}

absl::Status Coordinator::StartAttempt(JobRuntime& job) {
  const zbpp::v1::JobSpec& spec = job.job.spec();
  const int replicas = job.replicas();
  const int needed = job.stages() * replicas;
  if (membership_->CountAssignable() < needed) {
    return absl::ResourceExhaustedError("too few free workers");
  }
  // "auto" runs ChooseAutoSchedule's pick (job_spec_check.h): version 1 is
  // its schedule and the base problem is that schedule's (its chunks); a
  // restored job keeps the schedule its versions name.
  std::optional<sched::Schedule> auto_choice;
  if (!job.base.has_value()) {
    absl::StatusOr<sched::Problem> problem = absl::InternalError("no problem");
    if (spec.schedule().name() != kAutoScheduleName) {
      problem = options_.initial_problem(spec);
    } else if (!job.versions.empty()) {
      problem = options_.initial_problem(AutoCandidateSpec(
          spec, job.versions.back().schedule().name()));
    } else {
      absl::StatusOr<AutoChoice> choice =
          ChooseAutoSchedule(spec, options_.initial_problem);
      if (choice.ok()) {
        problem = std::move(choice->problem);
        auto_choice = std::move(choice->schedule);
      } else {
        problem = choice.status();
      }
    }
    if (!problem.ok()) {
      return FailJob(job, absl::StrCat("cost model: ", problem.status().message()));
    }
    job.base = *std::move(problem);
  }
  if (job.costs == nullptr) {
    const auto& resolve = spec.schedule().resolve();
    absl::StatusOr<std::unique_ptr<CostModel>> costs = CostModel::Create(
        {job.base->num_stages(),
         resolve.has_window_steps() ? resolve.window_steps() : 8});
    ResolvePolicy::Options policy_options;
    policy_options.clock = options_.clock;
    policy_options.min_improvement_fraction =
        resolve.has_min_improvement() ? resolve.min_improvement() : 0.02;
    policy_options.data_parallel = replicas;
    absl::StatusOr<std::unique_ptr<ResolvePolicy>> policy =
        ResolvePolicy::Create(policy_options);
    if (!costs.ok() || !policy.ok()) {
      return FailJob(job, absl::StrCat("resolve policy: ",
                                       (costs.ok() ? policy.status()
                                                   : costs.status())
                                           .message()));
    }
    job.costs = *std::move(costs);
    job.policy = *std::move(policy);
    job.validation = std::make_unique<ValidationPolicy>(
        spec.validation(), job.job.validation_mode(), options_.validation_policy);
  }
  job.start_step = std::max<int64_t>(0, job.job.last_checkpoint_step() + 1);
  if (job.versions.empty()) {
    // Version 1 from the analytic cost model.
    const std::string& name = spec.schedule().name();
    absl::StatusOr<sched::Schedule> schedule =
        absl::InternalError("no schedule");
    if (name == kAutoScheduleName) {
      if (auto_choice.has_value()) schedule = *std::move(auto_choice);
    } else if (!spec.schedule().file().empty()) {
      schedule = ScheduleFromFile(spec, *job.base);
    } else {
      schedule = GenerateSchedule(name, *job.base, replicas);
    }
    if (!schedule.ok()) {
      return FailJob(job, absl::StrCat("schedule ", name, ": ",
                                       schedule.status().message()));
    }
    absl::StatusOr<zbpp::v1::ScheduleVersion> version = BuildVersion(
        job.job.id(), *schedule, *job.base,
        zbpp::v1::SCHEDULE_CHANGE_REASON_INITIAL, "", nullptr);
    if (!version.ok()) {
      return FailJob(job, absl::StrCat("schedule ", name, ": ",
                                       version.status().message()));
    }
    PublishVersion(job, *std::move(version), *schedule);
  }
  // Every rank must fit its worker's reported memory (memory_estimate.h);
  // a job that fits no free worker waits, saying why, rather than having
  // its workers fail to allocate.
  std::vector<RankMemoryEstimate> estimate;
  if (const zbpp::v1::ScheduleVersion* first =
          VersionInForce(job.versions, job.start_step);
      first != nullptr) {
    estimate = EstimateRankMemory(spec, *first);
  }
  std::vector<double> needs;
  for (const RankMemoryEstimate& rank : estimate) {
    needs.push_back(rank.total_bytes());
  }
  absl::StatusOr<Assignment> assigned =
      membership_->Assign(job.job.id(), needed, needs);
  if (!assigned.ok()) {
    if (absl::IsResourceExhausted(assigned.status()) && !estimate.empty()) {
      const auto largest = std::max_element(
          estimate.begin(), estimate.end(), [](const auto& a, const auto& b) {
            return a.total_bytes() < b.total_bytes();
          });
      std::string waiting = absl::StrCat(
          "waiting for workers: ", assigned.status().message(), "; ",
          DescribeRankMemory(static_cast<int>(largest - estimate.begin()),
                             *largest));
      if (job.job.state_message() != waiting) {
        job.job.set_state_message(std::move(waiting));
        PersistJob(job);
      }
    }
    return assigned.status();
  }

  ++job.attempt;
  job.workers = assigned->worker_ids;
  job.acknowledged.clear();
  job.last_completed.assign(needed, job.start_step - 1);
  job.granted = job.start_step - 1;
  job.pending.clear();
  job.validations.clear();
  job.job.set_steps_completed(
      std::min(job.job.steps_completed(), job.start_step));
  job.job.clear_assignments();
  for (int i = 0; i < needed; ++i) {
    zbpp::v1::StageAssignment* a = job.job.add_assignments();
    a->set_stage(job.stage_of(i));
    a->set_replica(job.replica_of(i));
    a->set_worker_id(job.workers[i]);
  }
  if (job.job.state() == zbpp::v1::JOB_STATE_PENDING) {
    SetState(job, zbpp::v1::JOB_STATE_ASSIGNING, "");
  } else {
    job.job.set_state_message(
        absl::StrCat(job.job.state_message(), "; attempt ", job.attempt,
                     " assigned, restarting at step ", job.start_step));
  }
  const zbpp::v1::ScheduleVersion* in_force =
      VersionInForce(job.versions, job.start_step);
  // Versions after the one in force, one shared message each.
  std::vector<SessionMessage> later;
  for (const auto& version : job.versions) {
    if (in_force != nullptr &&
        version.effective_step() > in_force->effective_step()) {
      auto message = std::make_shared<SessionResponse>();
      *message->mutable_schedule() = version;
      later.push_back(std::move(message));
    }
  }
  for (int i = 0; i < needed; ++i) {
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_assignment() = BuildAssignment(job, i);
    SendToWorker(job.workers[i], std::move(message));
    for (const SessionMessage& version : later) {
      SendToWorker(job.workers[i], version);
    }
  }
  UpdateGrant(job);
  PersistJob(job);
  return absl::OkStatus();
}

void Coordinator::EndAttempt(JobRuntime& job, const std::string& abort_reason) {
  if (job.workers.empty()) return;
  auto message = std::make_shared<SessionResponse>();
  zbpp::v1::Command* command = message->mutable_command();
  command->set_job_id(job.job.id());
  command->set_attempt(job.attempt);
  command->mutable_abort()->set_reason(abort_reason);
  SendToJobWorkers(job, message);
  membership_->Release(job.job.id());
  rendezvous_->DeleteScope(job.scope());
  job.workers.clear();
  job.acknowledged.clear();
  job.last_completed.clear();
  job.pending.clear();
  job.validations.clear();
  job.granted = -1;
  job.job.clear_assignments();
}

void Coordinator::AssignWaitingJobs() {
  for (auto& [seq, job] : jobs_) {
    const zbpp::v1::JobState state = job->job.state();
    const bool waiting =
        state == zbpp::v1::JOB_STATE_PENDING ||
        (state == zbpp::v1::JOB_STATE_RECOVERING && job->workers.empty());
    if (!waiting) continue;
    if (membership_->CountAssignable() < job->stages() * job->replicas()) {
      // Oldest first: a later, smaller job does not overtake it.
      return;
    }
    // Waiting for workers (ResourceExhausted) is no error; a job that
    // cannot run is FAILED by StartAttempt and logged here.
    absl::Status started = StartAttempt(*job);
    if (!started.ok() && !absl::IsResourceExhausted(started)) {
      LogError(started, absl::StrCat("assigning job ", job->job.id()));
    }
  }
}

void Coordinator::LoseWorker(const WorkerRecord& record,
                             const std::string& why) {
  auto session = sessions_.find(record.id);
  if (session != sessions_.end()) {
    session->second.outbox->Close(absl::NotFoundError(why));
    sessions_.erase(session);
  }
  if (record.job_id.empty()) return;
  JobRuntime* job = FindJob(record.job_id);
  if (job == nullptr) return;
  const bool holds = std::find(job->workers.begin(), job->workers.end(),
                               record.id) != job->workers.end();
  if (!holds) return;
  const std::string abort = absl::StrCat("attempt ended: ", why);
  switch (job->job.state()) {
    case zbpp::v1::JOB_STATE_ASSIGNING:
      EndAttempt(*job, abort);
      SetState(*job, zbpp::v1::JOB_STATE_PENDING, why);
      break;
    case zbpp::v1::JOB_STATE_RUNNING:
      EndAttempt(*job, abort);
      SetState(*job, zbpp::v1::JOB_STATE_RECOVERING, why);
      break;
    case zbpp::v1::JOB_STATE_RECOVERING:
      EndAttempt(*job, abort);
      job->job.set_state_message(why);
      break;
    default:
      break;
  }
  PersistJob(*job);
}

// ---------------------------------------------------------------- jobs

absl::Status Coordinator::Recover() {
  absl::StatusOr<StoredState> state = options_.store->LoadAll();
  if (!state.ok()) return state.status();
  absl::MutexLock lock(&mu_);
  for (zbpp::v1::Job& stored : state->jobs) {
    auto job = std::make_unique<JobRuntime>();
    int64_t seq = 0;
    const std::string& id = stored.id();
    if (id.rfind("job-", 0) == 0 && absl::SimpleAtoi(id.substr(4), &seq) &&
        seq > 0 && !jobs_.count(seq)) {
      // Keep the number of the id.
    } else {
      seq = next_job_seq_;
    }
    next_job_seq_ = std::max(next_job_seq_, seq + 1);
    job->seq = seq;
    job->job = std::move(stored);
    job->job.clear_schedule();
    seq_of_job_[job->job.id()] = seq;
    jobs_[seq] = std::move(job);
  }
  for (zbpp::v1::ScheduleVersion& version : state->schedule_versions) {
    JobRuntime* job = FindJob(version.job_id());
    if (job == nullptr) continue;
    absl::StatusOr<sched::Schedule> parsed =
        ScheduleFromProto(version.schedule());
    if (!parsed.ok()) return parsed.status();
    job->parsed[version.version()] = *std::move(parsed);
    job->versions.push_back(std::move(version));
  }
  for (auto& [seq, job] : jobs_) {
    std::sort(job->versions.begin(), job->versions.end(),
              [](const auto& a, const auto& b) {
                return a.version() < b.version();
              });
    job->job.clear_assignments();
    // The outcomes are stored as they are gathered, the job's counters with
    // the job after them: a crash in between would lose an increment.
    if (!IsTerminal(job->job.state())) {
      absl::StatusOr<std::vector<zbpp::v1::ValidationOutcome>> outcomes =
          options_.store->ListValidationOutcomes(job->job.id());
      if (!outcomes.ok()) return outcomes.status();
      int64_t rollbacks = 0, skipped = 0, clipped = 0;
      for (const zbpp::v1::ValidationOutcome& o : *outcomes) {
        job->validated_through = std::max(job->validated_through, o.step());
        rollbacks += o.rolled_back_stages_size() > 0;
        skipped += o.decision() == zbpp::v1::VALIDATION_DECISION_SKIPPED;
        clipped += o.decision() == zbpp::v1::VALIDATION_DECISION_CLIPPED;
      }
      job->job.set_rollbacks_total(rollbacks);
      job->job.set_skipped_steps_total(skipped);
      job->job.set_clipped_steps_total(clipped);
    }
    switch (job->job.state()) {
      case zbpp::v1::JOB_STATE_ASSIGNING:
        SetState(*job, zbpp::v1::JOB_STATE_PENDING,
                 "coordinator restarted while assigning");
        break;
      case zbpp::v1::JOB_STATE_RUNNING:
        SetState(*job, zbpp::v1::JOB_STATE_RECOVERING,
                 "coordinator restarted");
        break;
      default:
        continue;
    }
    if (absl::Status s = options_.store->UpdateJob(job->job); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<zbpp::v1::Job> Coordinator::SubmitJob(
    const zbpp::v1::JobSpec& spec) {
  if (absl::Status valid = options_.validate_spec(spec); !valid.ok()) {
    return valid;
  }
  if (absl::Status resumable = CheckResumable(spec); !resumable.ok()) {
    return resumable;
  }
  absl::MutexLock lock(&mu_);
  auto job = std::make_unique<JobRuntime>();
  job->seq = next_job_seq_;
  zbpp::v1::Job& proto = job->job;
  proto.set_id(absl::StrCat("job-", job->seq));
  *proto.mutable_spec() = spec;
  proto.set_state(zbpp::v1::JOB_STATE_PENDING);
  proto.set_last_checkpoint_step(-1);
  if (spec.checkpoint().has_resume_step()) {
    // The first attempt restores it like a recovery would.
    proto.set_last_checkpoint_step(spec.checkpoint().resume_step());
    proto.set_steps_completed(spec.checkpoint().resume_step() + 1);
  }
  *proto.mutable_create_time() = ToTimestamp(options_.clock->Now());
  if (absl::Status stored = options_.store->CreateJob(proto); !stored.ok()) {
    // The store's own code and message (store.h), so that zbppctl says what
    // failed rather than "cannot reach coordinator".
    return absl::Status(stored.code(), absl::StrCat("storing job ", proto.id(),
                                                    ": ", stored.message()));
  }
  ++next_job_seq_;
  JobRuntime* raw = job.get();
  seq_of_job_[proto.id()] = job->seq;
  jobs_[job->seq] = std::move(job);
  AssignWaitingJobs();
  zbpp::v1::Job result = raw->job;
  return result;
}

absl::Status Coordinator::CheckResumable(const zbpp::v1::JobSpec& spec) {
  const zbpp::v1::CheckpointSpec& checkpoint = spec.checkpoint();
  if (!checkpoint.has_resume_step()) return absl::OkStatus();
  // A checkpoint recorded just now is in the store.
  if (absl::Status flushed = FlushStore(); !flushed.ok()) return flushed;
  absl::StatusOr<std::vector<CheckpointRecord>> records =
      options_.store->ListCheckpointsAt(checkpoint.directory(), checkpoint.resume_step());
  if (!records.ok()) return records.status();
  const int d = DataParallelOf(spec.pipeline());
  for (const CheckpointRecord& record : *records) {
    if (record.data_parallel == d) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline.data_parallel: ", d, " cannot resume the checkpoint of step ",
        record.step, " in ", record.directory, ": job ", record.job_id,
        " wrote it with data_parallel = ", record.data_parallel,
        " (another global batch per step); resume with that data_parallel"));
  }
  return absl::OkStatus();
}

absl::StatusOr<zbpp::v1::ListStepsResponse> Coordinator::ListSteps(
    const zbpp::v1::ListStepsRequest& request) {
  if (request.from_step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("from_step: must be >= 0, got ", request.from_step()));
  }
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0, got ", request.page_size()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (FindJob(request.job_id()) == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("job \"", request.job_id(), "\" not found"));
    }
  }
  if (absl::Status flushed = FlushStore(); !flushed.ok()) return flushed;
  const int limit = request.page_size() == 0 ? 1000 : std::min(request.page_size(), 10000);
  // One more than asked tells whether another page follows.
  absl::StatusOr<std::vector<zbpp::v1::StepSummary>> steps =
      options_.store->ListStepSummaries(request.job_id(), request.from_step(), limit + 1);
  if (!steps.ok()) return steps.status();
  zbpp::v1::ListStepsResponse response;
  response.set_next_from_step(-1);
  for (size_t i = 0; i < steps->size(); ++i) {
    if (static_cast<int>(i) == limit) {
      response.set_next_from_step((*steps)[i].step());
      break;
    }
    *response.add_steps() = std::move((*steps)[i]);
  }
  return response;
}

absl::StatusOr<zbpp::v1::Job> Coordinator::GetJob(
    const std::string& job_id, zbpp::v1::JobView view) const {
  absl::MutexLock lock(&mu_);
  const JobRuntime* job = FindJob(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  zbpp::v1::Job result = job->job;
  if (view == zbpp::v1::JOB_VIEW_BASIC) {
    result.mutable_last_step()->clear_stages();
    if (!job->job.has_last_step()) result.clear_last_step();
    if (result.has_first_step()) result.mutable_first_step()->clear_stages();
    result.clear_last_step_timeline();
  } else if (!job->versions.empty()) {
    *result.mutable_schedule() = job->versions.back();
  }
  if (!job->workers.empty()) {
    // Paused by the store (the class comment, "Persistence"): say so where
    // `zbppctl status` shows it. Not stored: it ends with the failure.
    if (const StoreWriter::Health store = writer_->GetHealth(); !store.healthy) {
      result.set_state_message(absl::StrCat(
          result.state_message(), result.state_message().empty() ? "" : "; ",
          "paused: no new steps while the coordinator's store is failing (",
          store.last_error, ")"));
    }
  }
  return result;
}

absl::StatusOr<zbpp::v1::ListJobsResponse> Coordinator::ListJobs(
    const zbpp::v1::ListJobsRequest& request) const {
  int64_t before = std::numeric_limits<int64_t>::max();
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &before) || before < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: malformed \"", request.page_token(), "\""));
  }
  int limit = request.page_size() <= 0 ? 100 : request.page_size();
  limit = std::min(limit, 1000);
  std::set<int> states(request.states().begin(), request.states().end());
  absl::MutexLock lock(&mu_);
  zbpp::v1::ListJobsResponse response;
  int64_t last_seq = 0;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    const JobRuntime& job = *it->second;
    if (job.seq >= before) continue;
    if (!states.empty() && !states.count(job.job.state())) continue;
    if (response.jobs_size() == limit) {
      // The token is the creation number of the last job returned.
      response.set_next_page_token(absl::StrCat(last_seq));
      break;
    }
    zbpp::v1::Job* out = response.add_jobs();
    *out = job.job;
    last_seq = job.seq;
    if (request.view() == zbpp::v1::JOB_VIEW_FULL) {
      if (!job.versions.empty()) *out->mutable_schedule() = job.versions.back();
    } else if (out->has_last_step()) {
      out->mutable_last_step()->clear_stages();
      out->mutable_first_step()->clear_stages();
      out->clear_last_step_timeline();
    }
  }
  return response;
}

absl::StatusOr<zbpp::v1::Job> Coordinator::CancelJob(
    const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  JobRuntime* job = FindJob(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  if (IsTerminal(job->job.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is already ",
                     JobStateName(job->job.state())));
  }
  const std::string message =
      reason.empty() ? std::string("cancelled by user") : reason;
  EndAttempt(*job, absl::StrCat("job cancelled: ", message));
  SetState(*job, zbpp::v1::JOB_STATE_CANCELLED, message);
  PersistJob(*job);
  zbpp::v1::Job result = job->job;
  AssignWaitingJobs();
  return result;
}

absl::StatusOr<std::shared_ptr<WatchOutbox>> Coordinator::WatchJob(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  JobRuntime* job = FindJob(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  auto outbox = std::make_shared<WatchOutbox>(options_.watch_queue_capacity);
  JobEvent snapshot;
  snapshot.set_job_id(job_id);
  snapshot.set_sequence(++job->event_sequence);
  *snapshot.mutable_time() = ToTimestamp(options_.clock->Now());
  *snapshot.mutable_snapshot() = job->job;
  snapshot.mutable_snapshot()->mutable_last_step()->clear_stages();
  snapshot.mutable_snapshot()->clear_last_step_timeline();
  if (snapshot.snapshot().has_first_step()) {
    snapshot.mutable_snapshot()->mutable_first_step()->clear_stages();
  }
  if (!job->job.has_last_step()) snapshot.mutable_snapshot()->clear_last_step();
  outbox->Push(std::move(snapshot));
  if (IsTerminal(job->job.state())) {
    outbox->Close(absl::OkStatus());
  } else {
    job->watchers.push_back(outbox);
  }
  return outbox;
}

void Coordinator::Unwatch(const std::string& job_id,
                          const std::shared_ptr<WatchOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  outbox->Close(absl::CancelledError("watch ended"));
  JobRuntime* job = FindJob(job_id);
  if (job == nullptr) return;
  auto& w = job->watchers;
  w.erase(std::remove(w.begin(), w.end(), outbox), w.end());
}

// ------------------------------------------------------------- workers

absl::StatusOr<zbpp::v1::RegisterWorkerResponse> Coordinator::RegisterWorker(
    const zbpp::v1::WorkerDescription& worker) {
  // The lengths of worker.proto: DNS names, a port. Descriptions are kept
  // for every worker and listed by zbppctl: unbounded fields made one
  // registration cost megabytes and the list fail.
  for (auto [value, max, field] :
       {std::tuple{&worker.address(), size_t{261}, "worker.address"},
        std::tuple{&worker.host(), size_t{253}, "worker.host"},
        std::tuple{&worker.device_name(), size_t{253}, "worker.device_name"},
        std::tuple{&worker.name(), size_t{253}, "worker.name"}}) {
    if (value->size() > max) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be at most ", max,
                                                     " bytes, got ", value->size()));
    }
  }
  if (worker.address().empty()) {
    return absl::InvalidArgumentError("worker.address is required");
  }
  if (worker.host().empty()) {
    return absl::InvalidArgumentError("worker.host is required");
  }
  if (worker.device_kind() == zbpp::v1::DEVICE_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("worker.device_kind is required");
  }
  if (!zbpp::v1::DeviceKind_IsValid(worker.device_kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker.device_kind: unknown kind ", worker.device_kind()));
  }
  if (worker.device_index() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker.device_index: must be >= 0, got ", worker.device_index()));
  }
  if (worker.memory_bytes() == 0) {
    return absl::InvalidArgumentError("worker.memory_bytes must be >= 1");
  }
  WorkerInfo info;
  info.address = worker.address();
  info.host = worker.host();
  info.device_kind = worker.device_kind() == zbpp::v1::DEVICE_KIND_CUDA
                         ? absl::StrCat("cuda:", worker.device_name())
                         : "cpu";
  info.memory_bytes = static_cast<int64_t>(std::min<uint64_t>(
      worker.memory_bytes(),
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  absl::StatusOr<std::string> credential = NewWorkerCredential();
  if (!credential.ok()) return credential.status();
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Registration> registration = membership_->Register(info);
  if (!registration.ok()) return registration.status();
  descriptions_[registration->worker_id] = worker;
  credential_digests_[registration->worker_id] = CredentialDigest(*credential);
  if (registration->superseded.has_value()) {
    LoseWorker(*registration->superseded,
               absl::StrCat("worker ", registration->superseded->id,
                            " replaced by ", registration->worker_id,
                            " at the same address"));
  }
  AssignWaitingJobs();
  zbpp::v1::RegisterWorkerResponse response;
  response.set_worker_id(registration->worker_id);
  response.set_heartbeat_interval_seconds(options_.heartbeat_interval_seconds);
  response.set_heartbeat_timeout_seconds(options_.heartbeat_timeout_seconds);
  response.set_credential(*std::move(credential));
  return response;
}

absl::Status Coordinator::AuthenticateWorker(const std::string& worker_id,
                                             std::string_view credential) const {
  // Digested outside the lock: SHA-256 of a short string, but no reason to
  // make every other call wait for it.
  const std::string digest = CredentialDigest(credential);
  absl::MutexLock lock(&mu_);
  auto it = credential_digests_.find(worker_id);
  if (it == credential_digests_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  // An empty credential is refused even if one could hash alike: workers
  // always get 32 hex digits.
  if (credential.empty() || !ConstantTimeEquals(digest, it->second)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "missing or wrong credential for worker ", worker_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SessionOutbox>> Coordinator::OpenSession(
    const std::string& worker_id, const std::string& address) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRecord> record = membership_->Get(worker_id);
  if (record.ok() && record->info.address != address) {
    // Checked before the lease is renewed: the caller is another process.
    return absl::NotFoundError(absl::StrCat(
        "worker ", worker_id, " is registered for ", record->info.address,
        ", not ", address, " (the coordinator restarted?); register again"));
  }
  if (absl::Status renewed = membership_->Heartbeat(worker_id);
      !renewed.ok()) {
    return renewed;
  }
  record = membership_->Get(worker_id);
  if (!record.ok()) return record.status();
  // Refused, not replaced: handing the stream over would give whoever asks
  // second the worker's assignment, peers and grants. A worker whose stream
  // broke retries until its old one is seen to end (CloseSession) or its
  // lease expires.
  if (sessions_.count(worker_id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker ", worker_id,
        " already has an open Session; retry once it has ended"));
  }
  SessionSlot& slot = sessions_[worker_id];
  slot.outbox = std::make_shared<SessionOutbox>();
  // Replay the worker's current state (worker.proto SessionResponse).
  JobRuntime* job =
      record->job_id.empty() ? nullptr : FindJob(record->job_id);
  if (job != nullptr && record->rank >= 0 &&
      record->rank < static_cast<int>(job->workers.size()) &&
      job->workers[record->rank] == worker_id) {
    auto assignment = std::make_shared<SessionResponse>();
    *assignment->mutable_assignment() = BuildAssignment(*job, record->rank);
    SendToWorker(worker_id, std::move(assignment));
    const zbpp::v1::ScheduleVersion* in_force =
        VersionInForce(job->versions, job->start_step);
    for (const auto& version : job->versions) {
      if (in_force != nullptr &&
          version.effective_step() > in_force->effective_step()) {
        auto later = std::make_shared<SessionResponse>();
        *later->mutable_schedule() = version;
        SendToWorker(worker_id, std::move(later));
      }
    }
    if (job->granted >= job->start_step) {
      auto grant = std::make_shared<SessionResponse>();
      grant->mutable_grant()->set_job_id(job->job.id());
      grant->mutable_grant()->set_attempt(job->attempt);
      grant->mutable_grant()->set_through_step(job->granted);
      SendToWorker(worker_id, std::move(grant));
    }
  }
  return slot.outbox;
}

void Coordinator::CloseSession(const std::string& worker_id,
                               const std::shared_ptr<SessionOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  outbox->Close(absl::CancelledError("session closed"));
  auto it = sessions_.find(worker_id);
  if (it != sessions_.end() && it->second.outbox == outbox) {
    sessions_.erase(it);
  }
}

absl::Status Coordinator::Heartbeat(const std::string& worker_id,
                                    const zbpp::v1::Heartbeat& heartbeat) {
  absl::MutexLock lock(&mu_);
  if (absl::Status renewed = membership_->Heartbeat(worker_id);
      !renewed.ok()) {
    return renewed;
  }
  // A worker's error is kept and copied into the job's state message (and
  // the store): bounded, so one heartbeat cannot store megabytes.
  zbpp::v1::Heartbeat& kept = last_heartbeat_[worker_id];
  kept = heartbeat;
  if (kept.error().size() > kMaxHeartbeatErrorBytes) {
    constexpr char kMarker[] = " [... truncated]";
    size_t cut = kMaxHeartbeatErrorBytes - (sizeof(kMarker) - 1);
    // Back to the start of a UTF-8 character (continuation bytes 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(kept.error()[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    kept.set_error(absl::StrCat(kept.error().substr(0, cut), kMarker));
  }
  if (heartbeat.job_id().empty() && membership_->ConfirmIdle(worker_id)) {
    AssignWaitingJobs();
  }
  absl::StatusOr<WorkerRecord> record = membership_->Get(worker_id);
  if (!record.ok() || record->job_id.empty()) return absl::OkStatus();
  JobRuntime* job = FindJob(record->job_id);
  if (job == nullptr || heartbeat.job_id() != job->job.id() ||
      heartbeat.attempt() != job->attempt) {
    return absl::OkStatus();
  }
  if (heartbeat.phase() == zbpp::v1::WORKER_PHASE_FAILED) {
    const std::string why =
        absl::StrCat("worker ", worker_id, " (stage ", job->stage_of(record->rank),
                     job->replicas() > 1
                         ? absl::StrCat(", replica ", job->replica_of(record->rank))
                         : std::string(),
                     ") failed: ", kept.error());
    const zbpp::v1::JobState state = job->job.state();
    if (heartbeat.job_error() || state == zbpp::v1::JOB_STATE_ASSIGNING) {
      // The job cannot run (or never started): retrying would fail again.
      EndAttempt(*job, why);
      SetState(*job, zbpp::v1::JOB_STATE_FAILED, why);
      AssignWaitingJobs();
    } else if (state == zbpp::v1::JOB_STATE_RUNNING ||
               state == zbpp::v1::JOB_STATE_RECOVERING) {
      if (job->job.steps_completed() != job->steps_at_failed_recovery) {
        job->failed_recoveries = 0;
        job->steps_at_failed_recovery = job->job.steps_completed();
      }
      EndAttempt(*job, why);
      // While the store fails no step is granted (the class comment,
      // "Persistence"): a worker that gave up waiting for a grant then says
      // nothing about the job, so the failure does not count.
      const bool counts = writer_->Healthy();
      if (counts &&
          ++job->failed_recoveries > options_.max_recoveries_without_progress) {
        SetState(*job, zbpp::v1::JOB_STATE_FAILED,
                 absl::StrCat(why, " (", options_.max_recoveries_without_progress,
                              " recoveries made no progress)"));
      } else {
        SetState(*job, zbpp::v1::JOB_STATE_RECOVERING, why);
      }
      AssignWaitingJobs();
    }
    PersistJob(*job);
    return absl::OkStatus();
  }
  if (heartbeat.phase() == zbpp::v1::WORKER_PHASE_PREPARING ||
      heartbeat.phase() == zbpp::v1::WORKER_PHASE_RUNNING ||
      heartbeat.phase() == zbpp::v1::WORKER_PHASE_WAITING) {
    job->acknowledged.insert(worker_id);
    if (job->acknowledged.size() == job->workers.size() &&
        (job->job.state() == zbpp::v1::JOB_STATE_ASSIGNING ||
         job->job.state() == zbpp::v1::JOB_STATE_RECOVERING)) {
      SetState(*job, zbpp::v1::JOB_STATE_RUNNING, "");
      PersistJob(*job);
    }
  }
  return absl::OkStatus();
}

void Coordinator::Tick() {
  absl::MutexLock lock(&mu_);
  for (const WorkerRecord& lost : membership_->ExpireLeases()) {
    LoseWorker(lost, absl::StrFormat("worker %s lost: no heartbeat for %gs",
                                     lost.id,
                                     options_.heartbeat_timeout_seconds));
  }
  ForgetLostWorkers();
  AssignWaitingJobs();
  // With nothing else to write, a probe makes a lost database a failing
  // write like any other (store.h Probe): health, metrics, paused grants.
  if (writer_->GetHealth().pending == 0) {
    writer_->Enqueue([](Store& store) { return store.Probe(); },
                     "checking the store");
  }
}

void Coordinator::ForgetLostWorkers() {
  // LoseWorker ends the attempt of a lost worker's job, so an attempt
  // should never hold one; an attempt that did would need its peers'
  // descriptions (BuildAssignment) and its Session slot, so it is kept.
  std::set<std::string> held;
  for (const auto& [seq, job] : jobs_) {
    held.insert(job->workers.begin(), job->workers.end());
  }
  for (const std::string& id : membership_->ForgetLost(
           [&held](const std::string& id) { return held.count(id) > 0; })) {
    auto session = sessions_.find(id);
    if (session != sessions_.end()) {
      session->second.outbox->Close(
          absl::NotFoundError(absl::StrCat("worker ", id, " forgotten")));
      sessions_.erase(session);
    }
    last_heartbeat_.erase(id);
    descriptions_.erase(id);
    credential_digests_.erase(id);
  }
}

zbpp::v1::WorkerState Coordinator::ApiState(const WorkerRecord& record) const {
  switch (record.state) {
    case WorkerState::kLost:
      return zbpp::v1::WORKER_STATE_LOST;
    case WorkerState::kAssigned: {
      const JobRuntime* job = FindJob(record.job_id);
      return job != nullptr && job->job.state() == zbpp::v1::JOB_STATE_RUNNING
                 ? zbpp::v1::WORKER_STATE_RUNNING
                 : zbpp::v1::WORKER_STATE_ASSIGNED;
    }
    case WorkerState::kRegistered:
      break;
  }
  return zbpp::v1::WORKER_STATE_IDLE;
}

absl::StatusOr<zbpp::v1::ListWorkersResponse> Coordinator::ListWorkers(
    const zbpp::v1::ListWorkersRequest& request) const {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be >= 0, got ", request.page_size()));
  }
  // The token is the registration number of the last worker returned:
  // forgetting that worker meanwhile does not lose the place.
  int64_t after = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &after) || after < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: malformed \"", request.page_token(), "\""));
  }
  const int limit =
      request.page_size() == 0
          ? kDefaultWorkersPage
          : std::min(request.page_size(), kMaxWorkersPage);
  const std::set<int> states(request.states().begin(), request.states().end());
  absl::MutexLock lock(&mu_);
  zbpp::v1::ListWorkersResponse response;
  int64_t last_seq = 0;
  membership_->ForEachAfter(after, [&](int64_t seq, const WorkerRecord& record)
                                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const zbpp::v1::WorkerState state = ApiState(record);
    if (states.empty() ? state == zbpp::v1::WORKER_STATE_LOST
                       : !states.count(state)) {
      return true;
    }
    if (response.workers_size() == limit) {
      response.set_next_page_token(absl::StrCat(last_seq));
      return false;
    }
    last_seq = seq;
    zbpp::v1::Worker* worker = response.add_workers();
    worker->set_worker_id(record.id);
    auto desc = descriptions_.find(record.id);
    if (desc != descriptions_.end()) {
      *worker->mutable_description() = desc->second;
    }
    const JobRuntime* job = record.state == WorkerState::kAssigned
                                ? FindJob(record.job_id)
                                : nullptr;
    worker->set_state(state);
    worker->set_job_id(job != nullptr ? record.job_id : "");
    worker->set_stage(job != nullptr ? job->stage_of(record.rank) : -1);
    worker->set_replica(job != nullptr ? job->replica_of(record.rank) : -1);
    *worker->mutable_register_time() = ToTimestamp(record.registered_at);
    *worker->mutable_last_heartbeat_time() =
        ToTimestamp(record.last_heartbeat);
    auto hb = last_heartbeat_.find(record.id);
    if (hb != last_heartbeat_.end()) worker->set_phase(hb->second.phase());
    return true;
  });
  return response;
}

absl::Status Coordinator::CheckRendezvousAccess(
    const std::string& worker_id, const std::string& scope) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRecord> record = membership_->Get(worker_id);
  if (!record.ok()) return record.status();
  const JobRuntime* job =
      record->state == WorkerState::kAssigned ? FindJob(record->job_id)
                                              : nullptr;
  if (job == nullptr || job->workers.empty() || job->scope() != scope) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", worker_id, " does not hold the attempt of scope \"", scope,
        "\""));
  }
  return absl::OkStatus();
}

std::map<std::string, int> Coordinator::JobCounts() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, int> counts;
  for (zbpp::v1::JobState state : kAllJobStates) counts[JobStateName(state)] = 0;
  for (const auto& [seq, job] : jobs_) {
    ++counts[JobStateName(job->job.state())];
  }
  return counts;
}

std::map<std::string, int> Coordinator::WorkerCounts() const {
  int by_state[zbpp::v1::WorkerState_ARRAYSIZE] = {};
  {
    absl::MutexLock lock(&mu_);
    membership_->ForEachAfter(0, [&](int64_t, const WorkerRecord& record)
                                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      ++by_state[ApiState(record)];
      return true;
    });
  }
  std::map<std::string, int> counts;
  const size_t prefix = std::string("WORKER_STATE_").size();
  for (auto state : {zbpp::v1::WORKER_STATE_IDLE, zbpp::v1::WORKER_STATE_ASSIGNED,
                     zbpp::v1::WORKER_STATE_RUNNING, zbpp::v1::WORKER_STATE_LOST}) {
    counts[zbpp::v1::WorkerState_Name(state).substr(prefix)] = by_state[state];
  }
  return counts;
}

}  // namespace zbpp::coordinator
