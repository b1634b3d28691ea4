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
  absl::StatusOr<ReportOutcome> outcome = job->ReportStep(report, (*record)->worker_index);
  if (!outcome.ok()) return outcome.status();
  if (outcome->ended) AssignWaitingJobs();  // Its workers are free.
  *resolve = std::move(outcome->resolve);
  return absl::OkStatus();
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
