#ifndef ZBPP_COORDINATOR_CORE_SCHEDULE_VERSIONS_H_
#define ZBPP_COORDINATOR_CORE_SCHEDULE_VERSIONS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/predicted_stats.h"
#include "scheduler/schedule.h"

namespace zbpp::coordinator {

/// One published schedule of a job.
struct ScheduleVersion {
  int64_t number = 0;  ///< 1, 2, ... in publication order.
  /// First optimizer step run with this schedule; it stays in force until
  /// the next version's effective step.
  int64_t effective_step = 0;
  sched::Schedule schedule;
  PredictedStats predicted;  ///< Under the costs it was chosen for.
  absl::Time published_at;
};

/// The versioned schedules of one job (issue 3, "versioned schedules"):
/// every version takes effect at a step boundary that lies in the future
/// for every worker, so all workers switch at the same step and one step
/// never mixes two versions. History is kept.
///
/// Thread-safe.
class ScheduleVersions {
 public:
  struct Options {
    /// Source of `published_at`; not owned, must outlive this object.
    Clock* clock = RealClock();
    /// How many steps after the highest step any worker has reached a new
    /// version takes effect: time for the version to reach every worker
    /// before its step begins. Must be >= 1.
    int64_t switch_lead_steps = 2;
  };

  /// InvalidArgument for a null clock or switch_lead_steps < 1.
  static absl::StatusOr<std::unique_ptr<ScheduleVersions>> Create(
      Options options);

  /// Publishes `schedule`. `current_step` is the highest step any worker of
  /// the job has started or reported (callers pass the max over workers).
  /// The first version takes effect at `current_step` itself (nothing has
  /// run without a schedule); later ones at
  /// max(current_step + switch_lead_steps, previous effective step + 1), so
  /// that effective steps strictly increase even when two versions are
  /// published in quick succession. InvalidArgument for current_step < 0.
  absl::StatusOr<ScheduleVersion> Publish(sched::Schedule schedule,
                                          const PredictedStats& predicted,
                                          int64_t current_step)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// The version in force at `step`: the one with the largest effective
  /// step <= `step`. NotFound when none is (before the first version, or
  /// nothing published).
  absl::StatusOr<ScheduleVersion> ScheduleForStep(int64_t step) const
      ABSL_LOCKS_EXCLUDED(mu_);

  /// The most recently published version (possibly not yet in force).
  /// NotFound when nothing was published.
  absl::StatusOr<ScheduleVersion> Latest() const ABSL_LOCKS_EXCLUDED(mu_);

  /// Every version in publication order.
  std::vector<ScheduleVersion> History() const ABSL_LOCKS_EXCLUDED(mu_);

  /// Reloads versions from the store after a restart. Only on an empty
  /// object; the versions must be numbered 1, 2, ... with strictly
  /// increasing effective steps. FailedPrecondition when versions exist,
  /// InvalidArgument naming the first bad entry otherwise.
  absl::Status Restore(std::vector<ScheduleVersion> history)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit ScheduleVersions(Options options) : options_(options) {}

  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<ScheduleVersion> versions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_SCHEDULE_VERSIONS_H_
