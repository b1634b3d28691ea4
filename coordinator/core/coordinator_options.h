#ifndef ZBPP_COORDINATOR_CORE_COORDINATOR_OPTIONS_H_
#define ZBPP_COORDINATOR_CORE_COORDINATOR_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/coordinator_observer.h"
#include "coordinator/core/validation_policy.h"
#include "coordinator/store/store.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

/// Coordinator::Options (coordinator.h): its dependencies and limits.
struct CoordinatorOptions {
  // --- Dependencies (not owned; must outlive the Coordinator) ---
  /// Source of time. Tests pass a FakeClock.
  Clock* clock = RealClock();
  /// Durable state; required.
  Store* store = nullptr;
  /// Metrics hooks; null for none.
  CoordinatorObserver* observer = nullptr;

  // --- Workers ---
  /// How often workers are told to heartbeat, seconds; > 0.
  double heartbeat_interval_seconds = 2.0;
  /// A worker silent for this long is lost, seconds;
  /// > heartbeat_interval_seconds.
  double heartbeat_timeout_seconds = 10.0;
  /// Most workers held at once, LOST ones not yet forgotten included:
  /// RegisterWorker refuses more with ResourceExhausted (registration is
  /// unauthenticated; this bounds the memory it can take). >= 1; the
  /// default fits the largest job (kMaxWorkersPerJob).
  int max_workers = 4096;
  /// A LOST worker is forgotten (its id unknown, its description and
  /// last heartbeat dropped, gone from ListWorkers) by the first Tick more
  /// than this many seconds after it was lost, unless a job's current
  /// attempt still holds it. >= 0.
  double lost_worker_retention_seconds = 600.0;

  // --- Steps ---
  /// Steps granted beyond the slowest worker's last completed step; >= 2:
  /// with 1, no worker could start step k+1 before every worker reported step
  /// k — a barrier between steps, the one post-update validation removes.
  int64_t grant_lookahead_steps = 2;
  /// A job whose workers keep failing (a FAILED heartbeat) this many times
  /// in a row without completing a step in between goes FAILED instead of
  /// RECOVERING again: the error is in the job (a corpus, a checkpoint),
  /// not in a worker. >= 1.
  int max_recoveries_without_progress = 3;
  /// How long an attempt waits for every worker's calibration profile
  /// (job_spec.proto SchedulePolicy.calibrate), seconds from the attempt's
  /// start; then the first worker still missing fails the attempt, which
  /// recovers like any other failure (counted above). A worker that never
  /// profiled held its job at step 0 for good. > 0.
  double calibration_timeout_seconds = 600.0;
  /// When jobs with JobSpec.validation AUTO switch between synchronous
  /// and post-update validation.
  ValidationPolicy::Options validation_policy;

  // --- Jobs held (docs/control-plane.md, "The control plane": limits) ---
  /// Jobs not yet finished (PENDING to RECOVERING) held at once: SubmitJob
  /// refuses more with ResourceExhausted naming max_active_jobs. >= 1.
  int max_active_jobs = 1000;
  /// Finished jobs (SUCCEEDED, FAILED, CANCELLED) kept: beyond
  /// `retained_finished_jobs`, finished jobs are deleted, from memory and
  /// from the store with every record of theirs (checkpoint records
  /// included: a job can no longer resume from their checkpoints), at
  /// Recover, at each SubmitJob and at each Tick: first those that never
  /// completed a step, oldest first, then the others, oldest first
  /// (JobTable::EraseFinishedBeyond).
  /// So at most max_active_jobs + retained_finished_jobs jobs are held.
  /// >= 1.
  int retained_finished_jobs = 1000;
  /// Job submissions per second, sustained, and in one burst
  /// (submission_rate.h): SubmitJob refuses more with ResourceExhausted
  /// naming max_submissions_per_second. > 0 and >= 1.
  double max_submissions_per_second = 10;
  double submission_burst = 100;

  // --- Watchers ---
  /// Events a WatchJob reader may lag before step events are dropped.
  size_t watch_queue_capacity = 256;

  // --- Re-solves ---
  /// Run re-solves on one background thread (FIFO, one per job at a
  /// time) so the ReportStep that completes a window returns without
  /// waiting for the solver; false: on the reporting caller's thread,
  /// before ReportStep returns (deterministic, for tests and the probe).
  bool resolve_on_background_thread = false;

  // --- Store writes (store_writer.h) ---
  /// Back-off between attempts of a failing write: the first wait,
  /// doubled up to the second. > 0 and max >= initial.
  absl::Duration store_retry_initial_backoff = absl::Milliseconds(100);
  absl::Duration store_retry_max_backoff = absl::Seconds(5);
  /// How long the destructor keeps retrying a failing write before the
  /// writes still queued are given up (logged); >= 0.
  absl::Duration store_drain_timeout = absl::Seconds(10);

  // --- Tests ---
  /// Called with the job id outside the mutex after a re-solve has run
  /// and before its result is published (may call into the Coordinator).
  std::function<void(const std::string&)> before_resolve_publish_for_testing;
};

/// OK when Coordinator::Create may use `options`: InvalidArgument naming
/// the first missing dependency (clock, store) or bad value (heartbeat interval and timeout,
/// max_recoveries_without_progress, calibration_timeout_seconds,
/// grant_lookahead_steps, max_active_jobs, max_submissions_per_second,
/// submission_burst,
/// retained_finished_jobs). Pure.
absl::Status CheckCoordinatorOptions(const CoordinatorOptions& options);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_COORDINATOR_OPTIONS_H_
