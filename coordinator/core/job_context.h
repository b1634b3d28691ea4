#ifndef ZBPP_COORDINATOR_CORE_JOB_CONTEXT_H_
#define ZBPP_COORDINATOR_CORE_JOB_CONTEXT_H_

#include <cstdint>
#include <functional>

#include "common/clock.h"
#include "coordinator/core/validation_policy.h"
#include "coordinator/core/worker_registry.h"

namespace zbpp::coordinator {

/// What every Job (job.h) reads from the coordinator around it: inputs to
/// its decisions only. A job changes nothing outside itself; what it decides
/// must happen elsewhere it returns as effects (job_effects.h). The
/// pointers are not owned and must outlive the jobs; the Coordinator fills
/// it from its Options and uses the jobs under its mutex.
struct JobContext {
  Clock* clock = nullptr;
  /// Whether the store writer is healthy (StoreWriter::Healthy): no step is
  /// granted while it is not (coordinator.h, "Persistence"). Unset: always.
  std::function<bool()> store_healthy;
  /// Every worker's record, read for the descriptions an Assignment gives
  /// each peer.
  const WorkerRegistry* workers = nullptr;
  /// Coordinator::Options' fields of the same names.
  ValidationPolicy::Options validation_policy;
  int64_t grant_lookahead_steps = 2;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_CONTEXT_H_
