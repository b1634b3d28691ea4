// Coordinator: calibration profiles, step reports, complete steps and the
// re-solves they make due (docs/architecture.md, Flow 2).

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/profile_check.h"
#include "coordinator/core/step_report_check.h"

namespace zbpp::coordinator {

absl::Status Coordinator::ReportStep(const zbpp::v1::ReportStepRequest& report) {
  absl::Status reported;
  {
    absl::MutexLock lock(&mu_);
    reported = ReportStepLocked(report);
  }
  // A re-solve the step made due was queued (Apply); it is solved without
  // the mutex: other RPCs go on meanwhile.
  resolver_->SolveQueued();
  return reported;
}

absl::Status Coordinator::ReportStepLocked(const zbpp::v1::ReportStepRequest& report) {
  int index = 0;
  absl::StatusOr<Job*> job =
      HeldJob(report.worker_id(), report.job_id(), report.attempt(), &index);
  if (!job.ok()) return job.status();
  if (absl::Status fits = CheckReportFitsDevice(report, DeviceMemoryBytes(report.worker_id()));
      !fits.ok()) {
    return fits;
  }
  const absl::Status reported = (*job)->ReportStep(report, index);
  Apply(**job);
  // The report ended the job (its last step, or replicas that disagreed):
  // its workers are free.
  if (IsTerminal((*job)->state())) AssignWaitingJobs();
  return reported;
}

absl::Status Coordinator::ReportProfile(const zbpp::v1::ReportProfileRequest& profile) {
  {
    absl::MutexLock lock(&mu_);
    int index = 0;
    absl::StatusOr<Job*> job =
        HeldJob(profile.worker_id(), profile.job_id(), profile.attempt(), &index);
    if (!job.ok()) return job.status();
    if (absl::Status fits =
            CheckProfileMemory(profile, ActivationFloorBytes((*job)->proto().spec()),
                               DeviceMemoryBytes(profile.worker_id()));
        !fits.ok()) {
      return fits;
    }
    const absl::Status reported = (*job)->ReportProfile(profile, index);
    Apply(**job);
    if (!reported.ok()) return reported;
  }
  // The calibration the last profile made due is solved without the
  // mutex, like a re-solve; FinishResolve publishes it.
  resolver_->SolveQueued();
  return absl::OkStatus();
}

absl::StatusOr<Job*> Coordinator::HeldJob(const std::string& worker_id,
                                          const std::string& job_id, int64_t attempt,
                                          int* index) {
  absl::StatusOr<const WorkerRecord*> record = registry_->Get(worker_id);
  if (!record.ok()) return record.status();
  Job* job = jobs_->Find(job_id);
  if (job == nullptr || (*record)->state != WorkerState::kAssigned ||
      (*record)->job_id != job_id || job->attempt().number() != attempt ||
      !job->attempt().active()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker_id, " does not hold job ", job_id, " attempt ", attempt));
  }
  *index = (*record)->worker_index;
  return job;
}

uint64_t Coordinator::DeviceMemoryBytes(const std::string& worker_id) const {
  const zbpp::v1::WorkerDescription* description = registry_->Description(worker_id);
  return description != nullptr ? description->memory_bytes() : 0;
}

void Coordinator::FinishResolve(ResolveTask& task) {
  absl::MutexLock lock(&mu_);
  Job* job = jobs_->Find(task.job_id);
  // Deleted meanwhile (finished, past the retention): nothing to record.
  if (job == nullptr) return;
  job->FinishResolve(task);
  Apply(*job);
  // A calibration that fits no schedule failed the job, one that chose
  // another layout ended its attempt (Job::Relayout): its workers are free,
  // and the re-laid-out job waits for the next attempt.
  if (IsTerminal(job->state()) || job->Waiting()) AssignWaitingJobs();
}

}  // namespace zbpp::coordinator
