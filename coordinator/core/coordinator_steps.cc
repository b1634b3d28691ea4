// Coordinator: step reports, complete steps and the re-solves they make due
// (docs/architecture.md, Flow 2).

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/schedule_proto.h"
#include "coordinator/core/coordinator.h"

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
  absl::StatusOr<const WorkerRecord*> record = registry_->Get(report.worker_id());
  if (!record.ok()) return record.status();
  Job* job = jobs_->Find(report.job_id());
  if (job == nullptr || (*record)->state != WorkerState::kAssigned ||
      (*record)->job_id != report.job_id() || job->attempt().number() != report.attempt() ||
      !job->attempt().active()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", report.worker_id(), " does not hold job ",
                     report.job_id(), " attempt ", report.attempt()));
  }
  absl::StatusOr<ReportEffect> effect = job->AcceptReport(report, (*record)->worker_index);
  if (!effect.ok()) return effect.status();
  absl::Status status = absl::OkStatus();
  if (!effect->disagreement.ok()) {
    // The replicas disagreed: the job failed, its attempt (and its pending
    // steps) is gone.
    const std::string why(effect->disagreement.message());
    status = EndJob(*job, zbpp::v1::JOB_STATE_FAILED, why, why);
  } else if (effect->complete.has_value()) {
    bool last = false;
    *resolve = job->CompleteStep(*effect->complete, &last);
    if (last) status = EndJob(*job, zbpp::v1::JOB_STATE_SUCCEEDED, "job succeeded", "");
  }
  job->UpdateGrant();
  if (effect->record_changed || !effect->disagreement.ok()) job->Persist();
  return status;
}

void Coordinator::FinishResolve(ResolveTask& task) {
  absl::MutexLock lock(&mu_);
  Job* job = jobs_->Find(task.job_id);
  // Deleted meanwhile (finished, past the retention): nothing to record.
  if (job == nullptr) return;
  job->FinishResolve(task);
  const ResolveRecord& record = task.record;
  writer_->Enqueue(
      [id = task.job_id, step = record.step,
       costs = CostModelToProto(task.measured)](Store& store) {
        return store.AddCostSnapshot(id, step, costs);
      },
      "storing a cost snapshot");
  writer_->Enqueue([record](Store& store) { return store.AddResolveRecord(record); },
                   "storing a re-solve");
  if (options_.observer != nullptr) {
    options_.observer->OnResolve(task.job_id, record.published);
  }
}

}  // namespace zbpp::coordinator
