#ifndef ZBPP_COORDINATOR_CORE_WORKER_REGISTRY_H_
#define ZBPP_COORDINATOR_CORE_WORKER_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/outbox.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// Where a worker is in its life at the coordinator, in the API's words
/// (zbpp.v1.WorkerState). The API's RUNNING is not a state of the worker:
/// it is ASSIGNED to a job that runs, derived from the job (PlaceOfWorker).
enum class WorkerState {
  kIdle,      ///< Live and free (assignable unless draining).
  kAssigned,  ///< Live and holding a stage of a job.
  kLost,      ///< Missed its heartbeats (or superseded); never comes back
              ///< under this id. Forgotten (removed) after
              ///< `Options.lost_worker_retention_seconds`.
};

/// Everything the coordinator keeps about one worker, in one record (as
/// Ray's GCS keeps one node-info record per node).
struct WorkerRecord {
  // --- Identity
  /// "worker-<n>", n = registration order from 1.
  std::string id;
  /// The description as registered (valid: WorkerRegistry::Add checked it).
  zbpp::v1::WorkerDescription description;
  /// SHA-256 of the worker's credential (CredentialDigest); the secret
  /// itself is never kept.
  std::string credential_digest;
  // --- Lease
  absl::Time registered_at;
  /// Renewed by a heartbeat or a Session opening.
  absl::Time last_heartbeat;
  /// When it became LOST; InfinitePast while live.
  absl::Time lost_at = absl::InfinitePast();
  // --- Place
  WorkerState state = WorkerState::kIdle;
  /// The job and the worker's index in it while ASSIGNED (`WorkerIndex`,
  /// api/pipeline_shape.h: replica * stages + stage); kept when the worker
  /// is LOST so that the caller knows which job to recover. Empty / -1
  /// otherwise.
  std::string job_id;
  int worker_index = -1;
  /// Released from an attempt (which was aborted, or ended) and not heard
  /// idle since: not assignable yet. A worker whose process died keeps its
  /// lease until it expires; without this a recovery could re-assign the
  /// dead process and wait for it. Cleared by ConfirmIdle.
  bool draining = false;
  // --- Channel
  /// The last heartbeat message, its error cut to
  /// WorkerRegistry::kMaxHeartbeatErrorBytes; empty before the first.
  zbpp::v1::Heartbeat heartbeat;
  /// The open Session's outbox; null while none is open.
  std::shared_ptr<SessionOutbox> session;
};

/// Result of `WorkerRegistry::Add`.
struct Registration {
  std::string worker_id;  ///< The new worker's id.
  /// A live worker that had the same address (a restarted process) and is
  /// now LOST; its job, if any, needs recovery. Null when none. Points into
  /// the registry (see WorkerRegistry, "Pointers").
  const WorkerRecord* superseded = nullptr;
};

/// Where a worker ASSIGNED to a job stands in it, as the job tells the
/// registry (List, Counts).
struct WorkerPlace {
  bool running = false;  ///< The job is RUNNING.
  int stage = -1;        ///< Stage.
  int replica = -1;      ///< Data-parallel replica.
};

/// The place of the worker holding worker index `index` of job `job_id`;
/// nullopt when no such job is known.
using PlaceOfWorker =
    std::function<std::optional<WorkerPlace>(const std::string& job_id, int index)>;

/// Every worker's state at the coordinator: one WorkerRecord per worker in
/// one map, keyed by registration number, so iteration is in registration
/// order and forgetting a worker is one erase.
///
/// Leases: a worker registers, renews its lease by heartbeating (or opening
/// a Session), and is LOST when its last heartbeat is older than
/// `heartbeat_timeout_seconds` (ExpireLeases). Jobs take free workers in
/// registration order, so assignments are deterministic. Memory is bounded:
/// at most `max_workers` records are held (live and LOST alike; a
/// registration beyond is refused), and a LOST record is dropped by
/// ForgetLost once `lost_worker_retention_seconds` have passed.
///
/// Pointers: a `const WorkerRecord*` returned (Get, ExpireLeases,
/// Registration.superseded) stays valid until ForgetLost erases the record
/// or the registry is destroyed; what it shows changes with later calls.
///
/// Thread-compatible, not thread-safe: the registry takes no lock; its one
/// owner, the Coordinator, calls every method with its mutex held
/// (coordinator.h). Only the Session outboxes lock themselves, since a
/// Session's stream thread pops from its outbox outside that mutex.
class WorkerRegistry {
 public:
  struct Options {
    // --- Time ---
    /// Source of time; not owned, must outlive the registry. Tests pass a
    /// FakeClock.
    Clock* clock = RealClock();
    // --- Leases ---
    /// A worker whose last heartbeat is more than this many seconds old is
    /// lost at the next `ExpireLeases`. Must be > 0.
    double heartbeat_timeout_seconds = 10.0;
    // --- Bounds ---
    /// Most workers held at once, LOST ones not yet forgotten included;
    /// `Add` refuses more. >= 1.
    int max_workers = 4096;
    /// A LOST worker is forgotten by the first `ForgetLost` more than this
    /// many seconds after it was lost (it stays listed until then). >= 0.
    double lost_worker_retention_seconds = 600.0;
    // --- Held state ---
    /// Whether the job `held.job_id` keeps the stage state worker
    /// `worker_id` says it holds (Heartbeat.held; docs/elastic.md): such an
    /// idle worker is a spare (WORKER_STATE_SPARE), reserved for that job,
    /// given to no other by Assign. Unset: no job keeps any. Called with
    /// the caller's lock held, like every method.
    std::function<bool(const std::string& worker_id, const zbpp::v1::HeldState& held)>
        keeps_held;
  };

  /// Most bytes of Heartbeat.error kept, the truncation marker
  /// " [... truncated]" included.
  static constexpr size_t kMaxHeartbeatErrorBytes = 4096;
  /// ListWorkersRequest.page_size when 0, and its largest value.
  static constexpr int kDefaultWorkersPage = 100;
  static constexpr int kMaxWorkersPage = 1000;

  /// InvalidArgument naming the option for a null clock, a timeout that is
  /// not > 0, max_workers < 1 or a retention that is negative or not
  /// finite.
  static absl::StatusOr<std::unique_ptr<WorkerRegistry>> Create(Options options);

  // ------------------------------------------------ Registration

  /// Adds a worker described by `worker` (IDLE, lease starting now) whose
  /// credential hashes to `credential_digest` (CredentialDigest). A live
  /// worker with the same address is taken to be the same process
  /// restarted: it becomes LOST and is returned in `superseded`, its
  /// Session left to the caller (LoseSession). InvalidArgument naming the
  /// field for a missing address, host or device kind, an unknown device
  /// kind, a negative device_index, memory_bytes == 0, a device_identity on
  /// a worker that is not CUDA, or text longer than worker.proto allows
  /// (address 261 bytes; host, device_name, name 253; device_identity 64);
  /// ResourceExhausted naming max_workers when `max_workers` workers are
  /// held. Nothing changes on an error.
  absl::StatusOr<Registration> Add(const zbpp::v1::WorkerDescription& worker,
                                   std::string credential_digest);

  /// OK when `credential` (whose CredentialDigest is `digest`, computed by
  /// the caller outside its lock) is the one registered for `worker_id`,
  /// compared in constant time. NotFound for an unknown or forgotten
  /// worker; Unauthenticated naming the worker for an empty or different
  /// credential.
  absl::Status Authenticate(const std::string& worker_id,
                            std::string_view credential,
                            const std::string& digest) const;

  /// The record of `worker_id` (see "Pointers"); NotFound for an unknown or
  /// forgotten worker.
  absl::StatusOr<const WorkerRecord*> Get(const std::string& worker_id) const;

  /// The description `worker_id` registered with; null for an unknown one.
  const zbpp::v1::WorkerDescription* Description(const std::string& worker_id) const;

  // ------------------------------------------------------ Leases

  /// Renews the lease of `worker_id` and keeps `heartbeat`, its error cut
  /// to kMaxHeartbeatErrorBytes (at a UTF-8 character boundary, with a
  /// marker). Returns the error as kept. NotFound for an unknown worker and
  /// for a LOST one (it must register again: its job has moved on).
  absl::StatusOr<std::string> RecordHeartbeat(const std::string& worker_id,
                                              const zbpp::v1::Heartbeat& heartbeat);

  /// Marks LOST every live worker whose last heartbeat is more than
  /// `heartbeat_timeout_seconds` old and returns them (with their job and
  /// worker index), in registration order. Their Sessions are left to the
  /// caller (LoseSession). Call periodically.
  std::vector<const WorkerRecord*> ExpireLeases();

  /// Forgets (erases) every worker LOST more than
  /// `lost_worker_retention_seconds` ago for which `keep(id)` is false,
  /// closing its Session, if any, with NotFound: its id becomes unknown and
  /// its place under `max_workers` free. Call periodically.
  void ForgetLost(const std::function<bool(const std::string&)>& keep);

  // -------------------------------------------------- Assignment

  /// Beside memory, which free worker may take a job's next worker index
  /// (Assign): e.g. one with a GPU of its own for a job over NCCL
  /// (transport_choice.h JoinsNcclWorkers).
  struct WorkerFilter {
    /// Whether `candidate` may join `chosen`, the descriptions of the
    /// workers given the lower indexes; unset: every worker may.
    std::function<bool(const zbpp::v1::WorkerDescription& candidate,
                       const std::vector<const zbpp::v1::WorkerDescription*>& chosen)>
        accepts;
    /// What `accepts` asks for, in ResourceExhausted's message ("a GPU of
    /// its own (transport: nccl)").
    std::string requirement;
  };

  /// Gives `job_id` `workers` IDLE, non-draining workers: worker index i
  /// gets the first such worker in registration order, not already chosen,
  /// whose memory_bytes is at least `min_memory_bytes[i % size]` (empty:
  /// any worker) and that `filter` accepts (first fit in index order). The
  /// chosen become ASSIGNED; returns their ids by worker index.
  /// InvalidArgument for workers < 1 or an empty job id; FailedPrecondition
  /// when the job already holds workers; ResourceExhausted saying how many
  /// are needed and free, or which index finds no free worker with enough
  /// memory (and the largest free one) or none the filter accepts (nothing
  /// changes then: the job waits for workers).
  absl::StatusOr<std::vector<std::string>> Assign(
      const std::string& job_id, int workers,
      const std::vector<double>& min_memory_bytes = {}, const WorkerFilter& filter = {});

  /// The ids of the workers Assign(job_id, workers, min_memory_bytes,
  /// filter) would choose now, by worker index, changing nothing: what a
  /// caller checks before it commits (the job's transport,
  /// transport_choice.h). Assign's errors.
  absl::StatusOr<std::vector<std::string>> Preview(
      const std::string& job_id, int workers,
      const std::vector<double>& min_memory_bytes = {},
      const WorkerFilter& filter = {}) const;

  /// Gives `job_id` the workers `worker_ids` (by worker index), chosen by
  /// the caller: a job resuming from what they hold in memory
  /// (docs/elastic.md) takes its own spares and idle workers, draining or
  /// not (each said, holding the job's state, that it left its last
  /// attempt). They become ASSIGNED. FailedPrecondition naming the first
  /// that is unknown, lost, assigned, or reserved for another job (nothing
  /// changes then).
  absl::Status AssignWorkers(const std::string& job_id,
                             const std::vector<std::string>& worker_ids);

  /// Returns the live workers of `job_id` to IDLE (job ended, or recovery
  /// re-assigns), draining until ConfirmIdle. Returns how many were
  /// released (0 is fine).
  int Release(const std::string& job_id);

  /// The worker said it holds no attempt (a heartbeat without a job): a
  /// draining worker becomes assignable. Returns true when that changed it.
  bool ConfirmIdle(const std::string& worker_id);

  /// IDLE workers that are not draining: those Assign may choose.
  int CountAssignable() const;

  /// The IDLE workers with an open Session whose last heartbeat holds a
  /// stage of `job_id` (Heartbeat.held; docs/elastic.md), draining or not,
  /// in registration order (see "Pointers").
  std::vector<const WorkerRecord*> IdleHolders(const std::string& job_id) const;

  // ---------------------------------------------------- Sessions

  /// A new Session of a worker: renews its lease and returns a new, empty
  /// outbox with the worker's record. NotFound for an unknown or lost
  /// worker and for an `address` other than the registered one (checked
  /// first: the caller is another process); AlreadyExists naming the worker
  /// while another Session of it is open.
  struct OpenedSession {
    std::shared_ptr<SessionOutbox> outbox;
    const WorkerRecord* record = nullptr;  ///< See "Pointers".
  };
  absl::StatusOr<OpenedSession> OpenSession(const std::string& worker_id,
                                            const std::string& address);

  /// The Session of `outbox` ended: closes it (Cancelled) and forgets it
  /// when it is still the worker's open one.
  void CloseSession(const std::string& worker_id,
                    const std::shared_ptr<SessionOutbox>& outbox);

  /// Closes the worker's open Session, if any, with `status`.
  void LoseSession(const std::string& worker_id, absl::Status status);

  /// Closes every open Session with `status` (shutdown).
  void CloseAllSessions(const absl::Status& status);

  /// Queues `message` on the worker's open Session; dropped without one
  /// (the state is replayed when a Session opens).
  void Send(const std::string& worker_id, SessionMessage message);

  // ------------------------------------------------------- Views

  /// Coordinator::ListWorkers: one page of the workers held, in
  /// registration order. InvalidArgument naming page_size or page_token.
  absl::StatusOr<zbpp::v1::ListWorkersResponse> List(
      const zbpp::v1::ListWorkersRequest& request, const PlaceOfWorker& place) const;

  /// Workers per API state name ("IDLE", "ASSIGNED", "RUNNING", "SPARE",
  /// "LOST"). O(workers held).
  std::map<std::string, int> Counts(const PlaceOfWorker& place) const;

 private:
  explicit WorkerRegistry(Options options) : options_(options) {}

  /// The record of `worker_id`; null for an unknown one.
  const WorkerRecord* Find(const std::string& worker_id) const;
  WorkerRecord* Find(const std::string& worker_id);
  /// Renews the lease of a live worker: its record; NotFound for an
  /// unknown or LOST one.
  absl::StatusOr<WorkerRecord*> Renew(const std::string& worker_id);
  /// IDLE, not draining and no job's spare: what Assign may choose.
  bool IsAssignable(const WorkerRecord& record) const;
  /// IDLE and holding state a job keeps (Options.keeps_held).
  bool IsSpare(const WorkerRecord& record) const;
  /// The worker's state as the API shows it: RUNNING when ASSIGNED to a
  /// job that runs (`place`), SPARE (IsSpare).
  zbpp::v1::WorkerState ApiState(const WorkerRecord& record, const PlaceOfWorker& place) const;
  /// Assign's choice, by worker index, as keys of `workers_`; its errors.
  absl::StatusOr<std::vector<int64_t>> Choose(
      const std::string& job_id, int workers,
      const std::vector<double>& min_memory_bytes, const WorkerFilter& filter) const;

  const Options options_;
  /// Every worker held, keyed by registration number (the n of its id
  /// "worker-<n>", from which Find recovers the key).
  std::map<int64_t, WorkerRecord> workers_;
  int64_t next_number_ = 1;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_WORKER_REGISTRY_H_
