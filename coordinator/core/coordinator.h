#ifndef ZBPP_COORDINATOR_CORE_COORDINATOR_H_
#define ZBPP_COORDINATOR_CORE_COORDINATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/cost_model.h"
#include "coordinator/core/membership.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/core/resolve_policy.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/validation_policy.h"
#include "coordinator/store/store.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// Hooks through which the core reports what metrics need (the daemon
/// adapts them to CoordinatorMetrics; tests may count them). Called with
/// the coordinator's lock held: implementations must be quick and must not
/// call back into the Coordinator. Default: no-ops.
class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;
  /// A step of `job_id` completed on every stage.
  virtual void OnStep(const std::string& job_id,
                      const zbpp::v1::StepSummary& step) {}
  /// A schedule version was published (the first one included).
  virtual void OnScheduleVersion(const std::string& job_id, int64_t version) {}
  /// A re-solve was decided (published or not).
  virtual void OnResolve(const std::string& job_id, bool published) {}
  /// A step's validation was gathered; `rolled_back` when any stage undid
  /// its optimistic step, `skipped` when the step was skipped (inf/nan).
  virtual void OnValidation(const std::string& job_id, bool rolled_back,
                            bool skipped) {}
  /// `job_id` reached a terminal state (its per-job series may go).
  virtual void OnJobFinished(const std::string& job_id) {}
};

/// A bounded queue of messages handed from the core to one consumer thread
/// (a Session stream's writer, a WatchJob stream). The core pushes; the
/// consumer pops with a deadline. Thread-safe.
template <typename Message>
class Outbox {
 public:
  /// `capacity`: messages held before `droppable` ones are dropped
  /// (0: unbounded).
  explicit Outbox(size_t capacity = 0) : capacity_(capacity) {}

  /// Appends `message` unless the outbox is closed, or full and the message
  /// `droppable`. Returns false when it was not queued.
  bool Push(Message message, bool droppable = false) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!status_.ok() || finished_) return false;
    if (droppable && capacity_ > 0 && queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(message));
    return true;
  }

  /// Ends the stream with `status` (OK: a normal end, after what is
  /// queued; an error: at once). The first call wins.
  void Close(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!status_.ok() || finished_) return;
    if (status.ok()) {
      finished_ = true;
    } else {
      status_ = std::move(status);
    }
  }

  /// Waits until a message is queued, the outbox is closed or `deadline`
  /// (real time) passes; moves every queued message to `out`. Returns OK
  /// (with 0 or more messages), OutOfRange once closed with OK and drained,
  /// or the error it was closed with.
  absl::Status Pop(absl::Time deadline, std::vector<Message>* out)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || finished_ || !status_.ok();
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    if (!status_.ok()) return status_;
    while (!queue_.empty()) {
      out->push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    if (out->empty() && finished_) {
      return absl::OutOfRangeError("stream ended");
    }
    return absl::OkStatus();
  }

  /// Messages queued now.
  size_t Size() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return queue_.size();
  }

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

/// One message of a Session stream. Immutable and shared: a schedule
/// version published to a job's p workers is one message held by p
/// outboxes (publishing copies pointers, not the ~p·m·3-action version).
/// Its `sequence` is left 0: the stream's writer numbers the messages from
/// 1 in the order it pops them, which is the order they were pushed.
using SessionMessage = std::shared_ptr<const zbpp::v1::SessionResponse>;

/// The messages of one worker's Session stream, in the order the
/// coordinator decided them. Closed with Aborted when a newer Session
/// replaces it and with NotFound when the worker is lost.
using SessionOutbox = Outbox<SessionMessage>;

/// The events of one WatchJob stream: a snapshot first, then live events;
/// closed OK after the terminal state change. Step events are dropped when
/// the reader lags by `watch_queue_capacity` events.
using WatchOutbox = Outbox<zbpp::v1::JobEvent>;

/// The coordinator's core (docs/architecture.md): jobs and their state
/// machine, worker membership and Session outboxes, assignment of workers to
/// pipeline ranks and data-parallel replicas (p × d workers per job),
/// versioned schedules with step grants, step reports
/// (cost model, step summaries, validation outcomes), adaptive re-solve,
/// lease expiry and recovery from the Store. No gRPC types: the services in
/// coordinator/service/ translate requests to these calls.
///
/// Versioning protocol (worker.proto StepGrant, schedule.proto
/// ScheduleVersion): a job's attempt is granted steps up to
/// min-over-ranks(last completed step) + `grant_lookahead_steps`; a new
/// version takes effect one step after the highest grant already sent, and
/// is queued on every worker's outbox before any grant that reaches it, so
/// every worker switches at the same step.
///
/// Persistence: a new job is written to the Store before SubmitJob returns
/// (a store error is SubmitJob's error). Everything decided afterwards —
/// job updates, schedule versions, step summaries, validation outcomes,
/// checkpoint records, cost snapshots, re-solve records — is queued under
/// the mutex and written, in that order, by one StoreWriter thread, so no
/// RPC waits on a commit and the store always holds a prefix of the decided
/// history: a version is stored before anything that names it, a crash
/// loses at most the queued suffix, and Recover() resumes from the last
/// checkpoint record as before (replayed step summaries and validation
/// outcomes are ignored).
///
/// A failing store pauses the jobs (one mechanism): while the StoreWriter
/// retries a failed write (store_writer.h), UpdateGrant grants no new step to
/// any job, so each attempt stops within `grant_lookahead_steps` steps instead
/// of running on with a hole in its stored history; the writer's recovery
/// grants again at once. Steps already granted still complete and are queued. A
/// worker failure meanwhile (e.g. one that gave up waiting for a grant)
/// recovers the job without counting towards `max_recoveries_without_progress`.
/// StoreHealth() tells the daemon (gRPC health, metrics); ListSteps and a
/// resuming SubmitJob return Unavailable meanwhile.
///
/// Re-solves run outside the mutex on a copy of the measured costs (on the
/// reporting caller's thread, or on one background thread per coordinator
/// with `Options.resolve_on_background_thread`); the result is published
/// under the mutex only if the job's attempt and latest version are
/// unchanged (else it is logged as not published). Time comes from
/// `Options.clock` (leases, timestamps); only the blocking waits of
/// outboxes and the rendezvous store use real time.
///
/// Thread-safe: one mutex guards the jobs; Membership, CostModel and the
/// outboxes have their own.
class Coordinator {
 public:
  struct Options {
    // --- Dependencies (not owned; must outlive the Coordinator) ---
    /// Source of time. Tests pass a FakeClock.
    Clock* clock = RealClock();
    /// Durable state; required.
    Store* store = nullptr;
    /// Metrics hooks; null for none.
    CoordinatorObserver* observer = nullptr;

    // --- Job specs (coordinator/core/job_spec_check.h in the daemon) ---
    /// Checks a spec at SubmitJob: InvalidArgument naming the field.
    /// Required.
    std::function<absl::Status(const zbpp::v1::JobSpec&)> validate_spec;
    /// The analytic cost model of a spec: the problem version 1 is solved
    /// for, and the base (memory, limits) of the measured cost model.
    /// Required.
    std::function<absl::StatusOr<sched::Problem>(const zbpp::v1::JobSpec&)>
        initial_problem;

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
    /// Steps granted beyond the slowest rank's last completed step; >= 2:
    /// with 1, no rank could start step k+1 before every rank reported step
    /// k — a barrier between steps, the one post-update validation removes.
    int64_t grant_lookahead_steps = 2;
    /// A job whose workers keep failing (a FAILED heartbeat) this many times
    /// in a row without completing a step in between goes FAILED instead of
    /// RECOVERING again: the error is in the job (a corpus, a checkpoint),
    /// not in a worker. >= 1.
    int max_recoveries_without_progress = 3;
    /// When jobs with JobSpec.validation AUTO switch between synchronous
    /// and post-update validation.
    ValidationPolicy::Options validation_policy;

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

  /// InvalidArgument for a missing dependency or a bad option.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(Options options);

  ~Coordinator();

  /// Loads every job and schedule version from the store (call once, before
  /// serving: restore state, then serve). Jobs that were ASSIGNING go back to
  /// PENDING and RUNNING ones to RECOVERING ("coordinator restarted"): the
  /// workers of the old process must register again. Errors from the store.
  absl::Status Recover() ABSL_LOCKS_EXCLUDED(mu_);

  // ------------------------------------------------------------- Jobs

  /// Validates and stores a new job in PENDING, then assigns workers if
  /// enough are free. InvalidArgument naming the field for a bad spec, and
  /// naming pipeline.data_parallel when checkpoint.resume_step names a
  /// checkpoint recorded by a job with another data_parallel (nothing is
  /// stored then); store errors.
  absl::StatusOr<zbpp::v1::Job> SubmitJob(const zbpp::v1::JobSpec& spec)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// One job in `view` (UNSPECIFIED = FULL). While the store is failing,
  /// the state message of a job with workers says it is paused and why.
  /// NotFound for an unknown id.
  absl::StatusOr<zbpp::v1::Job> GetJob(const std::string& job_id,
                                       zbpp::v1::JobView view) const
      ABSL_LOCKS_EXCLUDED(mu_);

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
  /// aborting its workers. NotFound; FailedPrecondition when terminal.
  absl::StatusOr<zbpp::v1::Job> CancelJob(const std::string& job_id,
                                          const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

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
  /// device_index, memory_bytes == 0, or text longer than worker.proto
  /// allows (address 261 bytes; host, device_name, name 253);
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

  /// A heartbeat: renews the lease and records the worker's phase; when
  /// every rank of an assigning (or recovering) job reports its attempt,
  /// the job becomes RUNNING. Its error is kept (and put in the job's
  /// state message) cut to kMaxHeartbeatErrorBytes. NotFound for an unknown
  /// or lost worker.
  absl::Status Heartbeat(const std::string& worker_id,
                         const zbpp::v1::Heartbeat& heartbeat)
      ABSL_LOCKS_EXCLUDED(mu_);
  /// Most bytes of Heartbeat.error kept, the truncation marker
  /// " [... truncated]" included.
  static constexpr size_t kMaxHeartbeatErrorBytes = 4096;

  /// One worker's step report (worker.proto ReportStep); the step is
  /// complete once every (stage, replica) of the attempt reported it.
  /// NotFound for an unknown worker; FailedPrecondition when it does not
  /// hold that job and attempt; InvalidArgument naming the field when the
  /// stage or replica is not the worker's (replica: not in
  /// [0, data_parallel)), or timings and schedule disagree.
  absl::Status ReportStep(const zbpp::v1::ReportStepRequest& report)
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
  static constexpr int kDefaultWorkersPage = 100;
  static constexpr int kMaxWorkersPage = 1000;

  /// Expires leases (a lost worker's job goes RECOVERING, or back to
  /// PENDING while ASSIGNING), forgets workers LOST for more than
  /// `lost_worker_retention_seconds`, then assigns free workers to waiting
  /// jobs; with no store write waiting, queues a Store::Probe. Call
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

  /// Waits until every re-solve queued so far for the background thread
  /// has been published or logged (tests; returns at once without one).
  void WaitForResolves() ABSL_LOCKS_EXCLUDED(resolve_mu_);

  // ------------------------------------------------------ For metrics

  /// Jobs per state name ("PENDING", ...) and workers per state name
  /// ("IDLE", "ASSIGNED", "RUNNING", "LOST"). O(jobs) and O(workers held)
  /// time, copying no job or worker: the daemon calls them every half
  /// heartbeat interval.
  std::map<std::string, int> JobCounts() const ABSL_LOCKS_EXCLUDED(mu_);
  std::map<std::string, int> WorkerCounts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct PendingStep;
  struct JobRuntime;
  struct ResolveTask;

  explicit Coordinator(Options options);

  JobRuntime* FindJob(const std::string& job_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Queues the job's store write (StoreWriter: retried until stored).
  void PersistJob(JobRuntime& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetState(JobRuntime& job, zbpp::v1::JobState state,
                const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(JobRuntime& job, zbpp::v1::JobEvent event, bool droppable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendToWorker(const std::string& worker_id, SessionMessage message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Queues the one `message` on every worker of the job's attempt.
  void SendToJobWorkers(JobRuntime& job, const SessionMessage& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The Assignment of the worker at `index` (JobRuntime::workers).
  zbpp::v1::Assignment BuildAssignment(const JobRuntime& job, int index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AssignWaitingJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Builds the job's problem, cost model and first schedule version when it
  /// has none, then assigns its workers and sends the assignments. OK when
  /// assigned; ResourceExhausted when the free workers are too few or too
  /// small (the job waits, its state message saying why);
  /// FailedPrecondition when the job cannot run (no problem, schedule or
  /// version for its spec): it is then FAILED with the reason (FailJob).
  absl::Status StartAttempt(JobRuntime& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Sets the job FAILED with `why`, persists it, and returns
  /// FailedPrecondition "job <id> failed: <why>".
  absl::Status FailJob(JobRuntime& job, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// OK unless `spec` resumes a checkpoint that a job with another
  /// data_parallel recorded (InvalidArgument); store errors.
  absl::Status CheckResumable(const zbpp::v1::JobSpec& spec)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EndAttempt(JobRuntime& job, const std::string& abort_reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Numbers `version` (built by BuildVersion), sets its effective step and
  /// publish time, queues its store write and sends it to the job's
  /// workers; returns its number.
  int64_t PublishVersion(
      JobRuntime& job, zbpp::v1::ScheduleVersion version,
      const sched::Schedule& schedule) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Grants steps up to the slowest rank + lookahead; none while the store
  /// is failing (the class comment, "Persistence").
  void UpdateGrant(JobRuntime& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The store recovered: grants to every job with workers again (called
  /// on the StoreWriter's thread).
  void ResumeGrants() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ReportStepLocked(const zbpp::v1::ReportStepRequest& report,
                                std::unique_ptr<ResolveTask>* resolve)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Returns the re-solve to run after the mutex is released, or null.
  std::unique_ptr<ResolveTask> CompleteStep(JobRuntime& job,
                                            PendingStep& pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GatherValidation(JobRuntime& job, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Publishes the latest schedule again with validation `mode`
  /// (ValidationPolicy decided a switch after outcome `last`).
  void SwitchValidationMode(JobRuntime& job, zbpp::v1::ValidationMode mode,
                            const zbpp::v1::ValidationOutcome& last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<ResolveTask> MaybeResolve(JobRuntime& job, int64_t step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Solves `task` without the mutex, then publishes or logs it under it.
  void RunResolve(ResolveTask& task) ABSL_LOCKS_EXCLUDED(mu_);
  void FinishResolve(ResolveTask& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The background thread: runs queued re-solves until stopped.
  void ResolveLoop() ABSL_LOCKS_EXCLUDED(resolve_mu_);
  /// Stops the background thread; queued re-solves are dropped.
  void StopResolveThread() ABSL_LOCKS_EXCLUDED(resolve_mu_);
  void LoseWorker(const WorkerRecord& record, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Forgets workers past their retention (Membership::ForgetLost) that no
  /// job's current attempt holds, with everything kept by their id.
  void ForgetLostWorkers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// The worker's state as the API shows it (RUNNING: ASSIGNED to a job
  /// that runs).
  zbpp::v1::WorkerState ApiState(const WorkerRecord& record) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<RendezvousStore> rendezvous_;
  /// Per-step history writes, in decision order (declared before mu_'s
  /// state so it is destroyed after the destructor body, draining them).
  std::unique_ptr<StoreWriter> writer_;

  /// Re-solves waiting for the background thread. Never held together
  /// with mu_.
  absl::Mutex resolve_mu_;
  std::deque<std::unique_ptr<ResolveTask>> resolve_queue_
      ABSL_GUARDED_BY(resolve_mu_);
  bool resolve_busy_ ABSL_GUARDED_BY(resolve_mu_) = false;
  bool resolve_stop_ ABSL_GUARDED_BY(resolve_mu_) = false;
  std::thread resolve_thread_;  ///< Joinable only with the option set.

  mutable absl::Mutex mu_;
  /// By creation order (sequence number from 1).
  std::map<int64_t, std::unique_ptr<JobRuntime>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> seq_of_job_ ABSL_GUARDED_BY(mu_);
  int64_t next_job_seq_ ABSL_GUARDED_BY(mu_) = 1;
  /// The open Session of a worker.
  struct SessionSlot {
    std::shared_ptr<SessionOutbox> outbox;
  };
  std::map<std::string, SessionSlot> sessions_ ABSL_GUARDED_BY(mu_);
  /// Last heartbeat phase of each worker.
  std::map<std::string, zbpp::v1::Heartbeat> last_heartbeat_
      ABSL_GUARDED_BY(mu_);
  /// Description as registered, by worker id.
  std::map<std::string, zbpp::v1::WorkerDescription> descriptions_
      ABSL_GUARDED_BY(mu_);
  /// SHA-256 of each worker's credential (CredentialDigest), by worker id;
  /// dropped when the worker is forgotten.
  std::map<std::string, std::string> credential_digests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_COORDINATOR_H_
