#include "coordinator/service/metrics_observer.h"

#include "absl/strings/ascii.h"
#include "coordinator/core/transport_choice.h"

namespace zbpp::coordinator {

void MetricsObserver::OnStep(const std::string& job_id,
                             const zbpp::v1::StepSummary& step) {
  metrics_->RecordStep(job_id, step);
  for (const auto& stage : step.stages()) {
    metrics_->SetPredicted(job_id, stage.stage(),
                           stage.predicted_bubble_rate());
  }
}

void MetricsObserver::OnScheduleVersion(const std::string& job_id,
                                        int64_t version) {
  metrics_->SetScheduleVersion(job_id, version);
}

void MetricsObserver::OnResolve(const std::string& job_id, bool published) {
  metrics_->RecordResolve(job_id, published);
}

void MetricsObserver::OnValidation(const std::string& job_id, bool rolled_back,
                                   bool skipped) {
  if (rolled_back) metrics_->AddRollbacks(job_id, 1);
  if (skipped) metrics_->AddSkippedSteps(job_id, 1);
}

void MetricsObserver::OnTransport(const std::string& job_id,
                                  zbpp::v1::Transport transport) {
  metrics_->SetTransport(job_id, absl::AsciiStrToLower(TransportName(transport)));
}

void MetricsObserver::OnLayout(const std::string& job_id, const std::vector<int>& layout) {
  metrics_->SetLayout(job_id, layout);
}

void MetricsObserver::OnReplicas(const std::string& job_id, int active, int spares) {
  metrics_->SetReplicas(job_id, active, spares);
}

void MetricsObserver::OnJobFinished(const std::string& job_id) {
  metrics_->RemoveJob(job_id);
}

void UpdateStateGauges(const Coordinator& coordinator,
                       metrics::CoordinatorMetrics& metrics) {
  for (const auto& [state, n] : coordinator.JobCounts()) {
    metrics.SetJobs(state, n);
  }
  for (const auto& [state, n] : coordinator.WorkerCounts()) {
    metrics.SetWorkers(state, n);
  }
  const StoreWriter::Health store = coordinator.StoreHealth();
  metrics.SetStore(store.healthy, store.pending, store.failed_attempts,
                   store.refused);
}

}  // namespace zbpp::coordinator
