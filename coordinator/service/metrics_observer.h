#ifndef ZBPP_COORDINATOR_SERVICE_METRICS_OBSERVER_H_
#define ZBPP_COORDINATOR_SERVICE_METRICS_OBSERVER_H_

#include <string>

#include "coordinator/core/coordinator.h"
#include "metrics/coordinator_metrics.h"

namespace zbpp::coordinator {

/// Feeds the core's events into the Prometheus families of
/// metrics::CoordinatorMetrics (steps, predicted bubble per stage, re-solves,
/// rollbacks, skipped steps, versions, the transport; per-job series dropped at
/// the end).
/// Thread-safe (metrics::CoordinatorMetrics is).
class MetricsObserver final : public CoordinatorObserver {
 public:
  /// `metrics` is not owned and must outlive this.
  explicit MetricsObserver(metrics::CoordinatorMetrics* metrics) : metrics_(metrics) {}

  void OnStep(const std::string& job_id,
              const zbpp::v1::StepSummary& step) override;
  void OnScheduleVersion(const std::string& job_id, int64_t version) override;
  void OnResolve(const std::string& job_id, bool published) override;
  void OnValidation(const std::string& job_id, bool rolled_back,
                    bool skipped) override;
  void OnTransport(const std::string& job_id, zbpp::v1::Transport transport) override;
  void OnLayout(const std::string& job_id, const std::vector<int>& layout) override;
  void OnReplicas(const std::string& job_id, int active, int spares) override;
  void OnJobFinished(const std::string& job_id) override;

 private:
  metrics::CoordinatorMetrics* const metrics_;
};

/// Sets the jobs-by-state and workers-by-state gauges and the `zbpp_store_*`
/// series (Coordinator::StoreHealth) from the core.
void UpdateStateGauges(const Coordinator& coordinator,
                       metrics::CoordinatorMetrics& metrics);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_METRICS_OBSERVER_H_
