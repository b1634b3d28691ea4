// Coordinator: calibration profiles, step reports, complete steps and the
// re-solves they make due (docs/architecture.md, Flow 2).

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/schedule_proto.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/profile_check.h"
#include "coordinator/core/step_report_check.h"

namespace zbpp::coordinator {

absl::Status Coordinator::ReportStep(const zbpp::v1::ReportStepRequest& report) {
  std::unique_ptr<ResolveTask> resolve;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = ReportStepLocked(report, &resolve); !s.ok()) return s;
  }
  // The solver runs without the mutex: other RPCs go on meanwhile.
  if (resolve != nullptr) resolver_->Run(std::move(resolve));
  return absl::OkStatus();
}

absl::Status Coordinator::ReportStepLocked(const zbpp::v1::ReportStepRequest& report,
                                           std::unique_ptr<ResolveTask>* resolve) {
  int index = 0;
  absl::StatusOr<Job*> job =
      HeldJob(report.worker_id(), report.job_id(), report.attempt(), &index);
  if (!job.ok()) return job.status();
  if (absl::Status fits = CheckReportFitsDevice(report, DeviceMemoryBytes(report.worker_id()));
      !fits.ok()) {
    return fits;
  }
  absl::StatusOr<ReportOutcome> outcome = (*job)->ReportStep(report, index);
  if (!outcome.ok()) return outcome.status();
  if (outcome->ended) AssignWaitingJobs();  // Its workers are free.
  *resolve = std::move(outcome->resolve);
  return absl::OkStatus();
}

absl::Status Coordinator::ReportProfile(const zbpp::v1::ReportProfileRequest& profile) {
  std::unique_ptr<ResolveTask> calibration;
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
    absl::StatusOr<std::unique_ptr<ResolveTask>> task = (*job)->ReportProfile(profile, index);
    if (!task.ok()) return task.status();
    calibration = *std::move(task);
  }
  // Solved without the mutex, like a re-solve; FinishResolve publishes it.
  if (calibration != nullptr) resolver_->Run(std::move(calibration));
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
  const ResolveRecord& record = task.record;
  // A calibration's costs are its version's cost model (a snapshot keyed
  // by the step before the attempt could meet a re-solve's of that step).
  // A step replayed after a recovery or a restart may re-solve at a step
  // whose snapshot is stored already: the stored one (the costs the step's
  // first run measured) stays, as a replayed step summary's does.
  if (!task.calibration) {
    writer_->Enqueue(
        [id = task.job_id, step = record.step,
         costs = CostModelToProto(task.measured)](Store& store) {
          return store.AddCostSnapshot(id, step, costs);
        },
        absl::StrCat("storing the cost snapshot of step ", record.step, " of job ",
                     task.job_id),
        /*ignore_already_exists=*/true);
  }
  writer_->Enqueue([record](Store& store) { return store.AddResolveRecord(record); },
                   "storing a re-solve");
  // A calibration is stored with the re-solves (its reason says so) but
  // is no re-solve to count: its version is counted as any other.
  if (options_.observer != nullptr && !task.calibration) {
    options_.observer->OnResolve(task.job_id, record.published);
  }
  // A calibration that fits no schedule failed the job: its workers are free.
  if (IsTerminal(job->state())) AssignWaitingJobs();
}

}  // namespace zbpp::coordinator
