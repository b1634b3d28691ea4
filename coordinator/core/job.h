#ifndef ZBPP_COORDINATOR_CORE_JOB_H_
#define ZBPP_COORDINATOR_CORE_JOB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core/job_attempt.h"
#include "coordinator/core/job_context.h"
#include "coordinator/core/job_model.h"
#include "coordinator/core/job_watchers.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/schedule_versions.h"
#include "coordinator/core/step_summary.h"
#include "coordinator/core/transport_choice.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// What a step report accepted by Job::AcceptReport leads to.
struct ReportEffect {
  /// Not OK (FailedPrecondition, why) when the replicas disagreed on a
  /// validation: the job must fail. Nothing after that was recorded.
  absl::Status disagreement;
  /// The step every worker has now reported, to CompleteStep.
  std::optional<PendingStep> complete;
  /// The job's record (job.proto Job: state, validation counters, version)
  /// changed and must be stored again. Most reports change nothing in it
  /// until their step completes: storing the record (with its last step's
  /// timeline) on every one of the p·d reports of a step was wasted work.
  bool record_changed = false;
};

/// One job (docs/architecture.md, Flow 1): its API view (job.proto Job,
/// persisted), its state machine (job_state.h), its schedule versions, what
/// they are solved from (JobModel), its current attempt (JobAttempt) and
/// its watchers. Publishing a version queues it on the store writer and on
/// every worker's Session outbox before any grant that reaches its
/// effective step (coordinator.h, "Versioning protocol").
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
  /// p, d, and the pipeline rank and replica of a worker index.
  int stages() const { return attempt_.stages(); }
  int replicas() const { return attempt_.replicas(); }
  int stage_of(int index) const { return attempt_.stage_of(index); }
  int replica_of(int index) const { return attempt_.replica_of(index); }
  /// The current (or last) attempt.
  const JobAttempt& attempt() const { return attempt_; }
  /// The current attempt's rendezvous scope, "<job id>/attempt-<n>".
  std::string scope() const;
  /// Waits for workers: PENDING, or RECOVERING without an attempt.
  bool Waiting() const;
  /// The job as the API shows it: `full` adds the latest schedule version;
  /// otherwise (BASIC) step summaries lose their per-stage rows, the last
  /// step's timeline and the spec's schedule file text are dropped
  /// (job.proto JobView).
  zbpp::v1::Job View(bool full) const;

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
  /// The job's watches (to drop one, or close all at shutdown).
  JobWatchers& watchers() { return watchers_; }

  // --- Attempts ---
  /// The plan SubmitJob made (planning.h): Prepare publishes its schedule
  /// as version 1 instead of planning again (JobModel::AdoptPlan).
  void AdoptPlan(JobPlan plan) { model_.AdoptPlan(std::move(plan)); }
  /// Before an attempt: builds the job's model (JobModel::Prepare), sets
  /// the start step after the last checkpoint and publishes version 1 when
  /// there is none. Fail()'s FailedPrecondition when the job cannot run.
  absl::Status Prepare();
  /// Each rank's memory under the version in force at the start step
  /// (memory_estimate.h); empty without one.
  std::vector<RankMemoryEstimate> EstimateMemory() const;
  /// Membership refused the workers with `refused`: a ResourceExhausted
  /// with an `estimate` puts the largest rank's needs in the state message.
  void NoteWaiting(const absl::Status& refused,
                   const std::vector<RankMemoryEstimate>& estimate);
  /// Starts the next attempt on `worker_ids` (by worker index) over
  /// `transport` (ChooseTransport for those workers; the job's transport
  /// and reason, and every Assignment's): PENDING goes ASSIGNING; each
  /// worker is sent its Assignment and the later versions, then the first
  /// grant. SetState's error.
  absl::Status BeginAttempt(std::vector<std::string> worker_ids, TransportChoice transport);
  /// Ends the current attempt: its workers are sent an Abort with
  /// `abort_reason`. False without one (otherwise the caller releases the
  /// workers and the rendezvous scope).
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
  /// A worker of the attempt was lost (the attempt ended): ASSIGNING goes
  /// back to PENDING, RUNNING to RECOVERING, both with `why`; RECOVERING
  /// keeps its state with `why` as message. SetState's error.
  absl::Status AfterWorkerLost(const std::string& why);
  /// "worker <id> (stage s[, replica r]) failed: <error>".
  std::string WorkerFailure(const std::string& worker_id, int index,
                            const std::string& error) const;
  /// After a worker's failure ended the attempt: RECOVERING with `why`
  /// (already RECOVERING: the message only), or FAILED once more than
  /// `max_recoveries` failures in a row `count`ed without a step completed
  /// between them. SetState's error.
  absl::Status RecoverAfterFailure(const std::string& why, int max_recoveries,
                                   bool count);

  // --- Versions and steps (job_steps.cc) ---
  /// Numbers and stamps `version` (ScheduleVersions::Stamp; the current
  /// validation mode when it has none; SYNCHRONOUS instead of POST, with
  /// the reason appended to reason_detail, when the job's transport cannot
  /// run post-update validation with `schedule`: PostValidationObstacle),
  /// queues its store write, emits it and sends it to the attempt's
  /// workers; returns its number.
  int64_t PublishVersion(zbpp::v1::ScheduleVersion version,
                         const sched::Schedule& schedule);
  /// A step report of the worker at `index` of the current attempt: checks
  /// where it comes from (JobAttempt::CheckReportPlace) and its schedule
  /// version (the one in force), measures it (MeasureStepReport), then
  /// records it: hop samples, acknowledgement, the pending step, its
  /// validation results (gathering each step every worker validated). A
  /// report of a step that worker already reported (a retry whose answer
  /// was lost, a replay) is acknowledged with no effect: nothing counted
  /// twice, no state rewound. InvalidArgument naming the field (nothing
  /// recorded); SetState's error.
  absl::StatusOr<ReportEffect> AcceptReport(const zbpp::v1::ReportStepRequest& report,
                                            int index);
  /// Adds a complete step to the cost model, stores its summary (and the
  /// checkpoint record once every rank wrote one), emits it; returns the
  /// re-solve now due (JobModel::MaybeResolve). `last` is set when it was
  /// the job's last step (then nothing is due).
  std::unique_ptr<ResolveTask> CompleteStep(PendingStep& pending, bool* last);
  /// Publishes a solved re-solve when it still applies (same attempt,
  /// still running, no other schedule since) and a step is left to run it
  /// (StepLeftForNewVersion), filling task.record; persists the job then.
  void FinishResolve(ResolveTask& task);
  /// Version `number` of the job's schedule; null when it has none such.
  /// Every published version stays here (and in the store), whatever was
  /// published after it.
  const zbpp::v1::ScheduleVersion* Version(int64_t number) const {
    return versions_.Find(number);
  }

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
  /// Tells watchers of a state change (never dropped).
  void EmitStateChange(zbpp::v1::JobState old_state, zbpp::v1::JobState new_state,
                       const std::string& message);
  /// RECOVERING with `why`; when already RECOVERING, the message, told to
  /// watchers as a change from RECOVERING to RECOVERING.
  absl::Status Recover(const std::string& why);
  void SendToWorkers(const SessionMessage& message);
  /// The versions after the one in force at the attempt's start step, one
  /// message each (shared by the attempt's workers).
  std::vector<SessionMessage> LaterVersionMessages() const;
  /// Records a validation outcome every worker sent (store, counters,
  /// event, ValidationPolicy) unless it is a replay.
  /// False for an outcome already recorded (replayed after a recovery).
  bool RecordValidation(const zbpp::v1::ValidationOutcome& outcome);
  void SwitchValidationMode(zbpp::v1::ValidationMode mode,
                            const zbpp::v1::ValidationOutcome& last);
  /// Before an attempt over NCCL starts: when a version it would run asks
  /// for POST with a schedule NCCL cannot speculate on
  /// (PostValidationObstacle), publishes a copy of the latest version that
  /// PublishVersion makes SYNCHRONOUS, saying why.
  void ValidateOverTransport();
  /// Whether a version published now would take effect at a step the job
  /// still runs: its effective step (ScheduleVersions::NextEffectiveStep:
  /// after every step granted) is below spec.steps. Once the last step is
  /// granted, a new version could never run; publishing it anyway left the
  /// job's latest version one that no step ran.
  bool StepLeftForNewVersion() const;
  /// CompleteStep's parts.
  void RecordStep(StepOutcome& outcome, const PendingStep& pending);
  void RecordCheckpoint(const StepOutcome& outcome, int64_t step);

  const JobContext& context_;
  const int64_t seq_;
  zbpp::v1::Job job_;  ///< `schedule` is left empty; views fill it.
  ScheduleVersions versions_;
  JobModel model_;
  JobAttempt attempt_;
  /// Consecutive recoveries after a worker failure with no step completed
  /// in between, and steps_completed at the last of them.
  int failed_recoveries_ = 0;
  int64_t steps_at_failed_recovery_ = -1;
  /// Highest step whose validation outcome was recorded (queued for the
  /// store, or restored); -1 before any. Outcomes are gathered in step
  /// order, so one for a step <= it is a replay after a recovery and is not
  /// recorded (or counted) again.
  int64_t validated_through_ = -1;
  JobWatchers watchers_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_H_
