#ifndef ZBPP_COORDINATOR_CORE_JOB_WATCHERS_H_
#define ZBPP_COORDINATOR_CORE_JOB_WATCHERS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/core/outbox.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

/// The WatchJob streams of one job (Coordinator::WatchJob): its events
/// numbered from 1 in the order the job decides them, each queued on every
/// open watch.
///
/// Thread-compatible (its Job is used under the coordinator's mutex); the
/// outboxes are thread-safe.
class JobWatchers {
 public:
  /// Numbers `event` of job `job_id`, stamps it `now` and queues it on
  /// every watch; a `droppable` one is dropped for a watch that lags by its
  /// capacity.
  void Emit(const std::string& job_id, absl::Time now, zbpp::v1::JobEvent event,
            bool droppable);
  /// True when nobody watches: an event decided now may carry no payload
  /// (job_effects.h WatchEvent).
  bool empty() const { return outboxes_.empty(); }

  /// A new watch of `capacity` events whose first is the `snapshot` of job
  /// `job_id` at `now`; closed OK at once when `closed` (a terminal job).
  std::shared_ptr<WatchOutbox> Add(const std::string& job_id, absl::Time now,
                                   zbpp::v1::Job snapshot, size_t capacity,
                                   bool closed);
  /// Drops a watch (it is closed by the caller).
  void Remove(const std::shared_ptr<WatchOutbox>& outbox);
  /// Closes every watch with `status` and drops them.
  void CloseAll(const absl::Status& status);

 private:
  int64_t sequence_ = 0;  ///< Of the last event numbered.
  std::vector<std::shared_ptr<WatchOutbox>> outboxes_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_WATCHERS_H_
