#include "coordinator/core/worker_registry.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/time_proto.h"
#include "coordinator/core/worker_credential.h"

namespace zbpp::coordinator {

absl::StatusOr<std::unique_ptr<WorkerRegistry>> WorkerRegistry::Create(
    Options options) {
  absl::StatusOr<std::unique_ptr<Membership>> membership =
      Membership::Create(options);
  if (!membership.ok()) return membership.status();
  return std::unique_ptr<WorkerRegistry>(
      new WorkerRegistry(*std::move(membership)));
}

absl::Status WorkerRegistry::CheckDescription(
    const zbpp::v1::WorkerDescription& worker) {
  // The lengths of worker.proto: DNS names, a port. Descriptions are kept
  // for every worker and listed by zbppctl: unbounded fields made one
  // registration cost megabytes and the list fail.
  for (auto [value, max, field] :
       {std::tuple{&worker.address(), size_t{261}, "worker.address"},
        std::tuple{&worker.host(), size_t{253}, "worker.host"},
        std::tuple{&worker.device_name(), size_t{253}, "worker.device_name"},
        std::tuple{&worker.name(), size_t{253}, "worker.name"},
        std::tuple{&worker.device_identity(), size_t{64}, "worker.device_identity"}}) {
    if (value->size() > max) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be at most ", max,
                                                     " bytes, got ", value->size()));
    }
  }
  if (worker.address().empty()) {
    return absl::InvalidArgumentError("worker.address is required");
  }
  if (worker.host().empty()) {
    return absl::InvalidArgumentError("worker.host is required");
  }
  if (worker.device_kind() == zbpp::v1::DEVICE_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("worker.device_kind is required");
  }
  if (!zbpp::v1::DeviceKind_IsValid(worker.device_kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker.device_kind: unknown kind ", worker.device_kind()));
  }
  if (worker.device_index() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker.device_index: must be >= 0, got ", worker.device_index()));
  }
  if (worker.memory_bytes() == 0) {
    return absl::InvalidArgumentError("worker.memory_bytes must be >= 1");
  }
  // The identity tells GPUs apart (transport_choice.h): a CPU worker
  // claiming one is a mistake worth refusing, not ignoring.
  if (worker.device_kind() != zbpp::v1::DEVICE_KIND_CUDA &&
      !worker.device_identity().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker.device_identity: only a CUDA worker has one, got \"",
        worker.device_identity(), "\" for device kind ",
        zbpp::v1::DeviceKind_Name(worker.device_kind())));
  }
  return absl::OkStatus();
}

absl::StatusOr<Registration> WorkerRegistry::Add(
    const zbpp::v1::WorkerDescription& worker, std::string credential_digest) {
  WorkerInfo info;
  info.address = worker.address();
  info.host = worker.host();
  info.device_kind = worker.device_kind() == zbpp::v1::DEVICE_KIND_CUDA
                         ? absl::StrCat("cuda:", worker.device_name())
                         : "cpu";
  info.memory_bytes = static_cast<int64_t>(std::min<uint64_t>(
      worker.memory_bytes(),
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  absl::StatusOr<Registration> registration = membership_->Register(info);
  if (!registration.ok()) return registration.status();
  descriptions_[registration->worker_id] = worker;
  credential_digests_[registration->worker_id] = std::move(credential_digest);
  return registration;
}

absl::Status WorkerRegistry::Authenticate(const std::string& worker_id,
                                          std::string_view credential,
                                          const std::string& digest) const {
  auto it = credential_digests_.find(worker_id);
  if (it == credential_digests_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  // An empty credential is refused even if one could hash alike: workers
  // always get 32 hex digits.
  if (credential.empty() || !ConstantTimeEquals(digest, it->second)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "missing or wrong credential for worker ", worker_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerRegistry::OpenedSession> WorkerRegistry::OpenSession(
    const std::string& worker_id, const std::string& address) {
  absl::StatusOr<WorkerRecord> record = membership_->Get(worker_id);
  if (record.ok() && record->info.address != address) {
    // Checked before the lease is renewed: the caller is another process.
    return absl::NotFoundError(absl::StrCat(
        "worker ", worker_id, " is registered for ", record->info.address,
        ", not ", address, " (the coordinator restarted?); register again"));
  }
  if (absl::Status renewed = membership_->Heartbeat(worker_id); !renewed.ok()) {
    return renewed;
  }
  record = membership_->Get(worker_id);
  if (!record.ok()) return record.status();
  // Refused, not replaced: handing the stream over would give whoever asks
  // second the worker's assignment, peers and grants. A worker whose stream
  // broke retries until its old one is seen to end (CloseSession) or its
  // lease expires.
  if (sessions_.count(worker_id) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker ", worker_id,
        " already has an open Session; retry once it has ended"));
  }
  auto outbox = std::make_shared<SessionOutbox>();
  sessions_[worker_id] = outbox;
  return OpenedSession{std::move(outbox), *std::move(record)};
}

void WorkerRegistry::CloseSession(const std::string& worker_id,
                                  const std::shared_ptr<SessionOutbox>& outbox) {
  outbox->Close(absl::CancelledError("session closed"));
  auto it = sessions_.find(worker_id);
  if (it != sessions_.end() && it->second == outbox) sessions_.erase(it);
}

void WorkerRegistry::LoseSession(const std::string& worker_id,
                                 absl::Status status) {
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) return;
  it->second->Close(std::move(status));
  sessions_.erase(it);
}

void WorkerRegistry::CloseAllSessions(const absl::Status& status) {
  for (auto& [id, outbox] : sessions_) outbox->Close(status);
}

void WorkerRegistry::Send(const std::string& worker_id, SessionMessage message) {
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) return;  // Replayed when the Session reopens.
  it->second->Push(std::move(message));
}

absl::StatusOr<std::string> WorkerRegistry::RecordHeartbeat(
    const std::string& worker_id, const zbpp::v1::Heartbeat& heartbeat) {
  if (absl::Status renewed = membership_->Heartbeat(worker_id); !renewed.ok()) {
    return renewed;
  }
  // A worker's error is kept and copied into the job's state message (and
  // the store): bounded, so one heartbeat cannot store megabytes.
  zbpp::v1::Heartbeat& kept = last_heartbeat_[worker_id];
  kept = heartbeat;
  if (kept.error().size() > kMaxHeartbeatErrorBytes) {
    constexpr char kMarker[] = " [... truncated]";
    size_t cut = kMaxHeartbeatErrorBytes - (sizeof(kMarker) - 1);
    // Back to the start of a UTF-8 character (continuation bytes 10xxxxxx).
    while (cut > 0 && (static_cast<unsigned char>(kept.error()[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    kept.set_error(absl::StrCat(kept.error().substr(0, cut), kMarker));
  }
  return kept.error();
}

const zbpp::v1::WorkerDescription* WorkerRegistry::Description(
    const std::string& worker_id) const {
  auto it = descriptions_.find(worker_id);
  return it == descriptions_.end() ? nullptr : &it->second;
}

void WorkerRegistry::ForgetLost(
    const std::function<bool(const std::string&)>& keep) {
  for (const std::string& id : membership_->ForgetLost(keep)) {
    LoseSession(id, absl::NotFoundError(absl::StrCat("worker ", id, " forgotten")));
    last_heartbeat_.erase(id);
    descriptions_.erase(id);
    credential_digests_.erase(id);
  }
}

zbpp::v1::WorkerState WorkerRegistry::ApiState(const WorkerRecord& record,
                                               const PlaceOfWorker& place) const {
  switch (record.state) {
    case WorkerState::kLost:
      return zbpp::v1::WORKER_STATE_LOST;
    case WorkerState::kAssigned: {
      const std::optional<WorkerPlace> where = place(record.job_id, record.worker_index);
      return where.has_value() && where->running ? zbpp::v1::WORKER_STATE_RUNNING
                                                 : zbpp::v1::WORKER_STATE_ASSIGNED;
    }
    case WorkerState::kRegistered:
      break;
  }
  return zbpp::v1::WORKER_STATE_IDLE;
}

absl::StatusOr<zbpp::v1::ListWorkersResponse> WorkerRegistry::List(
    const zbpp::v1::ListWorkersRequest& request, const PlaceOfWorker& place) const {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be >= 0, got ", request.page_size()));
  }
  // The token is the registration number of the last worker returned:
  // forgetting that worker meanwhile does not lose the place.
  int64_t after = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &after) || after < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: malformed \"", request.page_token(), "\""));
  }
  const int limit = request.page_size() == 0
                        ? kDefaultWorkersPage
                        : std::min(request.page_size(), kMaxWorkersPage);
  const std::set<int> states(request.states().begin(), request.states().end());
  zbpp::v1::ListWorkersResponse response;
  int64_t last_seq = 0;
  membership_->ForEachAfter(after, [&](int64_t seq, const WorkerRecord& record) {
    const zbpp::v1::WorkerState state = ApiState(record, place);
    if (states.empty() ? state == zbpp::v1::WORKER_STATE_LOST
                       : !states.count(state)) {
      return true;
    }
    if (response.workers_size() == limit) {
      response.set_next_page_token(absl::StrCat(last_seq));
      return false;
    }
    last_seq = seq;
    zbpp::v1::Worker* worker = response.add_workers();
    worker->set_worker_id(record.id);
    if (const zbpp::v1::WorkerDescription* d = Description(record.id)) {
      *worker->mutable_description() = *d;
    }
    const std::optional<WorkerPlace> where =
        record.state == WorkerState::kAssigned ? place(record.job_id, record.worker_index)
                                               : std::nullopt;
    worker->set_state(state);
    worker->set_job_id(where.has_value() ? record.job_id : "");
    worker->set_stage(where.has_value() ? where->stage : -1);
    worker->set_replica(where.has_value() ? where->replica : -1);
    *worker->mutable_register_time() = ToTimestamp(record.registered_at);
    *worker->mutable_last_heartbeat_time() = ToTimestamp(record.last_heartbeat);
    auto hb = last_heartbeat_.find(record.id);
    if (hb != last_heartbeat_.end()) worker->set_phase(hb->second.phase());
    return true;
  });
  return response;
}

std::map<std::string, int> WorkerRegistry::Counts(const PlaceOfWorker& place) const {
  int by_state[zbpp::v1::WorkerState_ARRAYSIZE] = {};
  membership_->ForEachAfter(0, [&](int64_t, const WorkerRecord& record) {
    ++by_state[ApiState(record, place)];
    return true;
  });
  std::map<std::string, int> counts;
  const size_t prefix = std::string("WORKER_STATE_").size();
  for (auto state : {zbpp::v1::WORKER_STATE_IDLE, zbpp::v1::WORKER_STATE_ASSIGNED,
                     zbpp::v1::WORKER_STATE_RUNNING, zbpp::v1::WORKER_STATE_LOST}) {
    counts[zbpp::v1::WorkerState_Name(state).substr(prefix)] = by_state[state];
  }
  return counts;
}

}  // namespace zbpp::coordinator
