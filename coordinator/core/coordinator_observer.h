#ifndef ZBPP_COORDINATOR_CORE_COORDINATOR_OBSERVER_H_
#define ZBPP_COORDINATOR_CORE_COORDINATOR_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

/// Hooks through which the core reports what metrics need (the daemon
/// adapts them to CoordinatorMetrics; tests may count them). Called with
/// the coordinator's lock held: implementations must be quick and must not
/// call back into the Coordinator. Default: no-ops.
class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;
  /// A step of `job_id` completed on every stage.
  virtual void OnStep(const std::string& job_id,
                      const zbpp::v1::StepSummary& step) {}
  /// A schedule version was published (the first one included).
  virtual void OnScheduleVersion(const std::string& job_id, int64_t version) {}
  /// A re-solve was decided (published or not).
  virtual void OnResolve(const std::string& job_id, bool published) {}
  /// A step's validation was gathered; `rolled_back` when any stage undid
  /// its optimistic step, `skipped` when the step was skipped (inf/nan).
  virtual void OnValidation(const std::string& job_id, bool rolled_back,
                            bool skipped) {}
  /// An attempt of `job_id` began over `transport` (GLOO or NCCL; the
  /// coordinator resolves it per attempt, so it may change at a recovery).
  virtual void OnTransport(const std::string& job_id, zbpp::v1::Transport transport) {}
  /// An attempt of `job_id` began with `layout` (Job.layout: blocks per
  /// virtual stage; it changes when the first calibration re-plans it).
  virtual void OnLayout(const std::string& job_id, const std::vector<int>& layout) {}
  /// The replicas of `job_id` running steps (Job.replicas_active) or its
  /// spare workers (docs/elastic.md) changed.
  virtual void OnReplicas(const std::string& job_id, int active, int spares) {}
  /// `job_id` reached a terminal state (its per-job series may go).
  virtual void OnJobFinished(const std::string& job_id) {}
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_COORDINATOR_OBSERVER_H_
