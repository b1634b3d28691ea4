// Coordinator: its life cycle, jobs, assignment, leases and recovery.
// Workers' calls: coordinator_workers.cc; step reports and re-solves:
// coordinator_steps.cc.

#include "coordinator/core/coordinator.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "api/time_proto.h"
#include "common/log.h"
#include "coordinator/core/elastic_recovery.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/planning.h"
#include "coordinator/core/store_queries.h"

namespace zbpp::coordinator {

Coordinator::Coordinator(Options options) : options_(std::move(options)) {}

Coordinator::~Coordinator() {
  resolver_.reset();
  // Drains the writes (retrying a failing one up to store_drain_timeout)
  // while everything its on_recovered callback touches is still alive.
  writer_.reset();
  absl::MutexLock lock(&mu_);
  if (jobs_ == nullptr) return;  // Create failed before the end.
  const absl::Status shutdown = absl::UnavailableError("coordinator shutting down");
  registry_->CloseAllSessions(shutdown);
  jobs_->ForEach([&shutdown](Job& job) {
    job.watchers().CloseAll(shutdown);
    return true;
  });
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(Options options) {
  if (absl::Status valid = CheckCoordinatorOptions(options); !valid.ok()) return valid;
  std::unique_ptr<Coordinator> coordinator(new Coordinator(options));
  Coordinator* self = coordinator.get();
  absl::StatusOr<std::unique_ptr<WorkerRegistry>> registry =
      WorkerRegistry::Create({options.clock, options.heartbeat_timeout_seconds,
                              options.max_workers, options.lost_worker_retention_seconds,
                              // A job's spares are reserved for it (docs/elastic.md).
                              [self](const std::string& worker_id,
                                     const zbpp::v1::HeldState& held) {
                                self->mu_.AssertHeld();
                                const Job* job = self->jobs_->Find(held.job_id());
                                return job != nullptr && !IsTerminal(job->state()) &&
                                       job->KeepsHeld(worker_id, held);
                              }});
  if (!registry.ok()) return registry.status();
  absl::StatusOr<std::unique_ptr<RendezvousStore>> rendezvous = RendezvousStore::Create({});
  if (!rendezvous.ok()) return rendezvous.status();
  coordinator->rendezvous_ = *std::move(rendezvous);
  StoreWriter::Options writer_options;
  writer_options.store = options.store;
  writer_options.initial_backoff = options.store_retry_initial_backoff;
  writer_options.max_backoff = options.store_retry_max_backoff;
  writer_options.drain_timeout = options.store_drain_timeout;
  writer_options.on_recovered = [self] { self->ResumeGrants(); };
  absl::StatusOr<std::unique_ptr<StoreWriter>> writer =
      StoreWriter::Create(std::move(writer_options));
  if (!writer.ok()) return writer.status();
  coordinator->writer_ = *std::move(writer);
  absl::MutexLock lock(&self->mu_);
  self->registry_ = *std::move(registry);
  self->job_context_.clock = options.clock;
  self->job_context_.store_healthy = [self] { return self->writer_->Healthy(); };
  self->job_context_.workers = self->registry_.get();
  self->job_context_.validation_policy = options.validation_policy;
  self->job_context_.grant_lookahead_steps = options.grant_lookahead_steps;
  self->jobs_ = std::make_unique<JobTable>(self->job_context_);
  self->resolver_ = std::make_unique<Resolver>(Resolver::Options{
      options.resolve_on_background_thread,
      [self](ResolveTask& task) { self->FinishResolve(task); },
      options.before_resolve_publish_for_testing});
  self->sinks_ = {options.clock,            self->writer_.get(), self->registry_.get(),
                  self->rendezvous_.get(), options.observer,
                  [self](std::unique_ptr<ResolveTask> task) {
                    self->resolver_->Submit(std::move(task));
                  }};
  return coordinator;
}

// ------------------------------------------------------------- helpers

PlaceOfWorker Coordinator::Places() const {
  return [this](const std::string& job_id, int index)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::optional<WorkerPlace> {
    const Job* job = jobs_->Find(job_id);
    if (job == nullptr) return std::nullopt;
    return WorkerPlace{IsRunning(job->state()),
                       job->stage_of(index), job->replica_of(index)};
  };
}

absl::Status Coordinator::FlushStore() { return writer_->Flush(); }

StoreWriter::Health Coordinator::StoreHealth() const { return writer_->GetHealth(); }

void Coordinator::WaitForResolves() { resolver_->Wait(); }

void Coordinator::Apply(Job& job) { ApplyJobEffects(job.TakeEffects(), job.watchers(), sinks_); }

void Coordinator::ResumeGrants() {
  absl::MutexLock lock(&mu_);
  jobs_->ForEach([this](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    job.UpdateGrant();
    Apply(job);
    return true;
  });
}

// ---------------------------------------------------------- assignment

absl::Status Coordinator::StartAttempt(Job& job) {
  const int needed = job.stages() * job.replicas();
  if (registry_->CountAssignable() < needed) {
    return absl::ResourceExhaustedError("too few free workers");
  }
  // Applied before the registry is touched: a job that failed here
  // released nothing, and none of its effects may reach the workers taken
  // below.
  const absl::Status prepared = job.Prepare();
  Apply(job);
  if (!prepared.ok()) return prepared;
  // Every stage must fit its worker's reported memory (memory_estimate.h).
  const std::vector<StageMemoryEstimate> estimate = job.EstimateMemory();
  std::vector<double> needs;
  for (const StageMemoryEstimate& stage : estimate) needs.push_back(stage.total_bytes());
  // A job over NCCL takes only workers that can carry it (a GPU of its
  // own each), so an idle CPU worker registered first is passed over and
  // the job waits for suitable ones instead of failing on it. The
  // transport is decided on the workers Assign will choose (both run under
  // mu_); a refusal then is waiting too: workers that qualify may come.
  const zbpp::v1::Transport requested = job.proto().spec().transport();
  const WorkerRegistry::WorkerFilter filter = WorkerFilterFor(requested);
  absl::StatusOr<std::vector<std::string>> chosen =
      registry_->Preview(job.id(), needed, needs, filter);
  if (!chosen.ok()) {
    job.NoteWaiting(chosen.status(), estimate);
    Apply(job);
    return chosen.status();
  }
  absl::StatusOr<TransportChoice> transport =
      ChooseTransport(requested, PlacedWorkers(*chosen, job.stages()));
  if (!transport.ok()) {
    const absl::Status waiting = absl::ResourceExhaustedError(transport.status().message());
    job.NoteWaiting(waiting, estimate);
    Apply(job);
    return waiting;
  }
  absl::StatusOr<std::vector<std::string>> assigned =
      registry_->Assign(job.id(), needed, needs, filter);
  if (!assigned.ok()) {
    job.NoteWaiting(assigned.status(), estimate);
    Apply(job);
    return assigned.status();
  }
  const absl::Status begun = job.BeginAttempt(*std::move(assigned), *std::move(transport));
  Apply(job);
  return begun;
}

std::vector<PlacedWorker> Coordinator::PlacedWorkers(const std::vector<std::string>& worker_ids,
                                                 int stages) const {
  std::vector<PlacedWorker> workers;
  for (int i = 0; i < static_cast<int>(worker_ids.size()); ++i) {
    workers.push_back({worker_ids[i], StageOfWorker(i, stages), ReplicaOfWorker(i, stages),
                       registry_->Description(worker_ids[i])});
  }
  return workers;
}

WorkerRegistry::WorkerFilter Coordinator::WorkerFilterFor(zbpp::v1::Transport transport) {
  if (transport != zbpp::v1::TRANSPORT_NCCL) return {};
  return {JoinsNcclWorkers, "a GPU of its own (transport: nccl)"};
}

absl::Status Coordinator::CheckTransportAtSubmission(const zbpp::v1::JobSpec& spec,
                                                     const std::vector<double>& needs) const {
  // The workers are known when the job would be assigned at once: no job
  // waits before it (oldest first) and enough are free.
  const int stages = spec.pipeline().stages();
  const int needed = stages * DataParallelOf(spec.pipeline());
  bool waiting = false;
  jobs_->ForEach([&waiting](Job& job) {
    waiting = job.Waiting();
    return !waiting;
  });
  if (waiting || registry_->CountAssignable() < needed) return absl::OkStatus();
  // Workers that can carry it are free: it starts. Else the free workers
  // it would take without the transport's filter say why it cannot run on
  // them (the job would wait: refused now, while the user is there).
  if (registry_->Preview("submitted job", needed, needs, WorkerFilterFor(spec.transport())).ok()) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> chosen =
      registry_->Preview("submitted job", needed, needs);
  if (!chosen.ok()) return absl::OkStatus();  // It would wait; checked when assigned.
  return ChooseTransport(spec.transport(), PlacedWorkers(*chosen, stages)).status();
}

void Coordinator::AssignWaitingJobs() {
  jobs_->ForEach([this](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!job.Waiting()) return true;
    if (registry_->CountAssignable() < job.stages() * job.replicas()) {
      return false;  // Oldest first: a later, smaller job does not overtake it.
    }
    // Waiting for workers (ResourceExhausted) is no error; a job that
    // cannot run is FAILED by StartAttempt and logged here.
    absl::Status started = StartAttempt(job);
    if (!started.ok() && !absl::IsResourceExhausted(started)) {
      LogError(started, absl::StrCat("assigning job ", job.id()));
    }
    return true;
  });
  HealDegradedJobs();
}

std::vector<std::pair<std::string, int>> Coordinator::IdleSpares(const Job& job) const {
  std::vector<std::pair<std::string, int>> spares;
  for (const auto& [worker_id, attempt] : job.spares()) {
    absl::StatusOr<const WorkerRecord*> record = registry_->Get(worker_id);
    if (record.ok() && (*record)->state == WorkerState::kIdle &&
        (*record)->heartbeat.held().job_id() == job.id()) {
      spares.emplace_back(worker_id, (*record)->heartbeat.held().stage());
    }
  }
  return spares;
}

void Coordinator::HealDegradedJobs() {
  bool waiting = false;
  jobs_->ForEach([&waiting](Job& job) {
    waiting |= job.Waiting();
    return true;
  });
  // Free workers go to waiting jobs first.
  if (waiting) return;
  int free = registry_->CountAssignable();
  jobs_->ForEach([&](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (job.state() != zbpp::v1::JOB_STATE_DEGRADED || job.healing() ||
        !job.attempt().active()) {
      return true;
    }
    // Each stage misses d - d' workers; its spares fill what they can.
    const int missing = job.replicas() - job.attempt().replicas();
    std::vector<int> spares_of(job.stages(), 0);
    for (const auto& [worker_id, stage] : IdleSpares(job)) {
      if (stage >= 0 && stage < job.stages()) ++spares_of[stage];
    }
    int needed = 0;
    for (int spares : spares_of) needed += std::max(0, missing - spares);
    if (needed > free) return true;
    if (job.BeginHeal()) free -= needed;
    Apply(job);
    return true;
  });
}

absl::Status Coordinator::LoseWorker(const WorkerRecord& record, const std::string& why) {
  registry_->LoseSession(record.id, absl::NotFoundError(why));
  if (Job* kept = jobs_->Find(record.heartbeat.held().job_id())) {
    kept->ForgetSpare(record.id);
    Apply(*kept);
  }
  if (record.job_id.empty()) return absl::OkStatus();
  Job* job = jobs_->Find(record.job_id);
  if (job == nullptr || !job->attempt().Holds(record.id)) return absl::OkStatus();
  const absl::Status ended = job->AfterWorkerLost(why);
  Apply(*job);
  return ended;
}

void Coordinator::Tick() {
  absl::MutexLock lock(&mu_);
  for (const WorkerRecord* lost : registry_->ExpireLeases()) {
    LogError(LoseWorker(*lost, absl::StrFormat("worker %s lost: no heartbeat for %gs",
                                               lost->id, options_.heartbeat_timeout_seconds)),
             "losing a worker");
  }
  DecideRecoveries();
  ForgetLostWorkers();
  const absl::Time now = options_.clock->Now();
  jobs_->ForEach([&](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    LogError(job.CheckCalibrationDeadline(now,
                                          absl::Seconds(options_.calibration_timeout_seconds),
                                          options_.max_recoveries_without_progress,
                                          writer_->Healthy()),
             absl::StrCat("calibration of job ", job.id()));
    Apply(job);
    return true;
  });
  AssignWaitingJobs();
  ApplyRetention();
  // With nothing else to write, a probe makes a lost database a failing
  // write like any other (store.h Probe): health, metrics, paused grants.
  if (writer_->GetHealth().pending == 0) {
    writer_->Enqueue([](Store& store) { return store.Probe(); }, "checking the store");
  }
}

bool Coordinator::DecideRecoveries() {
  const absl::Time now = options_.clock->Now();
  const absl::Duration bound = absl::Seconds(options_.heartbeat_timeout_seconds);
  bool restarting = false;
  jobs_->ForEach([&](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Job::EndedAttempt* ended = job.AwaitingHeld();
    if (ended == nullptr) return true;
    const int p = job.stages();
    std::vector<std::optional<int64_t>> held;
    std::vector<std::optional<zbpp::v1::ReportStepRequest>> step_reports;
    if (ended->restored) {
      // The coordinator restarted: its workers, registered again under new
      // ids, are placed by what they hold (docs/elastic.md, "Coordinator
      // restart"). Whether one that says nothing yet still winds the
      // attempt down or holds nothing cannot be told: the wait ends when
      // every place is held, or at the bound.
      std::vector<RestoredHolder> holders;
      std::map<std::string, const zbpp::v1::HeldState*> said;
      for (const WorkerRecord* record : registry_->IdleHolders(job.id())) {
        const zbpp::v1::HeldState& h = record->heartbeat.held();
        holders.push_back({record->id, h.attempt(), h.stage(), h.step()});
        said[record->id] = &h;
      }
      RestoredPlacement placed = PlaceRestoredHolders(
          p, static_cast<int>(ended->workers.size()) / p, holders);
      if (!placed.complete() && now < ended->ended_at + bound) return true;
      held = std::move(placed.held);
      // The reports the previous coordinator may not have had.
      for (const std::string& id : placed.workers) {
        auto it = said.find(id);
        step_reports.push_back(it != said.end() && it->second->has_step_report()
                                   ? std::make_optional(it->second->step_report())
                                   : std::nullopt);
      }
      job.PlaceRestoredAttempt(placed.attempt, std::move(placed.workers));
      ended = job.AwaitingHeld();
    } else {
      std::vector<bool> said(ended->workers.size(), true);
      for (size_t i = 0; i < ended->workers.size(); ++i) {
        bool answered = true;
        held.push_back(HeldStep(ended->workers[i], job.id(), ended->number, &answered));
        said[i] = answered;
      }
      // Waiting is worth it while some replica may still turn out
      // complete; a worker silent that long is lost (docs/elastic.md): it
      // holds nothing.
      bool all_said = true;
      bool may_resume = false;
      for (size_t r = 0; r * p < held.size(); ++r) {
        bool broken = false;
        for (size_t i = r * p; i < (r + 1) * p; ++i) {
          all_said &= said[i];
          broken |= said[i] && !held[i].has_value();
        }
        may_resume |= !broken;
      }
      if (!all_said && may_resume && now < ended->ended_at + bound) return true;
    }
    // A heal fills the missing replicas with the spares and free workers.
    std::vector<std::pair<std::string, int>> newcomers;
    if (ended->heal) {
      newcomers = IdleSpares(job);
      const int missing = (job.replicas() * job.stages()) -
                          static_cast<int>(ended->workers.size());
      // As many free workers as there are, up to the missing ones.
      for (int n = missing; n >= 1; --n) {
        absl::StatusOr<std::vector<std::string>> free = registry_->Preview(job.id(), n);
        if (!free.ok()) continue;
        for (const std::string& worker_id : *free) newcomers.emplace_back(worker_id, -1);
        break;
      }
    }
    const std::optional<std::vector<std::string>> resumed =
        job.DecideRecovery(held, newcomers, step_reports);
    Apply(job);
    if (!resumed.has_value()) {
      restarting |= job.Waiting();
      return true;
    }
    // HeldStep saw each of them idle and live, under this lock.
    absl::Status begun = registry_->AssignWorkers(job.id(), *resumed);
    begun = begun.ok() ? job.BeginAttempt(*resumed, TransportChoice{job.proto().transport(),
                                                                    job.proto().transport_reason()})
                       : job.Fail(std::string(begun.message()));
    Apply(job);
    LogError(begun, absl::StrCat("resuming job ", job.id(), " from memory"));
    return true;
  });
  return restarting;
}

std::optional<int64_t> Coordinator::HeldStep(const std::string& worker_id,
                                             const std::string& job_id, int64_t attempt,
                                             bool* said) const {
  *said = true;
  absl::StatusOr<const WorkerRecord*> found = registry_->Get(worker_id);
  if (!found.ok()) return std::nullopt;
  const WorkerRecord& record = **found;
  if (record.state != WorkerState::kIdle || record.session == nullptr) return std::nullopt;
  const zbpp::v1::Heartbeat& last = record.heartbeat;
  if (last.job_id() == job_id && last.attempt() == attempt) {
    *said = false;  // It runs the attempt still, as far as it said.
    return std::nullopt;
  }
  const zbpp::v1::HeldState& held = last.held();
  if (held.job_id() != job_id || held.attempt() != attempt) return std::nullopt;
  return held.step();
}

void Coordinator::ForgetLostWorkers() {
  // LoseWorker ends the attempt of a lost worker's job, so an attempt
  // should never hold one; an attempt that did would need its peers'
  // descriptions (Assignment) and its Session, so it is kept.
  std::set<std::string> held;
  jobs_->ForEach([&held](Job& job) {
    held.insert(job.attempt().workers().begin(), job.attempt().workers().end());
    return true;
  });
  registry_->ForgetLost([&held](const std::string& id) { return held.count(id) > 0; });
}

// ------------------------------------------------------------ recovery

absl::Status Coordinator::Recover() {
  absl::MutexLock lock(&mu_);
  const absl::Status recovered = jobs_->Recover(*options_.store);
  // What the restored jobs decided (a changed state's record), even when
  // a later job's restore failed.
  jobs_->ForEach([this](Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Apply(job);
    return true;
  });
  if (!recovered.ok()) return recovered;
  ApplyRetention();
  return absl::OkStatus();
}

void Coordinator::ApplyRetention() {
  for (const std::string& id : jobs_->EraseFinishedBeyond(options_.retained_finished_jobs)) {
    // Queued after every write of the job, which was decided before.
    writer_->Enqueue([id](Store& store) { return store.DeleteJob(id); },
                     absl::StrCat("deleting finished job ", id, " (retention)"));
  }
}

// ---------------------------------------------------------------- jobs

absl::StatusOr<zbpp::v1::Job> Coordinator::SubmitJob(const zbpp::v1::JobSpec& spec) {
  // The spec's checks and its plan (planning.h), off the mutex: the job's
  // version 1 is this plan's schedule, solved once.
  absl::StatusOr<JobPlan> plan = PlanJob(spec);
  if (!plan.ok()) return plan.status();
  if (spec.checkpoint().has_resume_step()) {
    // A checkpoint recorded just now is in the store.
    if (absl::Status flushed = FlushStore(); !flushed.ok()) return flushed;
    if (absl::Status resumable = CheckResumable(*options_.store, spec); !resumable.ok()) {
      return resumable;
    }
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status rate = submission_rate_.Take(options_.clock->Now()); !rate.ok()) {
    return rate;
  }
  if (const int active = jobs_->ActiveCount(); active >= options_.max_active_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "max_active_jobs: ", active, " jobs are not finished, the cap of ",
        options_.max_active_jobs, " (zbpp-coordinator --max-active-jobs); wait for one to "
        "finish or cancel one"));
  }
  ApplyRetention();
  if (spec.transport() == zbpp::v1::TRANSPORT_NCCL) {
    // NCCL's workers are checked at submission when they are known; which
    // ones depends on each stage's memory under version 1's schedule.
    std::vector<double> needs;
    for (const StageMemoryEstimate& stage : plan->memory) needs.push_back(stage.total_bytes());
    if (absl::Status carried = CheckTransportAtSubmission(spec, needs); !carried.ok()) {
      return carried;
    }
  }
  zbpp::v1::Job proto = jobs_->NewJob(plan->spec, options_.clock->Now());
  proto.mutable_layout()->Add(plan->layout.begin(), plan->layout.end());
  proto.set_layout_reason(plan->layout_reason);
  proto.set_layout_source(plan->layout_source);
  if (absl::Status free = jobs_->CheckCheckpointDirectoryFree(proto.spec()); !free.ok()) {
    return free;
  }
  if (absl::Status stored = options_.store->CreateJob(proto); !stored.ok()) {
    // The store's own code and message (store.h), so that zbppctl says what
    // failed rather than "cannot reach coordinator".
    return absl::Status(stored.code(), absl::StrCat("storing job ", proto.id(), ": ",
                                                    stored.message()));
  }
  Job& job = jobs_->Add(std::move(proto));
  job.AdoptPlan(*std::move(plan));
  AssignWaitingJobs();
  return job.proto();
}

absl::StatusOr<zbpp::v1::ListStepsResponse> Coordinator::ListSteps(
    const zbpp::v1::ListStepsRequest& request) {
  if (absl::Status valid = CheckListStepsRequest(request); !valid.ok()) return valid;
  {
    absl::MutexLock lock(&mu_);
    if (jobs_->Find(request.job_id()) == nullptr) {
      return absl::NotFoundError(absl::StrCat("job \"", request.job_id(), "\" not found"));
    }
  }
  // Every completed step is in the store once the queued writes are.
  if (absl::Status flushed = FlushStore(); !flushed.ok()) return flushed;
  return ListStoredSteps(*options_.store, request);
}

absl::StatusOr<zbpp::v1::Job> Coordinator::GetJob(const std::string& job_id,
                                                  zbpp::v1::JobView view) const {
  absl::MutexLock lock(&mu_);
  const Job* job = jobs_->Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  zbpp::v1::Job result = job->View(view != zbpp::v1::JOB_VIEW_BASIC);
  if (job->attempt().active()) {
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

absl::StatusOr<zbpp::v1::ScheduleVersion> Coordinator::GetScheduleVersion(
    const std::string& job_id, int64_t version) const {
  if (version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("version: must be >= 1, got ", version));
  }
  absl::MutexLock lock(&mu_);
  const Job* job = jobs_->Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  const zbpp::v1::ScheduleVersion* found = job->Version(version);
  if (found == nullptr) {
    return absl::NotFoundError(absl::StrCat("version: job ", job_id, " has no schedule version ",
                                            version, " (its latest is ",
                                            job->proto().schedule_version(), ")"));
  }
  return *found;
}

absl::StatusOr<zbpp::v1::ListJobsResponse> Coordinator::ListJobs(
    const zbpp::v1::ListJobsRequest& request) const {
  absl::MutexLock lock(&mu_);
  return jobs_->List(request);
}

absl::StatusOr<zbpp::v1::Job> Coordinator::CancelJob(const std::string& job_id,
                                                     const std::string& reason) {
  if (reason.size() > kMaxCancelReasonBytes) {
    return absl::InvalidArgumentError(absl::StrCat("reason: at most ", kMaxCancelReasonBytes,
                                                   " bytes, got ", reason.size()));
  }
  absl::MutexLock lock(&mu_);
  Job* job = jobs_->Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  const absl::Status cancelled =
      job->Cancel(reason.empty() ? std::string("cancelled by user") : reason);
  Apply(*job);
  if (!cancelled.ok()) return cancelled;
  zbpp::v1::Job result = job->proto();
  AssignWaitingJobs();  // Its workers are free.
  return result;
}

absl::StatusOr<std::shared_ptr<WatchOutbox>> Coordinator::WatchJob(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Job* job = jobs_->Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  }
  return job->Watch(options_.watch_queue_capacity);
}

void Coordinator::Unwatch(const std::string& job_id,
                          const std::shared_ptr<WatchOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  outbox->Close(absl::CancelledError("watch ended"));
  if (Job* job = jobs_->Find(job_id)) job->watchers().Remove(outbox);
}

absl::Status Coordinator::CheckRendezvousAccess(const std::string& worker_id,
                                                const std::string& scope) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const WorkerRecord*> record = registry_->Get(worker_id);
  if (!record.ok()) return record.status();
  const Job* job =
      (*record)->state == WorkerState::kAssigned ? jobs_->Find((*record)->job_id) : nullptr;
  if (job == nullptr || !job->attempt().active() || job->scope() != scope) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", worker_id, " does not hold the attempt of scope \"", scope, "\""));
  }
  return absl::OkStatus();
}

std::map<std::string, int> Coordinator::JobCounts() const {
  absl::MutexLock lock(&mu_);
  return jobs_->Counts();
}

}  // namespace zbpp::coordinator
