#ifndef ZBPP_COORDINATOR_CORE_COORDINATOR_INTERNAL_H_
#define ZBPP_COORDINATOR_CORE_COORDINATOR_INTERNAL_H_

// What the translation units of Coordinator share: its private state
// (coordinator.cc: jobs, sessions, workers; coordinator_steps.cc: step
// reports, validation, step summaries; coordinator_resolve.cc: adaptive
// re-solves) and a few helpers. Not for use outside them.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/cost_model.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/step_summary.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::coordinator {
namespace internal {

/// The daemon has no logging library (Debian's Abseil predates absl/log);
/// store failures after the in-memory change are reported on stderr.
void LogError(const absl::Status& status, const std::string& context);

/// A version's content — schedule, cost model, predictions — without its
/// number, effective step or publish time (PublishVersion sets those under
/// the mutex). Pure: re-solves build it outside the mutex.
absl::StatusOr<zbpp::v1::ScheduleVersion> BuildVersion(
    const std::string& job_id, const sched::Schedule& schedule,
    const sched::Problem& costs, zbpp::v1::ScheduleChangeReason reason,
    const std::string& detail, const zbpp::v1::SchedulePrediction* previous);

}  // namespace internal

/// A re-solve decided under the mutex and run outside it: copies of what it
/// needs, then its outcome.
struct Coordinator::ResolveTask {
  // --- Inputs (copied under the mutex) ---
  std::string job_id;
  int64_t attempt = 0;
  int64_t current_version = 0;  ///< The job's latest version at the copy.
  std::string policy_name;      ///< Registry name.
  const ResolvePolicy* policy = nullptr;
  sched::Schedule current;
  sched::Problem measured;
  double cost_drift = 0;  ///< CostModel::Drift() when `measured` was taken.
  sched::Problem base;
  // --- Outcome (computed outside the mutex) ---
  ResolveRecord record;
  std::optional<zbpp::v1::ScheduleVersion> candidate;  ///< To publish.
  std::optional<sched::Schedule> candidate_schedule;
};

/// The workers' reports of one step, until every (stage, replica) has
/// reported.
struct Coordinator::PendingStep {
  int64_t step = 0;
  int64_t version = 0;
  /// By worker index (JobRuntime::workers); step_summary.h.
  std::map<int, StageReport> reports;
};

/// One job: its API view (persisted) and what the core needs to run it.
struct Coordinator::JobRuntime {
  int64_t seq = 0;
  zbpp::v1::Job job;  ///< `schedule` is left empty; views fill it.
  std::vector<zbpp::v1::ScheduleVersion> versions;  ///< versions[i] = i+1.
  std::map<int64_t, sched::Schedule> parsed;         ///< By version number.
  std::optional<sched::Problem> base;  ///< initial_problem(spec), lazily.
  std::unique_ptr<CostModel> costs;
  /// Created once per job and never replaced (jobs are never erased), so a
  /// re-solve may use it without the mutex.
  std::unique_ptr<ResolvePolicy> policy;
  /// The validation mode new versions get (JobSpec.validation AUTO: it
  /// switches on the gathered outcomes).
  std::unique_ptr<ValidationPolicy> validation;
  bool resolving = false;  ///< A re-solve runs outside the mutex.
  // --- The current attempt (empty workers: none) ---
  int64_t attempt = 0;
  int64_t start_step = 0;
  /// By worker index replica * stages() + stage (Membership's rank): the
  /// p workers of replica 0, then those of replica 1, ...
  std::vector<std::string> workers;
  std::set<std::string> acknowledged;   ///< Workers that hold the attempt.
  std::vector<int64_t> last_completed;  ///< By worker index.
  int64_t granted = -1;                 ///< Highest grant sent.
  /// Consecutive recoveries after a worker failure with no step completed
  /// in between, and steps_completed at the last of them.
  int failed_recoveries = 0;
  int64_t steps_at_failed_recovery = -1;
  std::map<int64_t, PendingStep> pending;
  /// By step, then worker index.
  std::map<int64_t, std::map<int, zbpp::v1::ValidationResult>> validations;
  /// Highest step whose validation outcome was recorded (queued for the
  /// store, or loaded by Recover); -1 before any. Outcomes are gathered in
  /// step order, so one for a step <= it is a replay after a recovery and
  /// is not recorded (or counted) again.
  int64_t validated_through = -1;
  // --- Watchers ---
  int64_t event_sequence = 0;
  std::vector<std::shared_ptr<WatchOutbox>> watchers;

  std::string scope() const {
    return absl::StrCat(job.id(), "/attempt-", attempt);
  }
  /// p: pipeline ranks.
  int stages() const { return job.spec().pipeline().stages(); }
  /// d: data-parallel replicas (1 when unset).
  int replicas() const { return DataParallelOf(job.spec().pipeline()); }
  /// The pipeline rank and replica of worker index `index`.
  int stage_of(int index) const { return index % stages(); }
  int replica_of(int index) const { return index / stages(); }
  int index_of(int stage, int replica) const {
    return replica * stages() + stage;
  }
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_COORDINATOR_INTERNAL_H_
