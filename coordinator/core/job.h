#ifndef ZBPP_COORDINATOR_CORE_JOB_H_
#define ZBPP_COORDINATOR_CORE_JOB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/core/coordinator_observer.h"
#include "coordinator/core/cost_model.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/resolve_policy.h"
#include "coordinator/core/schedule_versions.h"
#include "coordinator/core/step_summary.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/validation_policy.h"
#include "coordinator/core/worker_registry.h"
#include "coordinator/store/store.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// What every Job uses from the coordinator around it. The pointers are not
/// owned and must outlive the jobs.
struct JobContext {
  Clock* clock = nullptr;
  StoreWriter* writer = nullptr;     ///< Decided history, in order.
  WorkerRegistry* workers = nullptr;  ///< Session outboxes, descriptions.
  CoordinatorObserver* observer = nullptr;  ///< Null: none.
  /// Coordinator::Options' fields of the same names.
  std::function<absl::StatusOr<sched::Problem>(const zbpp::v1::JobSpec&)>
      initial_problem;
  ValidationPolicy::Options validation_policy;
  int64_t grant_lookahead_steps = 2;
};

/// A re-solve decided under the coordinator's mutex (Job::MaybeResolve) and
/// run outside it: copies of what it needs, then its outcome.
struct ResolveTask {
  // --- Inputs (copied under the mutex) ---
  std::string job_id;
  int64_t attempt = 0;
  int64_t current_version = 0;  ///< The job's latest version at the copy.
  std::string policy_name;      ///< Registry name.
  /// The job's; never replaced (jobs are never erased), so usable without
  /// the mutex.
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
struct PendingStep {
  int64_t step = 0;
  int64_t version = 0;
  std::map<int, StageReport> reports;  ///< By worker index.
};

/// What a step report accepted by Job::AcceptReport leads to.
struct ReportEffect {
  /// Not OK (FailedPrecondition, why) when the replicas disagreed on a
  /// validation: the job must fail. Nothing after that was recorded.
  absl::Status disagreement;
  /// The step every worker has now reported, to CompleteStep.
  std::optional<PendingStep> complete;
};

/// One job: its API view (persisted; job.proto Job), its state machine
/// (coordinator/core/job_state.h), its schedule versions, and its current
/// attempt: the p × d workers by worker index replica * p + stage (the p
/// workers of replica 0, then those of replica 1, ...), their grants, step
/// reports and validation results. Publishing a version queues it on the
/// store writer and on every worker's Session outbox before any grant that
/// reaches its effective step (coordinator.h, "Versioning protocol").
///
/// Thread-compatible: the Coordinator calls every method with its mutex
/// held (the cost model and the outboxes lock themselves too).
class Job {
 public:
  /// `proto` as stored (its `schedule` is dropped: views fill it).
  Job(int64_t seq, zbpp::v1::Job proto, const JobContext& context);

  // --- Identity and views ---
  int64_t seq() const { return seq_; }  ///< Creation order, from 1.
  const std::string& id() const { return job_.id(); }
  const zbpp::v1::Job& proto() const { return job_; }
  zbpp::v1::JobState state() const { return job_.state(); }
  int stages() const;    ///< p: pipeline ranks.
  int replicas() const;  ///< d: data-parallel replicas (1 when unset).
  int stage_of(int index) const { return index % stages(); }
  int replica_of(int index) const { return index / stages(); }
  int64_t attempt() const { return attempt_; }
  /// The current attempt's rendezvous scope, "<job id>/attempt-<n>".
  std::string scope() const;
  bool has_attempt() const { return !workers_.empty(); }
  const std::vector<std::string>& workers() const { return workers_; }
  /// Waits for workers: PENDING, or RECOVERING without an attempt.
  bool Waiting() const;
  /// The job as the API shows it: `full` adds the latest schedule version;
  /// otherwise (BASIC) step summaries lose their per-stage rows and the
  /// last step's timeline is dropped (job.proto JobView).
  zbpp::v1::Job View(bool full) const;
  /// Replaces the state message, the state unchanged.
  void SetStateMessage(std::string message) { job_.set_state_message(std::move(message)); }

  // --- State machine ---
  /// Moves to `state` with `message`, stamps start/end times, counts
  /// recoveries, emits the change to watchers; a terminal state closes the
  /// watchers and clears the assignments. FailedPrecondition "job <id>:
  /// illegal job state transition A -> B" (job_state.h Transition) when
  /// the diagram has no such edge; nothing changes then.
  absl::Status SetState(zbpp::v1::JobState state, const std::string& message);
  /// Sets the job FAILED with `why` and persists it; returns
  /// FailedPrecondition "job <id> failed: <why>" (or SetState's error).
  absl::Status Fail(const std::string& why);
  /// Queues the job's store write (StoreWriter: retried until stored).
  void Persist();

  // --- Watchers ---
  /// A new watch: the outbox holds a BASIC snapshot; closed OK at once
  /// when the job is terminal, else fed with every later event.
  std::shared_ptr<WatchOutbox> Watch(size_t capacity);
  /// Cancels and drops a watch.
  void Unwatch(const std::shared_ptr<WatchOutbox>& outbox);
  /// Closes every watch with `status` (shutdown).
  void CloseWatchers(const absl::Status& status);

  // --- Attempts ---
  /// Before an attempt: builds the job's problem, cost model and policies
  /// when it has none and publishes version 1 when it has no version (the
  /// spec's generator, schedule file, or ChooseAutoSchedule's pick for
  /// "auto"); sets the start step after the last checkpoint. Fail()'s
  /// FailedPrecondition when the job cannot run.
  absl::Status Prepare();
  /// Each rank's memory under the version in force at the start step
  /// (memory_estimate.h); empty without one.
  std::vector<RankMemoryEstimate> EstimateMemory() const;
  /// Membership refused the workers with `refused`: a ResourceExhausted
  /// with an `estimate` puts the largest rank's needs in the state
  /// message.
  void NoteWaiting(const absl::Status& refused,
                   const std::vector<RankMemoryEstimate>& estimate);
  /// Starts the next attempt on `worker_ids` (by worker index): PENDING
  /// goes ASSIGNING; each worker is sent its Assignment and the later
  /// versions, then the first grant. SetState's error.
  absl::Status BeginAttempt(std::vector<std::string> worker_ids);
  /// Ends the current attempt: its workers are sent an Abort with
  /// `abort_reason` and its step state is dropped. False without one (the
  /// caller releases the workers and the rendezvous scope otherwise).
  bool EndAttempt(const std::string& abort_reason);
  /// Replays the attempt to `worker_id` at worker index `index` on a new
  /// Session (Assignment, later versions, latest grant); nothing when it
  /// does not hold that index.
  void ReplaySession(const std::string& worker_id, int index);
  /// Grants steps up to the slowest rank + lookahead; none while the store
  /// writer is unhealthy (coordinator.h, "Persistence").
  void UpdateGrant();
  /// `worker_id` holds the attempt; when every worker does, ASSIGNING or
  /// RECOVERING goes RUNNING (true). SetState's error.
  absl::StatusOr<bool> Acknowledge(const std::string& worker_id);
  /// After a worker's failure ended the attempt: RECOVERING with `why`, or
  /// FAILED once more than `max_recoveries` failures in a row `count`ed
  /// without a step completed between them. SetState's error.
  absl::Status RecoverAfterFailure(const std::string& why, int max_recoveries,
                                   bool count);

  // --- Schedule versions ---
  /// Numbers and stamps `version` (ScheduleVersions::Stamp; the current
  /// validation mode when it has none), queues its store write, emits it
  /// and sends it to the attempt's workers; returns its number.
  int64_t PublishVersion(zbpp::v1::ScheduleVersion version,
                         const sched::Schedule& schedule);

  // --- Steps (job_steps.cc) ---
  /// A step report of the worker at `index` of the current attempt: checks
  /// its stage, replica, step (granted to this attempt) and schedule
  /// version (the one in force), measures it (MeasureStepReport), then
  /// records it: hop samples, acknowledgement, the pending step, its
  /// validation results (gathering each step every worker validated).
  /// InvalidArgument naming the field (nothing recorded); SetState's error.
  absl::StatusOr<ReportEffect> AcceptReport(
      const zbpp::v1::ReportStepRequest& report, int index);
  /// Adds a complete step to the cost model, stores its summary (and the
  /// checkpoint record once every rank wrote one), emits it. True when it
  /// was the job's last step.
  bool CompleteStep(PendingStep& pending);
  /// The re-solve due after `step` (the policy's window ends under the
  /// latest version and every stage has a sample), or null.
  std::unique_ptr<ResolveTask> MaybeResolve(int64_t step);
  /// A re-solve of this job ended; true when its candidate may still be
  /// published: same attempt, still running, no other schedule since.
  bool EndResolve(const ResolveTask& task);

  // --- Recovery ---
  /// A stored version (Coordinator::Recover). ScheduleFromProto's errors.
  absl::Status RestoreVersion(zbpp::v1::ScheduleVersion version);
  /// After every version is restored: `outcomes` are the job's stored
  /// validation outcomes (ignored when terminal). ASSIGNING goes PENDING
  /// and RUNNING goes RECOVERING ("coordinator restarted"); true when the
  /// state changed. SetState's error.
  absl::StatusOr<bool> Restore(const std::vector<zbpp::v1::ValidationOutcome>& outcomes);

 private:
  void Emit(zbpp::v1::JobEvent event, bool droppable);
  void SendToWorkers(const SessionMessage& message);
  zbpp::v1::Assignment BuildAssignment(int index) const;
  /// Prepare()'s parts: the base problem (and "auto"'s pick), the cost
  /// model and policies, version 1. Return the reason the job cannot run.
  absl::Status PrepareProblem(std::optional<sched::Schedule>* auto_choice);
  absl::Status PrepareModel();
  absl::Status PublishFirstVersion(std::optional<sched::Schedule> auto_choice);
  /// AcceptReport's checks of where the report comes from.
  absl::Status CheckReportPlace(const zbpp::v1::ReportStepRequest& report,
                                int index) const;
  /// Gathers `step` once every worker validated it: records the outcome
  /// (store, counters, event, ValidationPolicy). The replicas'
  /// disagreement (GatherValidationOutcome) otherwise.
  absl::Status GatherValidation(int64_t step);
  void SwitchValidationMode(zbpp::v1::ValidationMode mode,
                            const zbpp::v1::ValidationOutcome& last);
  /// CompleteStep's parts.
  StepReports StepReportsOf(PendingStep& pending);
  void RecordStep(const StepOutcome& outcome, const PendingStep& pending,
                  StepReports& reports);
  void RecordCheckpoint(const StepOutcome& outcome, int64_t step);

  const JobContext& context_;
  const int64_t seq_;
  zbpp::v1::Job job_;  ///< `schedule` is left empty; views fill it.
  ScheduleVersions versions_;
  std::optional<sched::Problem> base_;  ///< initial_problem(spec), lazily.
  std::unique_ptr<CostModel> costs_;
  /// Created once per job and never replaced, so a re-solve may use it
  /// without the mutex.
  std::unique_ptr<ResolvePolicy> policy_;
  /// The validation mode new versions get (JobSpec.validation AUTO: it
  /// switches on the gathered outcomes).
  std::unique_ptr<ValidationPolicy> validation_;
  bool resolving_ = false;  ///< A re-solve runs outside the mutex.
  // --- The current attempt (empty workers_: none) ---
  int64_t attempt_ = 0;
  int64_t start_step_ = 0;
  std::vector<std::string> workers_;     ///< By worker index.
  std::set<std::string> acknowledged_;   ///< Workers that hold the attempt.
  std::vector<int64_t> last_completed_;  ///< By worker index.
  int64_t granted_ = -1;                 ///< Highest grant sent.
  /// Consecutive recoveries after a worker failure with no step completed
  /// in between, and steps_completed at the last of them.
  int failed_recoveries_ = 0;
  int64_t steps_at_failed_recovery_ = -1;
  std::map<int64_t, PendingStep> pending_;
  /// By step, then worker index.
  std::map<int64_t, std::map<int, zbpp::v1::ValidationResult>> validations_;
  /// Highest step whose validation outcome was recorded (queued for the
  /// store, or restored); -1 before any. Outcomes are gathered in step
  /// order, so one for a step <= it is a replay after a recovery and is not
  /// recorded (or counted) again.
  int64_t validated_through_ = -1;
  // --- Watchers ---
  int64_t event_sequence_ = 0;
  std::vector<std::shared_ptr<WatchOutbox>> watchers_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_H_
