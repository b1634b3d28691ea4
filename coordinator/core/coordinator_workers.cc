// Coordinator: the workers' calls (registration, credentials, Sessions,
// heartbeats, listing), routed to the WorkerRegistry and the jobs.

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "common/log.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/worker_credential.h"

namespace zbpp::coordinator {

absl::StatusOr<zbpp::v1::RegisterWorkerResponse> Coordinator::RegisterWorker(
    const zbpp::v1::WorkerDescription& worker) {
  absl::StatusOr<std::string> credential = NewWorkerCredential();
  if (!credential.ok()) return credential.status();
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Registration> registration =
      registry_->Add(worker, CredentialDigest(*credential));
  if (!registration.ok()) return registration.status();
  if (registration->superseded != nullptr) {
    // The new worker is registered whatever became of the old one's job.
    LogError(LoseWorker(*registration->superseded,
                        absl::StrCat("worker ", registration->superseded->id,
                                     " replaced by ", registration->worker_id,
                                     " at the same address")),
             "losing a superseded worker");
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
  return registry_->Authenticate(worker_id, credential, digest);
}

absl::StatusOr<std::shared_ptr<SessionOutbox>> Coordinator::OpenSession(
    const std::string& worker_id, const std::string& address) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<WorkerRegistry::OpenedSession> opened =
      registry_->OpenSession(worker_id, address);
  if (!opened.ok()) return opened.status();
  // Replay the worker's current state (worker.proto SessionResponse).
  const WorkerRecord& record = *opened->record;
  if (Job* job = record.job_id.empty() ? nullptr : jobs_->Find(record.job_id)) {
    job->ReplaySession(worker_id, record.worker_index);
    Apply(*job);
  }
  return opened->outbox;
}

void Coordinator::CloseSession(const std::string& worker_id,
                               const std::shared_ptr<SessionOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  registry_->CloseSession(worker_id, outbox);
}

absl::Status Coordinator::Heartbeat(const std::string& worker_id,
                                    const zbpp::v1::Heartbeat& heartbeat) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::string> error = registry_->RecordHeartbeat(worker_id, heartbeat);
  if (!error.ok()) return error.status();
  if (const zbpp::v1::HeldState& held = heartbeat.held(); !held.job_id().empty()) {
    // State no job will resume from (docs/elastic.md): freed at once.
    Job* holder = jobs_->Find(held.job_id());
    if (holder != nullptr && held.has_snapshot_step() && holder->KeepsHeld(worker_id, held)) {
      // Newer than its last report may have said (the write in flight ended).
      holder->NoteSnapshot(held.stage(), held.snapshot_step());
    }
    if (holder == nullptr || IsTerminal(holder->state()) ||
        !(holder->KeepsHeld(worker_id, held) || holder->attempt().Holds(worker_id))) {
      registry_->Send(worker_id, DropHeldStateMessage(
                                     held.job_id(), held.attempt(),
                                     holder == nullptr              ? "unknown job"
                                     : IsTerminal(holder->state()) ? "job ended"
                                                                   : "not kept by its job"));
    }
  }
  if (heartbeat.job_id().empty()) {
    // An idle worker said what it holds of the attempt it left.
    const bool restarting = DecideRecoveries();
    if (registry_->ConfirmIdle(worker_id) || restarting) AssignWaitingJobs();
  }
  absl::StatusOr<const WorkerRecord*> found = registry_->Get(worker_id);
  if (!found.ok() || (*found)->job_id.empty()) return absl::OkStatus();
  const WorkerRecord& record = **found;
  Job* job = jobs_->Find(record.job_id);
  if (job == nullptr || heartbeat.job_id() != job->id() ||
      heartbeat.attempt() != job->attempt().number()) {
    return absl::OkStatus();
  }
  switch (heartbeat.phase()) {
    case zbpp::v1::WORKER_PHASE_FAILED:
      return WorkerFailed(*job, worker_id, record.worker_index, *error, heartbeat.job_error());
    case zbpp::v1::WORKER_PHASE_PREPARING:
    case zbpp::v1::WORKER_PHASE_RUNNING:
    case zbpp::v1::WORKER_PHASE_WAITING: {
      const absl::Status acknowledged = job->Acknowledge(worker_id).status();
      Apply(*job);
      return acknowledged;
    }
    default:
      return absl::OkStatus();
  }
}

absl::Status Coordinator::WorkerFailed(Job& job, const std::string& worker_id, int index,
                                       const std::string& error, bool job_error) {
  // While the store fails no step is granted (coordinator.h,
  // "Persistence"): a worker that gave up waiting for a grant then says
  // nothing about the job, so the failure does not count.
  absl::Status status =
      job.AfterWorkerFailed(worker_id, index, error, job_error,
                            options_.max_recoveries_without_progress, writer_->Healthy());
  Apply(job);
  AssignWaitingJobs();
  return status;
}

absl::StatusOr<zbpp::v1::ListWorkersResponse> Coordinator::ListWorkers(
    const zbpp::v1::ListWorkersRequest& request) const {
  absl::MutexLock lock(&mu_);
  return registry_->List(request, Places());
}

std::map<std::string, int> Coordinator::WorkerCounts() const {
  absl::MutexLock lock(&mu_);
  return registry_->Counts(Places());
}

}  // namespace zbpp::coordinator
