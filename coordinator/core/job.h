#ifndef ZBPP_COORDINATOR_CORE_JOB_H_
#define ZBPP_COORDINATOR_CORE_JOB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/core/job_attempt.h"
#include "coordinator/core/job_context.h"
#include "coordinator/core/job_effects.h"
#include "coordinator/core/job_model.h"
#include "coordinator/core/job_watchers.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/schedule_versions.h"
#include "coordinator/core/step_summary.h"
#include "coordinator/core/transport_choice.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// The Abort (worker.proto AbortCommand, keep_state false) that tells a
/// worker holding a stage of job `job_id` from attempt `attempt` in memory
/// (Heartbeat.held) to drop it: the job ended, restarts, or is unknown
/// (docs/elastic.md). `reason` for its logs.
SessionMessage DropHeldStateMessage(const std::string& job_id, int64_t attempt,
                                    const std::string& reason);

/// One job (docs/architecture.md, Flow 1): its API view (job.proto Job,
/// persisted), its state machine (job_state.h), its schedule versions, what
/// they are solved from (JobModel), its current attempt (JobAttempt) and
/// its watchers.
///
/// Decide, then act (job_effects.h): a method changes the job and nothing
/// else. Whatever must happen outside it — store writes, Session messages,
/// workers released, rendezvous scopes deleted, a solve request, watch
/// events, metrics — is collected, in decision order, until TakeEffects
/// hands it to the Coordinator, which applies it (ApplyJobEffects) before
/// it calls anything else. Publishing a version decides its store write
/// and its message to every worker before any grant that reaches its
/// effective step (coordinator.h, "Versioning protocol").
///
/// Thread-compatible: the Coordinator calls every method with its mutex
/// held.
class Job {
 public:
  /// `proto` as stored (its `schedule` is dropped: views fill it), its
  /// schedule file's text, when it has one, in `schedule_file` (shared with
  /// the jobs of the same file, ScheduleFileTexts) rather than in the spec.
  Job(int64_t seq, zbpp::v1::Job proto, const JobContext& context,
      std::shared_ptr<const std::string> schedule_file = nullptr);

  // --- Identity and views ---
  int64_t seq() const { return seq_; }  ///< Creation order, from 1.
  const std::string& id() const { return job_.id(); }
  const zbpp::v1::Job& proto() const { return job_; }
  zbpp::v1::JobState state() const { return job_.state(); }
  /// p, the spec's d (pipeline.data_parallel; the current attempt's own,
  /// fewer while DEGRADED, is attempt().replicas()), and the stage and
  /// replica of a worker index of the attempt.
  int stages() const { return attempt_.stages(); }
  int replicas() const { return attempt_.spec_replicas(); }
  int stage_of(int index) const { return attempt_.stage_of(index); }
  int replica_of(int index) const { return attempt_.replica_of(index); }
  /// The current (or last) attempt.
  const JobAttempt& attempt() const { return attempt_; }
  /// The current attempt's rendezvous scope, "<job id>/attempt-<n>".
  std::string scope() const;
  /// Waits for workers: PENDING, RECOVERING without an attempt once it has
  /// decided to restart (not while AwaitingHeld()), or RUNNING after its
  /// calibration chose another layout (Relayout).
  bool Waiting() const;
  /// The job as the API shows it: `full` adds the latest schedule version;
  /// otherwise (BASIC) step summaries lose their per-stage rows, the last
  /// step's timeline and the spec's schedule file text are dropped
  /// (job.proto JobView). Both keep Job.transitions: at most
  /// kMaxTransitions small entries, what a watcher's snapshot or a list
  /// needs to tell how a job got where it is.
  zbpp::v1::Job View(bool full) const;
  /// The newest state changes the record keeps (job.proto Job.transitions).
  static constexpr int kMaxTransitions = 100;

  /// Everything decided since the last call (or construction), in
  /// decision order, for the caller to apply (ApplyJobEffects); the job
  /// holds none after it. Empty when nothing was decided.
  JobEffects TakeEffects();

  // --- State machine ---
  // Every state change goes through one private path (ChangeState), in this
  // order: the edge is checked against job_state.h's diagram (an illegal
  // one is FailedPrecondition "job <id>: illegal job state transition
  // A -> B" and changes nothing, decides nothing); the attempt ends when
  // the change ends it (an Abort for its workers, their release in the
  // registry, its rendezvous scope's deletion); the record changes (state,
  // message, start/end times, recoveries); its store write, the watchers'
  // event (and, when terminal, their closing and the metrics' OnJobFinished)
  // are decided; the record keeps the change in Job.transitions (the newest
  // kMaxTransitions). The public transitions below are the only callers.

  /// FAILED with `why`, ending the attempt if one is active (its workers
  /// told `why`): the job cannot run. Returns FailedPrecondition
  /// "job <id> failed: <why>" (or the illegal transition's error).
  absl::Status Fail(const std::string& why);
  /// The user cancels: CANCELLED with `message`, the attempt's workers told
  /// "job cancelled: <message>". FailedPrecondition "job <id> is already
  /// <STATE>" for a terminal job (nothing changes).
  absl::Status Cancel(const std::string& message);

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
  /// there is none, or a version of the spec's m microbatches (reason
  /// REPLICAS, at the start step: PublishReplicasVersion) when one from
  /// that step on has another count (the job degraded before). Fail()'s
  /// FailedPrecondition when the job cannot run.
  absl::Status Prepare();
  /// Each stage's memory under the version in force at the start step
  /// (memory_estimate.h); empty without one.
  std::vector<StageMemoryEstimate> EstimateMemory() const;
  /// The registry refused the workers with `refused`: a ResourceExhausted
  /// with an `estimate` puts the largest stage's needs in the state message.
  void NoteWaiting(const absl::Status& refused,
                   const std::vector<StageMemoryEstimate>& estimate);
  /// Starts the next attempt on `worker_ids` (by worker index) over
  /// `transport` (ChooseTransport for those workers; the job's transport
  /// and reason, and every Assignment's): PENDING goes ASSIGNING; each
  /// worker is sent its Assignment and the later versions, then the first
  /// grant. The attempt resumes from memory in the shape DecideRecovery
  /// chose when it chose one (no calibration then); otherwise it runs the
  /// spec's d replicas of m (Prepare) and a RECOVERING job counts a
  /// restart (Job.restarts_total, once per recovery). FailedPrecondition
  /// (nothing changes) unless the job waits for workers (Waiting()) or
  /// DecideRecovery chose the attempt (a heal's follows a DEGRADED one).
  absl::Status BeginAttempt(std::vector<std::string> worker_ids, TransportChoice transport);
  /// Replays the attempt to `worker_id` at worker index `index` on a new
  /// Session (Assignment, later versions, latest grant); nothing when it
  /// does not hold that index.
  void ReplaySession(const std::string& worker_id, int index);
  /// Grants steps up to the slowest worker + lookahead (a grant message to
  /// each worker); none while the store is unhealthy
  /// (JobContext::store_healthy; coordinator.h, "Persistence").
  void UpdateGrant();
  /// `worker_id` holds the attempt; when every worker does, ASSIGNING or
  /// RECOVERING goes RUNNING, or DEGRADED when the attempt runs fewer
  /// replicas than the spec (true).
  absl::StatusOr<bool> Acknowledge(const std::string& worker_id);
  /// A worker of the attempt was lost (its lease expired, or a new process
  /// took its address): the attempt ends (its workers told "attempt ended:
  /// <why>"); ASSIGNING goes back to PENDING, RUNNING and DEGRADED to
  /// RECOVERING, both with `why`; RECOVERING stays RECOVERING with `why` as message
  /// (watchers see RECOVERING -> RECOVERING). Nothing in other states.
  absl::Status AfterWorkerLost(const std::string& why);
  /// The worker `worker_id` at worker index `index` of the attempt reported
  /// FAILED with `error`: the attempt ends, its workers told "worker <id>
  /// (stage s[, replica r]) failed: <error>", which becomes the state
  /// message. FAILED when `job_error` (the job cannot run: a retry would
  /// fail again) or while ASSIGNING (it never started); else (RUNNING,
  /// DEGRADED, RECOVERING) RECOVERING, or FAILED once more than `max_recoveries`
  /// failures in a row were `count`ed with no step completed between them
  /// (a failure while the store fails is not counted: coordinator.h,
  /// "Persistence"). Nothing in other states.
  absl::Status AfterWorkerFailed(const std::string& worker_id, int index,
                                 const std::string& error, bool job_error,
                                 int max_recoveries, bool count);

  /// Calibration's deadline (CoordinatorOptions.calibration_timeout):
  /// when the current attempt has waited `timeout` or longer since it
  /// began (`now`) for a worker's calibration profile, that worker (the
  /// first missing, by index) fails the attempt as AfterWorkerFailed
  /// would ("sent no calibration profile within ..."), counted like any
  /// failure; a job still ASSIGNING goes back to PENDING (AfterWorkerLost).
  /// Nothing otherwise (no attempt, not calibrating, solving, in time).
  absl::Status CheckCalibrationDeadline(absl::Time now, absl::Duration timeout,
                                        int max_recoveries, bool count);

  // --- Recovering from memory (docs/elastic.md; job_elastic.cc) ---
  /// The attempt a fault ended, whose workers may hold the job's state in
  /// memory (Heartbeat.held): RECOVERING waits for them (AwaitingHeld)
  /// until DecideRecovery.
  struct EndedAttempt {
    int64_t number = 0;
    /// Its workers by its worker index (over its own replicas).
    std::vector<std::string> workers;
    /// When it ended (the coordinator's clock): the wait for what its
    /// workers hold is bounded from here.
    absl::Time ended_at;
    /// A degraded attempt ended to heal (BeginHeal), not by a fault.
    bool heal = false;
    /// Worker indexes that hold nothing whatever they say: a heal's
    /// newcomers that ran no step (their state copy may never have come).
    std::vector<bool> holds_nothing;
    /// The attempt ran when the coordinator stopped (Restore): the
    /// restarted one numbers workers and attempts afresh, so `number` (0)
    /// and `workers` (empty ids, one per worker index of its stored
    /// assignments) are unknown until PlaceRestoredAttempt puts the workers
    /// that registered again where what they hold says they ran
    /// (PlaceRestoredHolders, elastic_recovery.h; docs/elastic.md,
    /// "Coordinator restart").
    bool restored = false;
  };
  /// The ended attempt awaited; null when no decision is pending.
  const EndedAttempt* AwaitingHeld() const {
    return awaited_.has_value() ? &*awaited_ : nullptr;
  }
  /// Whether the job keeps the stage state `held` (Heartbeat.held) that
  /// `worker_id` holds (it is not in the current attempt): a worker of the
  /// awaited attempt, any holder of the job's state while a restored one
  /// is not placed yet, or a spare of a degrade (docs/elastic.md). Such a
  /// worker, idle, is WORKER_STATE_SPARE and is given to no other job.
  bool KeepsHeld(const std::string& worker_id, const zbpp::v1::HeldState& held) const;
  /// The awaited attempt is a restored one (EndedAttempt.restored): it was
  /// number `attempt` of the coordinator's previous life (the next one is
  /// numbered after it) and `workers`, by its worker index (empty where
  /// nobody holds that place), hold its stages. Nothing unless restored.
  void PlaceRestoredAttempt(int64_t attempt, std::vector<std::string> workers);
  /// Spares: workers outside the attempt holding one of the job's stages
  /// for it, each with the attempt it held the stage in.
  const std::map<std::string, int64_t>& spares() const { return spares_; }
  /// `worker_id` is lost: it is no spare of the job any more.
  void ForgetSpare(const std::string& worker_id);
  /// A worker of `stage` wrote the stage's snapshot of `step`
  /// (CheckpointSpec.snapshot_interval_steps; docs/elastic.md,
  /// "Snapshots"), as its step report or held state says: raises
  /// Job.snapshot_steps[stage] to it and sets Job.last_snapshot_step.
  void NoteSnapshot(int stage, int64_t step);
  /// Decides how the job recovers (ChooseRecovery, elastic_recovery.h) from
  /// `held[i]`, the step the awaited attempt's worker index i holds
  /// (nullopt: nothing, or it did not say in time). Resuming (at full
  /// width, or degraded onto the complete replicas): start step j + 1,
  /// a version of m' microbatches at that step when the one in force has
  /// another count (PlanReplicas, reason REPLICAS: restart instead when
  /// none can be planned), the broken replicas' holders kept as spares,
  /// the state message naming the shape; returns the next attempt's
  /// workers by its worker index (each keeps its stage), for the caller to
  /// take in the registry and BeginAttempt. When the held step is the
  /// job's last, the job SUCCEEDED. Otherwise it restarts: every holder
  /// is told to drop the state (AbortCommand.keep_state false), the state
  /// message says why, and the job waits for workers (Waiting()); returns
  /// nullopt. Nothing (nullopt) when no decision is pending.
  ///
  /// After a heal's end (EndedAttempt.heal), `newcomers` are the workers
  /// that may fill the missing replicas: each with the stage it holds for
  /// the job (a spare) or -1 (an idle worker). When the live replicas
  /// resume and every missing (replica, stage) finds one (a spare of that
  /// stage first), the next attempt runs the spec's d replicas of m from
  /// j + 1 (a version of m at that step when needed), the newcomers
  /// receiving their state from replica 0 (AttemptShape.live_replicas);
  /// short of newcomers it resumes degraded as before; when the live
  /// replicas cannot resume, the job goes RECOVERING and restarts.
  ///
  /// After a coordinator restart, `step_reports[i]` is worker index i's
  /// report of the step it holds (HeldState.step_report); resuming from
  /// memory records that step from them first when the record lacks it
  /// (RecordUnreportedStep).
  std::optional<std::vector<std::string>> DecideRecovery(
      const std::vector<std::optional<int64_t>>& held,
      const std::vector<std::pair<std::string, int>>& newcomers = {},
      const std::vector<std::optional<zbpp::v1::ReportStepRequest>>& step_reports = {});
  /// A DEGRADED job whose missing replicas can be filled (the caller
  /// checked the spares and idle workers) heals (docs/elastic.md, "Heal"):
  /// no step is granted past the last one it runs, and once every worker
  /// reported that one the attempt ends keeping its state (AwaitingHeld,
  /// EndedAttempt.heal) for DecideRecovery. The last step is the last one
  /// granted: under post-update validation every stage still holds it
  /// validated, as a worker that reported a step leaves its groups to the
  /// held state's settling (docs/elastic.md, "On the worker"). False (nothing
  /// changes) unless DEGRADED with an attempt, not healing already, and a
  /// step is left past the grants.
  bool BeginHeal();
  /// Healing: grants stopped until the degraded attempt ends.
  bool healing() const { return healing_; }

  // --- Versions and steps (job_steps.cc) ---
  /// Numbers and stamps `version` (ScheduleVersions::Stamp; the current
  /// validation mode when it has none; SYNCHRONOUS instead of POST, with
  /// the reason appended to reason_detail, when the job's transport cannot
  /// run post-update validation with `schedule`: PostValidationObstacle),
  /// and decides its store write, its message to the attempt's workers, its
  /// watch event and its metric; returns its number.
  int64_t PublishVersion(zbpp::v1::ScheduleVersion version,
                         const sched::Schedule& schedule);
  /// A step report of the worker at `index` of the current attempt: checks
  /// where it comes from (JobAttempt::CheckReportPlace) and its schedule
  /// version (the one in force), measures it (MeasureStepReport), then
  /// records it: hop samples, acknowledgement (RUNNING once every worker
  /// holds the attempt), the pending step, its validation results
  /// (gathering each step every worker validated). Once every worker
  /// reported the step, adds it to the cost model and decides its summary's
  /// store write (and the checkpoint record's once every stage wrote one),
  /// event and metric, and the re-solve now due (JobModel::MaybeResolve:
  /// JobEffects::resolve); after the job's last step the job SUCCEEDED;
  /// when the replicas disagreed on a validation it FAILED (nothing after
  /// that recorded). Then grants (UpdateGrant) and stores the record when
  /// the report changed it. A report of a step that worker already reported
  /// (a retry whose answer was lost, a replay) is acknowledged with no
  /// effect: nothing counted twice, no state rewound. InvalidArgument
  /// naming the field (nothing recorded); an illegal transition's
  /// FailedPrecondition.
  absl::Status ReportStep(const zbpp::v1::ReportStepRequest& report, int index);
  /// The solved `task` (resolver.h SolveResolve) of this job comes back: a
  /// re-solve is published when it still applies (same attempt, still
  /// running, no other schedule since) and a step is left to run it
  /// (StepLeftForNewVersion), then the record stored; a calibration goes
  /// to FinishCalibration. Either way fills task.record and decides, after
  /// the version's effects, the re-solve's cost snapshot (not for a
  /// calibration), its record (Store::AddResolveRecord) and its metric
  /// (OnResolve; not for a calibration).
  void FinishResolve(ResolveTask& task);

  // --- Calibration (job_calibration.cc) ---
  /// The calibration profile (worker.proto ReportProfile) of the worker at
  /// `index` of the current attempt, checked against what its Assignment
  /// carried (MeasureProfile: InvalidArgument naming the field, nothing
  /// kept). FailedPrecondition "... has no calibration pending" when the
  /// attempt is not calibrating (calibrate: false, or its version is out).
  /// Acknowledges the worker (RUNNING once every worker holds the
  /// attempt). Once every (stage, replica) sent its profile, decides the
  /// task that plans the calibrated version (JobModel::Calibrate;
  /// JobEffects::resolve), to solve outside the coordinator's mutex and
  /// hand to FinishResolve; nothing before, nor for a profile sent again
  /// while it is solved.
  absl::Status ReportProfile(const zbpp::v1::ReportProfileRequest& profile, int index);
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
  /// and RUNNING or DEGRADED goes RECOVERING ("coordinator restarted"),
  /// stored like any transition, awaiting what the workers of its stored
  /// assignments hold (AwaitingHeld, EndedAttempt.restored: ended now) as
  /// after a fault, so that DecideRecovery resumes from their memory
  /// (docs/elastic.md, "Coordinator restart").
  absl::Status Restore(const std::vector<zbpp::v1::ValidationOutcome>& outcomes);

 private:
  /// What a step report accepted by AcceptReport leads to (ReportStep).
  struct ReportEffect {
    /// Not OK (FailedPrecondition, why) when the replicas disagreed on a
    /// validation: the job must fail. Nothing after that was recorded.
    absl::Status disagreement;
    /// The step every worker has now reported, to CompleteStep.
    std::optional<PendingStep> complete;
    /// The job's record (job.proto Job: validation counters, last step)
    /// changed and must be stored again. Most reports change nothing in it
    /// until their step completes: storing the record (with its last
    /// step's timeline) on every one of the p·d reports of a step was
    /// wasted work.
    bool record_changed = false;
  };

  /// The one path of a state change (the class comment, "State machine"):
  /// to `state` with `message`; when `abort_reason` is set or `state` is
  /// terminal, the current attempt (if any) ends first, its workers told
  /// `abort_reason` (or `message`). A job
  /// RECOVERING may "go" RECOVERING again (its next attempt ended too): no
  /// edge of the diagram, so no recovery is counted, but the message
  /// changes and watchers see RECOVERING -> RECOVERING.
  absl::Status ChangeState(zbpp::v1::JobState state, const std::string& message,
                           const std::optional<std::string>& abort_reason);
  /// Ends the current attempt: decides an Abort with `abort_reason` and
  /// `keep_state` (AbortCommand.keep_state: a fault's, so that the next
  /// attempt may resume from memory) for its workers, their release in the
  /// registry (WorkerRegistry::Release) and the rendezvous scope's
  /// deletion. Nothing without one.
  void EndAttempt(const std::string& abort_reason, bool keep_state);
  /// The current attempt as it ends at `now` (EndedAttempt), for
  /// DecideRecovery.
  EndedAttempt EndingAttempt(absl::Time now, bool heal) const;
  /// Tells every worker the job keeps state of outside its attempt
  /// (KeepsHeld) to drop it (an Abort of the attempt it holds, keep_state
  /// false, with `reason`) and keeps none: the job ended or restarts.
  void DropHeld(const std::string& reason);
  /// Builds what the job's model lacks (JobModel::Prepare, the schedule
  /// file's text attached): version 1's choice the first time, else
  /// nullopt. A job restored by a restarted coordinator has none of it.
  absl::StatusOr<std::optional<ScheduleChoice>> PrepareModel();
  /// Publishes a version of `microbatches` microbatches (PlanReplicas for
  /// `replicas` replicas, reason REPLICAS, effective at the attempt's start
  /// step) unless every version from that step on has that many. The
  /// planner's refusal otherwise (nothing published).
  absl::Status PublishReplicasVersion(int replicas, int microbatches);
  /// ChangeState's entry in Job.transitions: `from` -> `to` at `now`, with
  /// the steps completed then and the state message `message`; the oldest
  /// entries dropped past kMaxTransitions. A RECOVERING job that "goes"
  /// RECOVERING again is listed too (its message names the new fault).
  void RecordTransition(zbpp::v1::JobState from, zbpp::v1::JobState to,
                        const std::string& message, absl::Time now);
  /// Decides storing the job's record as it is now: by ChangeState, and for
  /// changes of the record that are no transition (a waiting job's message,
  /// a new attempt of a recovering job, a published re-solve, a step
  /// report's counters).
  void Persist();
  /// Decides telling the metrics the replicas running steps and the
  /// spares (ReplicasObserved) when they changed since last told.
  void ObserveReplicas();
  /// Decides a watch event.
  void Emit(zbpp::v1::JobEvent event, bool droppable);
  /// Tells watchers of a state change (never dropped).
  void EmitStateChange(zbpp::v1::JobState old_state, zbpp::v1::JobState new_state,
                       const std::string& message);
  /// "worker <id> (stage s[, replica r]) failed: <error>".
  std::string WorkerFailure(const std::string& worker_id, int index,
                            const std::string& error) const;
  /// Decides `message` for every worker of the attempt (one shared copy).
  void MessageWorkers(const SessionMessage& message);
  /// The versions after the one in force at the attempt's start step, one
  /// message each (shared by the attempt's workers).
  std::vector<SessionMessage> LaterVersionMessages() const;
  /// Records a validation outcome every worker sent: its store write, the
  /// job's counters (CountValidation), its event and metric, and, for a
  /// step validated for the first time, the ValidationPolicy. A step
  /// validated again (replayed after a recovery or a restart) replaces the
  /// step's outcome (store.h, "Replayed steps") but is not shown to the
  /// policy, which reads each step once, in step order.
  void RecordValidation(const zbpp::v1::ValidationOutcome& outcome);
  /// Makes `outcome` the one its step counts in the job's rollbacks_total,
  /// skipped_steps_total and clipped_steps_total, taking back what an
  /// earlier outcome of the step counted.
  void CountValidation(const zbpp::v1::ValidationOutcome& outcome);
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
  /// FinishResolve of a calibration: when its attempt still waits for it,
  /// FAILED with task.failure when nothing fits the limit; else publishes
  /// task.candidate (reason CALIBRATION, effective at the attempt's start
  /// step: ScheduleVersions::NextEffectiveStep), ends the calibration and
  /// grants.
  void FinishCalibration(ResolveTask& task);
  /// FinishCalibration of a calibration that chose another layout
  /// (ResolveTask::layout changed; Job.layout and its reason already set):
  /// the spec takes `layout` (blocks per virtual stage) as PlanJob stores
  /// one, the model forgets the old layout's costs (JobModel::ForgetLayout),
  /// and the attempt ends ("the calibration chose the layout ...") with the
  /// job still RUNNING and Waiting(), so that the coordinator begins the
  /// next attempt at once on free workers; no recovery is counted.
  void Relayout(const std::vector<int>& layout);
  /// ReportStep's parts: records the report (InvalidArgument naming the
  /// field, nothing recorded; an illegal transition's error), then, once
  /// every worker reported the step, completes it, deciding the re-solve
  /// now due (JobModel::MaybeResolve); `last` is set when it was the job's
  /// last step (then nothing is due).
  absl::StatusOr<ReportEffect> AcceptReport(const zbpp::v1::ReportStepRequest& report,
                                            int index);
  void CompleteStep(PendingStep& pending, bool* last);
  /// FinishResolve of a re-solve (not a calibration).
  void FinishReSolve(ResolveTask& task);
  /// CompleteStep's parts. RecordPendingStep: the cost model takes the
  /// step's reports (`replicas` of `microbatches` each, 0: the spec's m),
  /// and its summary, timeline and checkpoint are recorded.
  void RecordPendingStep(PendingStep& pending, int replicas, int microbatches);
  void RecordStep(StepOutcome& outcome, const PendingStep& pending);
  void RecordCheckpoint(const StepOutcome& outcome, int64_t step);
  /// After a coordinator restart (docs/elastic.md, "Coordinator restart"):
  /// `step`, held by every kept worker, may be one the previous coordinator
  /// never recorded (it stopped between the step and its reports). When the
  /// record ends before `step` and every place of the ended attempt
  /// (`step_reports` by worker index, over its `ended_replicas`) kept its
  /// report of `step` (HeldState.step_report), the step and its validations
  /// are recorded from them, as if they had come in; otherwise nothing is.
  void RecordUnreportedStep(
      int64_t step, const std::vector<std::optional<zbpp::v1::ReportStepRequest>>& step_reports,
      int ended_replicas);

  const JobContext& context_;
  const int64_t seq_;
  zbpp::v1::Job job_;  ///< `schedule` is left empty; views fill it.
  /// spec.schedule.file_text, held once per content; null without a file.
  std::shared_ptr<const std::string> schedule_file_;
  ScheduleVersions versions_;
  JobModel model_;
  JobAttempt attempt_;
  /// Consecutive recoveries after a worker failure with no step completed
  /// in between, and steps_completed at the last of them.
  int failed_recoveries_ = 0;
  int64_t steps_at_failed_recovery_ = -1;
  /// Relayout ended the attempt: RUNNING waits for the next one.
  bool relayout_pending_ = false;
  /// The attempt a fault ended, while the recovery waits to decide.
  std::optional<EndedAttempt> awaited_;
  /// How the last recovery or heal brought the job back ("restarted from
  /// the snapshot of step 41", "healed to 2 replicas at step 30 (...)"):
  /// the message of the RUNNING it leads to (Acknowledge), then cleared.
  std::string recovered_how_;
  /// See spares().
  std::map<std::string, int64_t> spares_;
  /// DecideRecovery's shape for the next attempt (BeginAttempt takes it).
  std::optional<AttemptShape> resume_;
  /// This recovery has counted its restart (Job.restarts_total).
  bool restart_counted_ = false;
  /// BeginHeal stopped the grants at heal_through_; the attempt ends once
  /// every worker reported it.
  bool healing_ = false;
  int64_t heal_through_ = -1;
  /// Ends a healing attempt once every worker reported every step granted
  /// (BeginHeal). Nothing otherwise.
  void MaybeEndForHeal();
  /// The replicas running steps and the spares the metrics were last told
  /// (ObserveReplicas); none before.
  std::pair<int, int> observed_replicas_{0, 0};
  /// Highest step whose validation outcome was recorded (queued for the
  /// store, or restored); -1 before any. Outcomes are gathered in step
  /// order, so one for a step <= it is a replay after a recovery.
  int64_t validated_through_ = -1;
  /// What a step's recorded outcome counts in the job's counters.
  struct ValidationCounts {
    bool rolled_back = false;
    bool skipped = false;
    bool clipped = false;
  };
  /// The steps whose recorded outcome counts in a counter, and what it
  /// counts (CountValidation): only those, so as many entries as the
  /// counters' sum at most.
  std::map<int64_t, ValidationCounts> counted_validations_;
  /// When the current attempt began (its calibration with it).
  absl::Time attempt_began_ = absl::InfinitePast();
  JobWatchers watchers_;
  /// Decided since the last TakeEffects.
  JobEffects effects_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_H_
