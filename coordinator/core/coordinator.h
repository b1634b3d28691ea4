#ifndef ZBPP_COORDINATOR_CORE_COORDINATOR_H_
#define ZBPP_COORDINATOR_CORE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/coordinator_observer.h"
#include "coordinator/core/coordinator_options.h"
#include "coordinator/core/job.h"
#include "coordinator/core/job_effects.h"
#include "coordinator/core/job_table.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/core/resolver.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/submission_rate.h"
#include "coordinator/core/transport_choice.h"
#include "coordinator/core/worker_registry.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// The coordinator's core (docs/architecture.md): jobs and their state
/// machine, worker membership and Session outboxes, assignment of workers to
/// stages and data-parallel replicas (p × d workers per job),
/// versioned schedules with step grants, step reports
/// (cost model, step summaries, validation outcomes), adaptive re-solve,
/// lease expiry and recovery from the Store. No gRPC types: the services in
/// coordinator/service/ translate requests to these calls.
///
/// An orchestrator over two kinds of object: the WorkerRegistry
/// (worker_registry.h: one record per worker: its description, credential,
/// lease, place in a job, last heartbeat and Session outbox) and one Job per job (job.h: its state machine, schedule
/// versions, attempt, grants, step reports and watchers). It routes each
/// call to them and does what spans both: assigning free workers to waiting
/// jobs, ending attempts, losing and forgetting workers, re-solves and
/// recovery.
///
/// Versioning protocol (worker.proto StepGrant, schedule.proto
/// ScheduleVersion): a job's attempt is granted steps up to
/// min-over-workers(last completed step) + `grant_lookahead_steps`; a new
/// version takes effect one step after the highest grant already sent, and
/// is queued on every worker's outbox before any grant that reaches it, so
/// every worker switches at the same step. Once the job's last step is
/// granted no version is published (no step could run it: re-solves and
/// validation-mode switches then are dropped), and every version stays
/// readable by number (GetScheduleVersion), so the one a step ran is
/// always there.
///
/// Persistence: a new job is written to the Store before SubmitJob returns
/// (a store error is SubmitJob's error). Everything decided afterwards —
/// job updates, schedule versions, step summaries, validation outcomes,
/// checkpoint records, cost snapshots, re-solve records — is decided by
/// the job (job_effects.h), queued under the mutex by Apply and written, in
/// that order, by one StoreWriter thread, so no RPC waits on a commit and
/// the store always holds a prefix of the decided history: a version is
/// stored before anything that names it, a crash loses at most the queued
/// suffix, and Recover() resumes from the last checkpoint record as before
/// (a replayed step's summary, validation outcome and cost snapshot
/// replace its first run's: store.h, "Replayed steps"). The
/// Coordinator writes only what no job decides: a new job's record, the
/// deletion of finished jobs past the retention, and the store probe.
///
/// A failing store pauses the jobs (one mechanism): while the StoreWriter
/// retries a failed write (store_writer.h), Job::UpdateGrant grants no new
/// step to any job, so each attempt stops within `grant_lookahead_steps` steps
/// instead of running on with a hole in its stored history; the writer's recovery
/// grants again at once. Steps already granted still complete and are queued. A
/// worker failure meanwhile (e.g. one that gave up waiting for a grant)
/// recovers the job without counting towards `max_recoveries_without_progress`.
/// StoreHealth() tells the daemon (gRPC health, metrics); ListSteps and a
/// resuming SubmitJob return Unavailable meanwhile.
///
/// Recovery from memory (docs/elastic.md): a fault ends an attempt keeping
/// its workers' state; the job (RECOVERING) waits until each of those
/// workers said what it holds (Heartbeat.held) or the heartbeat timeout
/// passed, then resumes at full width, degrades onto its complete replicas
/// (DEGRADED; the broken replicas' survivors are its spares, reserved for
/// it) or restarts (DecideRecoveries). A DEGRADED job heals once its spares
/// and free workers can fill its replicas (HealDegradedJobs). A restarted
/// coordinator waits so for the workers of each RUNNING or DEGRADED job's
/// stored attempt, which register again holding their stages
/// (docs/elastic.md, "Coordinator restart").
///
/// Decide, then act: every call into a Job is followed, under the same
/// lock and before anything else, by Apply, which takes what the job
/// decided (Job::TakeEffects) and applies it (ApplyJobEffects): store
/// writes, Session messages, released workers and deleted rendezvous
/// scopes, the solve request, watch events, metrics, in that order.
///
/// Re-solves run outside the mutex on the task's own copies of the measured
/// costs (docs/architecture.md, Flow 2): Apply queues the task on the
/// Resolver, which solves it on the reporting caller's thread once it let
/// go of the mutex, or on one background thread per coordinator with
/// `Options.resolve_on_background_thread`; the solved task goes back to its
/// job (Job::FinishResolve), which publishes it only if its attempt and
/// latest version are unchanged (else it is recorded as not published). Time comes from
/// `Options.clock` (leases, timestamps); only the blocking waits of
/// outboxes and the rendezvous store use real time.
///
/// Job states change along the diagram of job_state.h only, and only in the
/// Job (job.h, "State machine"): it checks the edge, ends the attempt
/// (workers released, rendezvous scope deleted), stores the record and
/// tells watchers, in that order, each as an effect Apply applies. A change the diagram forbids would be a
/// bug of the core: the call that asked for it returns FailedPrecondition
/// naming both states (CancelJob, Heartbeat, ReportStep, Recover), or logs
/// it where no caller is the job's (assigning waiting jobs, RegisterWorker,
/// Tick), and nothing changes.
///
/// Thread-safe: one mutex guards the jobs and the worker registry (which
/// takes no lock of its own); CostModel and the outboxes have their own.
class Coordinator {
 public:
  /// Dependencies and limits (coordinator_options.h).
  using Options = CoordinatorOptions;

  /// InvalidArgument for a missing dependency or a bad option.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(Options options);

  ~Coordinator();

  /// Loads every job and schedule version from the store (call once, before
  /// serving: restore state, then serve), then applies the retention of
  /// finished jobs (Options.retained_finished_jobs). Jobs that were ASSIGNING go back to
  /// PENDING and RUNNING or DEGRADED ones to RECOVERING ("coordinator
  /// restarted"): the workers of the old process must register again, and
  /// the recovery waits for what they hold (Job::Restore, DecideRecoveries).
  /// Errors from the store.
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mu_);

  // ------------------------------------------------------------- Jobs

  /// Checks and plans a new job (PlanJob, planning.h: the plan's schedule
  /// becomes its version 1, solved once), stores it in PENDING, then
  /// assigns workers if enough are free (and first deletes the finished jobs past the
  /// retention: Options.retained_finished_jobs). "{job_id}" in
  /// checkpoint.directory becomes the job's id. ResourceExhausted naming
  /// max_submissions_per_second past the submission rate, or
  /// max_active_jobs when that many jobs are not finished;
  /// InvalidArgument naming the field for a bad spec (PlanJob's refusal,
  /// its SpecRefusal payload included), naming checkpoint.directory and
  /// the other job when an unfinished job uses the same directory and one
  /// of the two writes checkpoints there (JobTable::CheckCheckpointDirectoryFree),
  /// naming pipeline.data_parallel when checkpoint.resume_step names a
  /// checkpoint recorded by a job with another data_parallel, and naming
  /// transport (and the workers) for transport NCCL when the workers that
  /// would run the job at once cannot carry it (ChooseTransport; nothing
  /// is stored then); store errors.
  absl::StatusOr<zbpp::v1::Job> SubmitJob(const zbpp::v1::JobSpec& spec)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// One job in `view` (UNSPECIFIED = FULL). While the store is failing,
  /// the state message of a job with workers says it is paused and why.
  /// NotFound for an unknown id.
  absl::StatusOr<zbpp::v1::Job> GetJob(const std::string& job_id,
                                       zbpp::v1::JobView view) const
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Schedule version `version` of `job_id` (job.proto GetScheduleVersion):
  /// every published version, from memory (Recover loads them all), so the
  /// one a step ran stays readable whatever was published after it.
  /// InvalidArgument "version: ..." below 1; NotFound for an unknown id or
  /// a version the job does not have.
  absl::StatusOr<zbpp::v1::ScheduleVersion> GetScheduleVersion(
      const std::string& job_id, int64_t version) const ABSL_LOCKS_EXCLUDED(mu_);

  /// Jobs newest first, paged (job.proto ListJobsRequest). InvalidArgument
  /// for a malformed page token.
  absl::StatusOr<zbpp::v1::ListJobsResponse> ListJobs(
      const zbpp::v1::ListJobsRequest& request) const ABSL_LOCKS_EXCLUDED(mu_);

  /// A page of the job's step summaries from the store, oldest first
  /// (job.proto ListStepsRequest); waits for queued store writes first so
  /// that every completed step is there. NotFound for an unknown id;
  /// InvalidArgument for a negative from_step or page_size.
  absl::StatusOr<zbpp::v1::ListStepsResponse> ListSteps(
      const zbpp::v1::ListStepsRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  /// Moves a non-terminal job to CANCELLED (state_message = `reason`),
  /// aborting its workers. InvalidArgument naming `reason` when it is
  /// longer than kMaxCancelReasonBytes; NotFound; FailedPrecondition when
  /// terminal.
  absl::StatusOr<zbpp::v1::Job> CancelJob(const std::string& job_id,
                                          const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  /// Longest CancelJobRequest.reason, bytes.
  static constexpr size_t kMaxCancelReasonBytes = 1024;

  /// Opens a watch on `job_id`: the outbox holds a snapshot (BASIC view)
  /// first, then live events; it is closed OK after the terminal state
  /// change (at once for a job already terminal). NotFound.
  absl::StatusOr<std::shared_ptr<WatchOutbox>> WatchJob(
      const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);

  /// Ends a watch early (the client went away).
  void Unwatch(const std::string& job_id,
               const std::shared_ptr<WatchOutbox>& outbox)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---------------------------------------------------------- Workers

  /// Adds a worker and returns its id and a new credential
  /// (NewWorkerCredential), of which only the SHA-256 digest is kept, until
  /// the worker is forgotten. InvalidArgument naming the field for a missing
  /// address, host or device kind, an unknown device kind, a negative
  /// device_index, memory_bytes == 0, a device_identity on a worker that is
  /// not CUDA, or text longer than worker.proto allows (address 261 bytes;
  /// host, device_name, name 253; device_identity 64);
  /// ResourceExhausted naming max_workers when `max_workers` workers are
  /// held; Internal when no credential could be drawn. May assign it to a
  /// waiting job at once.
  absl::StatusOr<zbpp::v1::RegisterWorkerResponse> RegisterWorker(
      const zbpp::v1::WorkerDescription& worker) ABSL_LOCKS_EXCLUDED(mu_);

  /// OK when `credential` is the one RegisterWorker returned for
  /// `worker_id` (digests compared in constant time). NotFound for an
  /// unknown or forgotten worker; Unauthenticated naming the worker for an
  /// empty or different credential. The services call it before any call
  /// that names a worker_id.
  absl::Status AuthenticateWorker(const std::string& worker_id,
                                  std::string_view credential) const
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Opens the worker's Session: renews its lease and returns its outbox,
  /// already holding the worker's current state (Assignment, later
  /// schedule versions, latest grant). AlreadyExists naming the worker
  /// while a previous Session of it is open (until CloseSession or its
  /// loss): a second caller is refused, never handed the first one's
  /// state. NotFound for an unknown or lost worker, and for an `address`
  /// other than the one `worker_id` registered with (SessionOpen.address: a
  /// worker holding an id from before a restart).
  absl::StatusOr<std::shared_ptr<SessionOutbox>> OpenSession(
      const std::string& worker_id, const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// The Session stream of `outbox` ended (the worker stays registered
  /// until its lease expires).
  void CloseSession(const std::string& worker_id,
                    const std::shared_ptr<SessionOutbox>& outbox)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// A heartbeat: renews the lease and records the worker's phase and held
  /// state (Heartbeat.held); when every worker of an assigning (or
  /// recovering) job reports its attempt, the job becomes RUNNING (or
  /// DEGRADED). An idle heartbeat may complete what a recovering job
  /// waits for (DecideRecoveries); a worker holding the state of a job
  /// that ended, is unknown, or keeps it neither in its attempt nor as a
  /// spare (it answered too late) is told to drop it (AbortCommand
  /// keep_state false). Its error is kept (and put in the job's
  /// state message) cut to kMaxHeartbeatErrorBytes. NotFound for an unknown
  /// or lost worker.
  absl::Status Heartbeat(const std::string& worker_id,
                         const zbpp::v1::Heartbeat& heartbeat)
      ABSL_LOCKS_EXCLUDED(mu_);
  /// Most bytes of Heartbeat.error kept, the truncation marker
  /// " [... truncated]" included.
  static constexpr size_t kMaxHeartbeatErrorBytes =
      WorkerRegistry::kMaxHeartbeatErrorBytes;

  /// One worker's step report (worker.proto ReportStep); the step is
  /// complete once every (stage, replica) of the attempt reported it.
  /// NotFound for an unknown worker; FailedPrecondition when it does not
  /// hold that job and attempt; InvalidArgument naming the field when the
  /// stage or replica is not the worker's (replica: not in
  /// [0, data_parallel)), or timings and schedule disagree.
  absl::Status ReportStep(const zbpp::v1::ReportStepRequest& report)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// One worker's calibration profile (worker.proto ReportProfile,
  /// Job::ReportProfile). Once every (stage, replica) of the attempt sent
  /// one, the calibrated version is planned outside the mutex (on the
  /// re-solve path, resolver.h) and published, and the first step granted;
  /// a job whose memory limit in bytes nothing fits under the measured
  /// memory FAILs. NotFound for an unknown worker; FailedPrecondition when
  /// it does not hold that job and attempt (an attempt that ended) or the
  /// attempt has no calibration pending; InvalidArgument naming the field
  /// (MeasureProfile, profile_check.h).
  absl::Status ReportProfile(const zbpp::v1::ReportProfileRequest& profile)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// One page of the workers held, in registration order (the numeric
  /// order of "worker-<n>"); `states` empty means all but LOST. page_size
  /// 0 means kDefaultWorkersPage, larger than kMaxWorkersPage means
  /// kMaxWorkersPage. next_page_token is set when more workers match; a
  /// worker forgotten or registered between pages does not shift the
  /// others. InvalidArgument naming page_size when it is negative and
  /// naming page_token when it is not a number > 0. O(workers
  /// after the token) time; copies only the page's descriptions.
  absl::StatusOr<zbpp::v1::ListWorkersResponse> ListWorkers(
      const zbpp::v1::ListWorkersRequest& request) const
      ABSL_LOCKS_EXCLUDED(mu_);
  /// ListWorkersRequest.page_size when 0, and its largest value.
  static constexpr int kDefaultWorkersPage = WorkerRegistry::kDefaultWorkersPage;
  static constexpr int kMaxWorkersPage = WorkerRegistry::kMaxWorkersPage;

  /// Expires leases (a lost worker's job goes RECOVERING, or back to
  /// PENDING while ASSIGNING), decides the recoveries whose wait for held
  /// state is over (DecideRecoveries), forgets workers LOST for more than
  /// `lost_worker_retention_seconds`, then assigns free workers to waiting
  /// jobs and deletes the finished jobs past the retention; with no store write waiting, queues a Store::Probe. Call
  /// periodically (the daemon: every half heartbeat interval).
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);

  // ------------------------------------------------------- Rendezvous

  /// OK when `worker_id` holds the attempt whose scope is `scope`;
  /// PermissionDenied otherwise (NotFound for an unknown worker).
  absl::Status CheckRendezvousAccess(const std::string& worker_id,
                                     const std::string& scope) const
      ABSL_LOCKS_EXCLUDED(mu_);

  /// The rendezvous key-value store (scopes are deleted when attempts end).
  RendezvousStore& rendezvous() { return *rendezvous_; }

  /// Waits until every store write decided so far has been applied: OK.
  /// Unavailable naming the failing write and its error when the store is
  /// failing (StoreWriter::Flush): it does not wait for the store to
  /// recover. The destructor drains the writes itself.
  absl::Status FlushStore();

  /// The store writer's state (healthy, pending, failed attempts, refused
  /// writes, the error being retried): what the daemon exports as gRPC
  /// health and `zbpp_store_*` metrics. Thread-safe; takes no core lock.
  StoreWriter::Health StoreHealth() const;

  /// Waits until every re-solve queued so far has been published or
  /// recorded as not published (tests; without the background thread, solves
  /// what is queued on the calling thread: Resolver::Wait).
  void WaitForResolves();

  // ------------------------------------------------------ For metrics

  /// Jobs per state name ("PENDING", ...) and workers per state name
  /// ("IDLE", "ASSIGNED", "RUNNING", "SPARE", "LOST"). O(jobs) and O(workers held)
  /// time, copying no job or worker: the daemon calls them every half
  /// heartbeat interval.
  std::map<std::string, int> JobCounts() const ABSL_LOCKS_EXCLUDED(mu_);
  std::map<std::string, int> WorkerCounts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit Coordinator(Options options);

  /// Where a worker stands in its job, for the registry's views.
  PlaceOfWorker Places() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Gives free workers to waiting jobs, oldest first (a later, smaller
  /// job does not overtake one that waits), then heals degraded jobs with
  /// what is left (HealDegradedJobs).
  void AssignWaitingJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Prepares the job (Job::Prepare), takes its p × d workers (those that
  /// can carry its transport: WorkerFilterFor), resolves its transport for
  /// them (ChooseTransport) and begins its attempt. OK when assigned;
  /// ResourceExhausted when the free workers are too few, too small or
  /// cannot carry the transport (the job waits, its state message saying
  /// why: suitable workers may come); FailedPrecondition when the job
  /// cannot run (it is then FAILED, nothing taken).
  absl::Status StartAttempt(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Which workers may run a job over `transport` (JoinsNcclWorkers for
  /// NCCL; every worker otherwise). Pure.
  static WorkerRegistry::WorkerFilter WorkerFilterFor(zbpp::v1::Transport transport);
  /// The workers `worker_ids` (by worker index) of a job of `stages`
  /// stages, with their descriptions, for ChooseTransport.
  std::vector<PlacedWorker> PlacedWorkers(const std::vector<std::string>& worker_ids,
                                      int stages) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// SubmitJob's check of `spec.transport` when the workers that would run
  /// it are known (no job waits before it, enough are free; `needs` is each
  /// stage's memory): OK when free workers can carry it; else
  /// ChooseTransport's InvalidArgument for the free workers it would take
  /// regardless of transport, else OK.
  absl::Status CheckTransportAtSubmission(const zbpp::v1::JobSpec& spec,
                                          const std::vector<double>& needs) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The store recovered: grants to every job with workers again (called
  /// on the StoreWriter's thread).
  void ResumeGrants() ABSL_LOCKS_EXCLUDED(mu_);
  /// A FAILED heartbeat of the worker at worker index `index` of the job's attempt
  /// (Job::AfterWorkerFailed: FAILED for a job error or while ASSIGNING,
  /// else RECOVERING), then gives the freed workers to waiting jobs. An
  /// illegal transition's error.
  absl::Status WorkerFailed(Job& job, const std::string& worker_id, int index,
                            const std::string& error, bool job_error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The job whose attempt `attempt` worker `worker_id` holds, with the
  /// worker's index in it (`index`): NotFound for an unknown worker,
  /// FailedPrecondition "worker <id> does not hold job <job> attempt <n>"
  /// otherwise.
  absl::StatusOr<Job*> HeldJob(const std::string& worker_id, const std::string& job_id,
                               int64_t attempt, int* index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The memory `worker_id` registered (WorkerDescription.memory_bytes,
  /// >= 1), which bounds what its profiles and reports may claim to hold;
  /// 0 for an unknown worker.
  uint64_t DeviceMemoryBytes(const std::string& worker_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReportStepLocked(const zbpp::v1::ReportStepRequest& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The Resolver's `publish`: hands a solved task back to its job
  /// (Job::FinishResolve: the version when it still applies, the cost
  /// snapshot, the record) and applies what it decided; a calibration that
  /// failed its job gives the freed workers to waiting jobs. Nothing when
  /// the job was erased meanwhile (retention).
  void FinishResolve(ResolveTask& task) ABSL_LOCKS_EXCLUDED(mu_);
  /// Takes what `job` decided since the last call and applies it
  /// (job_effects.h ApplyJobEffects): after every call into a Job, before
  /// anything else.
  void Apply(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// A worker lost (lease expired, or superseded): its Session closes and
  /// the attempt holding it ends (Job::AfterWorkerLost: ASSIGNING goes
  /// PENDING, RUNNING goes RECOVERING). An illegal transition's error.
  absl::Status LoseWorker(const WorkerRecord& record, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Deletes the finished jobs beyond Options.retained_finished_jobs, in
  /// memory now and in the store through the writer.
  void ApplyRetention() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Decides the recovery of every RECOVERING job awaiting what its ended
  /// attempt's workers hold (Job::AwaitingHeld; docs/elastic.md) once each
  /// of them said (HeldStep), every replica has a worker that holds
  /// nothing (none can resume), or the heartbeat timeout has passed since
  /// the attempt ended; for an attempt restored after a restart, once the
  /// idle holders of the job's state fill its every place
  /// (PlaceRestoredHolders, placed by Job::PlaceRestoredAttempt) or the
  /// timeout has passed since the restart. A resume takes its workers
  /// (WorkerRegistry::AssignWorkers) and begins its attempt over the job's
  /// transport. True when some job now waits for workers (it restarts).
  bool DecideRecoveries() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Heals every DEGRADED job whose missing replicas its spares and the
  /// free workers can fill, stage by stage (Job::BeginHeal; a spare fills
  /// its own stage, a free worker any), unless a job waits for workers.
  void HealDegradedJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The spares of `job` that are idle and say they hold its stage, each
  /// with that stage.
  std::vector<std::pair<std::string, int>> IdleSpares(const Job& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// What worker `worker_id` of attempt `attempt` of `job_id` holds: the
  /// step of its Heartbeat.held for that job and attempt, or nullopt.
  /// `*said` is false while its last heartbeat still names that attempt
  /// (it has not heard of the end yet); true once it names none or
  /// another, and for a worker unknown, lost, assigned elsewhere or without
  /// a Session (it holds nothing for the job).
  std::optional<int64_t> HeldStep(const std::string& worker_id, const std::string& job_id,
                                  int64_t attempt, bool* said) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Forgets workers past their retention that no job's current attempt
  /// holds (WorkerRegistry::ForgetLost).
  void ForgetLostWorkers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::unique_ptr<RendezvousStore> rendezvous_;
  /// Per-step history writes, in decision order (declared before mu_'s
  /// state so it is destroyed after the destructor body, draining them).
  std::unique_ptr<StoreWriter> writer_;
  /// Re-solves outside mu_ (reset first by the destructor).
  std::unique_ptr<Resolver> resolver_;

  mutable absl::Mutex mu_;
  /// Every worker's state.
  std::unique_ptr<WorkerRegistry> registry_ ABSL_PT_GUARDED_BY(mu_);
  /// What the jobs read (clock, store health, registry, options).
  JobContext job_context_;
  /// Where the jobs' effects land (Apply).
  EffectSinks sinks_;
  std::unique_ptr<JobTable> jobs_ ABSL_PT_GUARDED_BY(mu_);
  /// SubmitJob's rate (options_.max_submissions_per_second).
  SubmissionRate submission_rate_ ABSL_GUARDED_BY(mu_){options_.max_submissions_per_second,
                                                       options_.submission_burst};
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_COORDINATOR_H_
