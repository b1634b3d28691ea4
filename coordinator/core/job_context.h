#ifndef ZBPP_COORDINATOR_CORE_JOB_CONTEXT_H_
#define ZBPP_COORDINATOR_CORE_JOB_CONTEXT_H_

#include <cstdint>

#include "common/clock.h"
#include "coordinator/core/coordinator_observer.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/validation_policy.h"
#include "coordinator/core/worker_registry.h"

namespace zbpp::coordinator {

/// What every Job (job.h) uses from the coordinator around it. The
/// pointers are not owned and must outlive the jobs; the Coordinator fills
/// it from its Options and uses the jobs under its mutex.
struct JobContext {
  Clock* clock = nullptr;
  StoreWriter* writer = nullptr;            ///< Decided history, in order.
  /// Every worker's record: Session outboxes, descriptions, and the leases in which an ended
  /// attempt's workers are released.
  WorkerRegistry* workers = nullptr;
  CoordinatorObserver* observer = nullptr;  ///< Null: none.
  /// Coordinator::Options' fields of the same names.
  ValidationPolicy::Options validation_policy;
  int64_t grant_lookahead_steps = 2;
  /// The attempts' rendezvous scopes: an ended attempt's is deleted.
  RendezvousStore* rendezvous = nullptr;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_CONTEXT_H_
