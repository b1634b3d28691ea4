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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/core/membership.h"
#include "coordinator/core/outbox.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// Where a worker ASSIGNED to a job stands in it, as the job tells the
/// registry (ListWorkers, WorkerCounts).
struct WorkerPlace {
  bool running = false;  ///< The job is RUNNING.
  int stage = -1;        ///< Pipeline rank.
  int replica = -1;      ///< Data-parallel replica.
};

/// The place of the worker holding rank `rank` of job `job_id`; nullopt
/// when no such job is known.
using PlaceOfWorker =
    std::function<std::optional<WorkerPlace>(const std::string& job_id, int rank)>;

/// Every worker's state at the coordinator, in one place: its membership
/// and lease (Membership, owned), the digest of its credential, its
/// description as registered, its last heartbeat and its open Session
/// outbox. Everything kept by a worker's id is dropped together when the
/// worker is forgotten (ForgetLost).
///
/// Thread-compatible, not thread-safe: the Coordinator calls every method
/// with its mutex held (Membership and the outboxes lock themselves too).
class WorkerRegistry {
 public:
  using Options = Membership::Options;

  /// Most bytes of Heartbeat.error kept, the truncation marker
  /// " [... truncated]" included.
  static constexpr size_t kMaxHeartbeatErrorBytes = 4096;
  /// ListWorkersRequest.page_size when 0, and its largest value.
  static constexpr int kDefaultWorkersPage = 100;
  static constexpr int kMaxWorkersPage = 1000;

  /// Membership::Create's errors.
  static absl::StatusOr<std::unique_ptr<WorkerRegistry>> Create(Options options);

  /// OK when `worker` may register: InvalidArgument naming the field for a
  /// missing address, host or device kind, an unknown device kind, a
  /// negative device_index, memory_bytes == 0, a device_identity on a
  /// worker that is not CUDA, or text longer than worker.proto allows
  /// (address 261 bytes; host, device_name, name 253; device_identity 64).
  /// Pure; thread-safe.
  static absl::Status CheckDescription(const zbpp::v1::WorkerDescription& worker);

  /// Adds a worker described by `worker` (CheckDescription passed) whose
  /// credential hashes to `credential_digest` (CredentialDigest).
  /// Membership::Register's result and errors (ResourceExhausted naming
  /// max_workers when full). A superseded worker's Session is left to the
  /// caller (LoseSession).
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

  /// A new Session of a worker: renews its lease and returns a new, empty
  /// outbox with the worker's record. NotFound for an unknown or lost
  /// worker and for an `address` other than the registered one (checked
  /// first: the caller is another process); AlreadyExists naming the worker
  /// while another Session of it is open.
  struct OpenedSession {
    std::shared_ptr<SessionOutbox> outbox;
    WorkerRecord record;
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

  /// Renews the lease of `worker_id` and keeps `heartbeat`, its error cut
  /// to kMaxHeartbeatErrorBytes (at a UTF-8 character boundary, with a
  /// marker). Returns the error as kept. NotFound for an unknown or lost
  /// worker.
  absl::StatusOr<std::string> RecordHeartbeat(const std::string& worker_id,
                                              const zbpp::v1::Heartbeat& heartbeat);

  /// The description `worker_id` registered with; null for an unknown one.
  const zbpp::v1::WorkerDescription* Description(const std::string& worker_id) const;

  /// Forgets workers past their retention (Membership::ForgetLost) for
  /// which `keep(id)` is false, with everything kept by their id; closes
  /// their Sessions with NotFound.
  void ForgetLost(const std::function<bool(const std::string&)>& keep);

  /// The worker's state as the API shows it: RUNNING when ASSIGNED to a
  /// job that runs (`place`).
  zbpp::v1::WorkerState ApiState(const WorkerRecord& record,
                                 const PlaceOfWorker& place) const;

  /// Coordinator::ListWorkers: one page of the workers held, in
  /// registration order. InvalidArgument naming page_size or page_token.
  absl::StatusOr<zbpp::v1::ListWorkersResponse> List(
      const zbpp::v1::ListWorkersRequest& request, const PlaceOfWorker& place) const;

  /// Workers per API state name ("IDLE", "ASSIGNED", "RUNNING", "LOST").
  /// O(workers held).
  std::map<std::string, int> Counts(const PlaceOfWorker& place) const;

  /// Leases, assignment and release of workers to jobs.
  Membership& membership() { return *membership_; }
  const Membership& membership() const { return *membership_; }

 private:
  explicit WorkerRegistry(std::unique_ptr<Membership> membership)
      : membership_(std::move(membership)) {}

  std::unique_ptr<Membership> membership_;
  /// The open Session of a worker.
  std::map<std::string, std::shared_ptr<SessionOutbox>> sessions_;
  /// Last heartbeat of each worker (its error cut).
  std::map<std::string, zbpp::v1::Heartbeat> last_heartbeat_;
  /// Description as registered, by worker id.
  std::map<std::string, zbpp::v1::WorkerDescription> descriptions_;
  /// SHA-256 of each worker's credential (CredentialDigest), by worker id.
  std::map<std::string, std::string> credential_digests_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_WORKER_REGISTRY_H_
