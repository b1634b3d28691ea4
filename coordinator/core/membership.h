#ifndef ZBPP_COORDINATOR_CORE_MEMBERSHIP_H_
#define ZBPP_COORDINATOR_CORE_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace zbpp::coordinator {

/// What a worker says about itself when it registers.
struct WorkerInfo {
  std::string address;       ///< "host:port" the worker serves on; unique
                             ///< among live workers.
  std::string host;          ///< Node name (pods of one node share NVLink).
  std::string device_kind;   ///< e.g. "cpu", "cuda:NVIDIA H100".
  int64_t memory_bytes = 0;  ///< Device memory available for the job.
};

/// Where a worker is in its life at the coordinator.
enum class WorkerState {
  kRegistered,  ///< Live and free.
  kAssigned,    ///< Live and holding a stage of a job.
  kLost,        ///< Missed its heartbeats (or superseded); never comes back
                ///< under this id. Forgotten (removed) after
                ///< `Options.lost_worker_retention_seconds`.
};

/// One worker as the coordinator sees it. Plain value (a copy).
struct WorkerRecord {
  std::string id;  ///< "worker-<n>", n = registration order from 1.
  WorkerInfo info;
  WorkerState state = WorkerState::kRegistered;
  absl::Time registered_at;
  absl::Time last_heartbeat;
  /// When it became LOST; unset (InfinitePast) while live.
  absl::Time lost_at = absl::InfinitePast();
  /// The job and the worker's index in it while ASSIGNED (`WorkerIndex`,
  /// api/pipeline_shape.h: replica * stages + stage); kept when the worker is LOST
  /// so that the caller knows which job to recover. Empty / -1 otherwise.
  std::string job_id;
  int worker_index = -1;
  /// Released from an attempt (which was aborted, or ended) and not heard
  /// idle since: not assignable yet. A worker whose process died keeps its
  /// lease until it expires; without this a recovery could re-assign the
  /// dead process and wait for it. Cleared by ConfirmIdle.
  bool draining = false;
};

/// Result of `Membership::Register`.
struct Registration {
  std::string worker_id;  ///< The new worker's id.
  /// A live worker that had the same address (a restarted process) and is
  /// now LOST; its job, if any, needs recovery.
  std::optional<WorkerRecord> superseded;
};

/// Workers chosen for one job: `worker_ids[r]` holds rank r.
struct Assignment {
  std::string job_id;
  std::vector<std::string> worker_ids;
};

/// Worker membership with leases: a worker registers,
/// renews its lease by heartbeating, and is LOST when its last heartbeat is
/// older than `heartbeat_timeout_seconds`. Jobs take free workers in
/// registration order, so assignments are deterministic.
///
/// Memory is bounded: at most `max_workers` records are held (live and LOST
/// alike; a registration beyond is refused), and a LOST record is dropped
/// by `ForgetLost` once `lost_worker_retention_seconds` have passed.
///
/// Thread-safe: every method may be called from any gRPC thread.
class Membership {
 public:
  struct Options {
    // --- Time ---
    /// Source of time; not owned, must outlive the Membership. Tests pass a
    /// FakeClock.
    Clock* clock = RealClock();
    // --- Leases ---
    /// A worker whose last heartbeat is more than this many seconds old is
    /// lost at the next `ExpireLeases`. Must be > 0.
    double heartbeat_timeout_seconds = 10.0;
    // --- Bounds ---
    /// Most workers held at once, LOST ones not yet forgotten included;
    /// `Register` refuses more. >= 1.
    int max_workers = 4096;
    /// A LOST worker is forgotten by the first `ForgetLost` more than this
    /// many seconds after it was lost (it stays listed until then). >= 0.
    double lost_worker_retention_seconds = 600.0;
  };

  /// InvalidArgument for a null clock, a timeout that is not > 0,
  /// max_workers < 1 or a retention that is negative or not finite.
  static absl::StatusOr<std::unique_ptr<Membership>> Create(Options options);

  /// Adds a worker (REGISTERED, lease starting now). A live worker with the
  /// same address is taken to be the same process restarted: it becomes
  /// LOST and is returned in `superseded`. InvalidArgument for an empty
  /// address or negative memory; ResourceExhausted naming max_workers when
  /// `max_workers` workers are held (nothing changes then).
  absl::StatusOr<Registration> Register(const WorkerInfo& info)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Renews the lease of `worker_id`. NotFound for an unknown id and for a
  /// LOST worker (it must register again: its job has moved on).
  absl::Status Heartbeat(const std::string& worker_id) ABSL_LOCKS_EXCLUDED(mu_);

  /// Marks LOST every live worker whose last heartbeat is more than
  /// `heartbeat_timeout_seconds` old and returns them (as they are now,
  /// with their job and rank), in registration order. Call periodically.
  std::vector<WorkerRecord> ExpireLeases() ABSL_LOCKS_EXCLUDED(mu_);

  /// The worker `worker_id`; NotFound otherwise.
  absl::StatusOr<WorkerRecord> Get(const std::string& worker_id) const
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Drops every LOST worker lost more than `lost_worker_retention_seconds` ago
  /// for which `keep(id)` is false, and returns their ids in registration
  /// order: they become unknown (NotFound) and free their place under
  /// `max_workers`. `keep` runs under this object's lock and must not call
  /// back into it. Call periodically.
  std::vector<std::string> ForgetLost(
      const std::function<bool(const std::string&)>& keep)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Calls `visit(sequence, record)` on the workers held whose registration
  /// sequence number (the n of "worker-<n>") is > `after`, in registration
  /// order, until it returns false. No copies: O(workers visited). `visit`
  /// runs under this object's lock and must not call back into it.
  void ForEachAfter(
      int64_t after,
      const std::function<bool(int64_t, const WorkerRecord&)>& visit) const
      ABSL_LOCKS_EXCLUDED(mu_);
  /// The workers in `state`, in registration order.
  std::vector<WorkerRecord> List(WorkerState state) const
      ABSL_LOCKS_EXCLUDED(mu_);
  /// Number of workers in `state` (for the workers-by-state gauge).
  int Count(WorkerState state) const ABSL_LOCKS_EXCLUDED(mu_);

  /// Gives `job_id` `workers` REGISTERED, non-draining workers: rank i gets
  /// the first such worker in registration order, not already chosen, whose
  /// memory_bytes is at least `min_memory_bytes[i % size]` (first fit in
  /// rank order; empty: any worker). The chosen become ASSIGNED.
  /// InvalidArgument for workers < 1 or an empty job id; FailedPrecondition
  /// when the job already holds workers; ResourceExhausted saying how many
  /// are needed and free, or which rank finds no free worker with enough
  /// memory and the largest free one (nothing changes then).
  absl::StatusOr<Assignment> Assign(
      const std::string& job_id, int workers,
      const std::vector<double>& min_memory_bytes = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  /// The ids of the workers Assign(job_id, workers, min_memory_bytes)
  /// would choose now, by rank, changing nothing: what a caller checks
  /// before it commits (the job's transport, transport_choice.h). Assign's
  /// errors. Between the two calls only the caller's own lock keeps the
  /// choice the same.
  absl::StatusOr<std::vector<std::string>> Preview(
      const std::string& job_id, int workers,
      const std::vector<double>& min_memory_bytes = {}) const
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Returns the live workers of `job_id` to REGISTERED (job ended, or
  /// recovery re-assigns), draining until ConfirmIdle. Returns how many were
  /// released (0 is fine).
  int Release(const std::string& job_id) ABSL_LOCKS_EXCLUDED(mu_);

  /// The worker said it holds no attempt (a heartbeat without a job): a
  /// draining worker becomes assignable. Returns true when that changed it.
  bool ConfirmIdle(const std::string& worker_id) ABSL_LOCKS_EXCLUDED(mu_);

  /// REGISTERED workers that are not draining: those Assign may choose.
  int CountAssignable() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit Membership(Options options) : options_(options) {}
  bool IsLive(const WorkerRecord& record) const {
    return record.state != WorkerState::kLost;
  }
  /// Assign's choice, by rank, as keys of `workers_`; its errors.
  absl::StatusOr<std::vector<int64_t>> ChooseLocked(
      const std::string& job_id, int workers,
      const std::vector<double>& min_memory_bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  /// Keyed by registration sequence number, so iteration is in
  /// registration order.
  std::map<int64_t, WorkerRecord> workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> seq_of_id_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_MEMBERSHIP_H_
