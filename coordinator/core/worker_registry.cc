#include "coordinator/core/worker_registry.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "api/time_proto.h"
#include "coordinator/core/worker_credential.h"

namespace zbpp::coordinator {
namespace {

constexpr absl::string_view kIdPrefix = "worker-";

absl::Status CheckDescription(const zbpp::v1::WorkerDescription& worker) {
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

bool IsLive(const WorkerRecord& record) { return record.state != WorkerState::kLost; }

}  // namespace

bool WorkerRegistry::IsSpare(const WorkerRecord& record) const {
  return record.state == WorkerState::kIdle && !record.heartbeat.held().job_id().empty() &&
         options_.keeps_held && options_.keeps_held(record.id, record.heartbeat.held());
}

bool WorkerRegistry::IsAssignable(const WorkerRecord& record) const {
  return record.state == WorkerState::kIdle && !record.draining && !IsSpare(record);
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
    case WorkerState::kIdle:
      break;
  }
  return IsSpare(record) ? zbpp::v1::WORKER_STATE_SPARE : zbpp::v1::WORKER_STATE_IDLE;
}

absl::StatusOr<std::unique_ptr<WorkerRegistry>> WorkerRegistry::Create(Options options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("WorkerRegistry::Options.clock is null");
  }
  if (!std::isfinite(options.heartbeat_timeout_seconds) ||
      options.heartbeat_timeout_seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "heartbeat_timeout_seconds must be > 0, got ", options.heartbeat_timeout_seconds));
  }
  if (options.max_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_workers must be >= 1, got ", options.max_workers));
  }
  if (!std::isfinite(options.lost_worker_retention_seconds) ||
      options.lost_worker_retention_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lost_worker_retention_seconds must be >= 0, got ",
                     options.lost_worker_retention_seconds));
  }
  return std::unique_ptr<WorkerRegistry>(new WorkerRegistry(options));
}

// ------------------------------------------------------------ records

const WorkerRecord* WorkerRegistry::Find(const std::string& worker_id) const {
  // The id carries the map's key; comparing the whole id refuses other
  // spellings of the number ("worker-+1", "worker-01").
  int64_t number = 0;
  if (!absl::StartsWith(worker_id, kIdPrefix) ||
      !absl::SimpleAtoi(absl::string_view(worker_id).substr(kIdPrefix.size()), &number)) {
    return nullptr;
  }
  auto it = workers_.find(number);
  return it != workers_.end() && it->second.id == worker_id ? &it->second : nullptr;
}

WorkerRecord* WorkerRegistry::Find(const std::string& worker_id) {
  return const_cast<WorkerRecord*>(std::as_const(*this).Find(worker_id));
}

absl::StatusOr<const WorkerRecord*> WorkerRegistry::Get(const std::string& worker_id) const {
  const WorkerRecord* record = Find(worker_id);
  if (record == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  return record;
}

const zbpp::v1::WorkerDescription* WorkerRegistry::Description(
    const std::string& worker_id) const {
  const WorkerRecord* record = Find(worker_id);
  return record == nullptr ? nullptr : &record->description;
}

// ------------------------------------------------------- registration

absl::StatusOr<Registration> WorkerRegistry::Add(const zbpp::v1::WorkerDescription& worker,
                                                 std::string credential_digest) {
  if (absl::Status valid = CheckDescription(worker); !valid.ok()) return valid;
  if (workers_.size() >= static_cast<size_t>(options_.max_workers)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "max_workers: the coordinator holds ", workers_.size(), " workers, its cap of ",
        options_.max_workers, " (lost workers count until forgotten ",
        options_.lost_worker_retention_seconds, "s after they were lost)"));
  }
  const absl::Time now = options_.clock->Now();
  Registration registration;
  // One live worker per address: a process that restarts faster than its
  // lease expires must not leave a ghost holding a stage.
  for (auto& [number, record] : workers_) {
    if (IsLive(record) && record.description.address() == worker.address()) {
      record.state = WorkerState::kLost;
      record.lost_at = now;
      registration.superseded = &record;
    }
  }
  const int64_t number = next_number_++;
  WorkerRecord& record = workers_[number];
  record.id = absl::StrCat(kIdPrefix, number);
  record.description = worker;
  record.credential_digest = std::move(credential_digest);
  record.registered_at = now;
  record.last_heartbeat = now;
  registration.worker_id = record.id;
  return registration;
}

absl::Status WorkerRegistry::Authenticate(const std::string& worker_id,
                                          std::string_view credential,
                                          const std::string& digest) const {
  const WorkerRecord* record = Find(worker_id);
  if (record == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  // An empty credential is refused even if one could hash alike: workers
  // always get 32 hex digits.
  if (credential.empty() || !ConstantTimeEquals(digest, record->credential_digest)) {
    return absl::UnauthenticatedError(
        absl::StrCat("missing or wrong credential for worker ", worker_id));
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- leases

absl::StatusOr<WorkerRecord*> WorkerRegistry::Renew(const std::string& worker_id) {
  WorkerRecord* record = Find(worker_id);
  if (record == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  if (!IsLive(*record)) {
    return absl::NotFoundError(absl::StrCat(
        "worker ", worker_id, " is lost (lease expired or superseded); register again"));
  }
  record->last_heartbeat = options_.clock->Now();
  return record;
}

absl::StatusOr<std::string> WorkerRegistry::RecordHeartbeat(
    const std::string& worker_id, const zbpp::v1::Heartbeat& heartbeat) {
  absl::StatusOr<WorkerRecord*> record = Renew(worker_id);
  if (!record.ok()) return record.status();
  // A worker's error is kept and copied into the job's state message (and
  // the store): bounded, so one heartbeat cannot store megabytes.
  zbpp::v1::Heartbeat& kept = (*record)->heartbeat;
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

std::vector<const WorkerRecord*> WorkerRegistry::ExpireLeases() {
  const absl::Time now = options_.clock->Now();
  const absl::Time deadline = now - absl::Seconds(options_.heartbeat_timeout_seconds);
  std::vector<const WorkerRecord*> lost;
  for (auto& [number, record] : workers_) {
    if (IsLive(record) && record.last_heartbeat < deadline) {
      record.state = WorkerState::kLost;
      record.lost_at = now;
      lost.push_back(&record);
    }
  }
  return lost;
}

void WorkerRegistry::ForgetLost(const std::function<bool(const std::string&)>& keep) {
  const absl::Time deadline =
      options_.clock->Now() - absl::Seconds(options_.lost_worker_retention_seconds);
  for (auto it = workers_.begin(); it != workers_.end();) {
    WorkerRecord& record = it->second;
    if (IsLive(record) || record.lost_at >= deadline || keep(record.id)) {
      ++it;
      continue;
    }
    if (record.session != nullptr) {
      record.session->Close(absl::NotFoundError(absl::StrCat("worker ", record.id, " forgotten")));
    }
    it = workers_.erase(it);
  }
}

// --------------------------------------------------------- assignment

absl::StatusOr<std::vector<int64_t>> WorkerRegistry::Choose(
    const std::string& job_id, int workers, const std::vector<double>& min_memory_bytes,
    const WorkerFilter& filter) const {
  if (job_id.empty()) {
    return absl::InvalidArgumentError("job id must not be empty");
  }
  if (workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": workers must be >= 1, got ", workers));
  }
  std::vector<const WorkerRecord*> free;
  std::vector<int64_t> free_numbers;
  for (const auto& [number, record] : workers_) {
    if (record.state == WorkerState::kAssigned && record.job_id == job_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " already holds workers (", record.id,
                       " has worker index ", record.worker_index, "); release them first"));
    }
    if (IsAssignable(record)) {
      free.push_back(&record);
      free_numbers.push_back(number);
    }
  }
  if (static_cast<int>(free.size()) < workers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job ", job_id, " needs ", workers, " workers; ", free.size(), " registered and free"));
  }
  std::vector<int64_t> chosen;
  std::vector<const zbpp::v1::WorkerDescription*> chosen_descriptions;
  for (int index = 0; index < workers; ++index) {
    const double need =
        min_memory_bytes.empty() ? 0 : min_memory_bytes[index % min_memory_bytes.size()];
    auto enough_memory = [need](const WorkerRecord* w) {
      return w != nullptr && static_cast<double>(w->description.memory_bytes()) >= need;
    };
    auto accepted = [&](const WorkerRecord* w) {
      return !filter.accepts || filter.accepts(w->description, chosen_descriptions);
    };
    auto fits = std::find_if(free.begin(), free.end(), [&](const WorkerRecord* w) {
      return enough_memory(w) && accepted(w);
    });
    if (fits == free.end()) {
      uint64_t largest = 0;
      bool any_with_memory = false;
      for (const WorkerRecord* w : free) {
        if (w != nullptr) largest = std::max(largest, w->description.memory_bytes());
        any_with_memory |= enough_memory(w);
      }
      if (any_with_memory) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "job ", job_id, ": no free worker with ", filter.requirement,
            " for worker index ", index));
      }
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job_id, ": no free worker has the ", static_cast<int64_t>(need),
          " bytes that worker index ", index, " needs (largest free: ", largest, " bytes)"));
    }
    chosen.push_back(free_numbers[fits - free.begin()]);
    chosen_descriptions.push_back(&(*fits)->description);
    *fits = nullptr;
  }
  return chosen;
}

absl::StatusOr<std::vector<std::string>> WorkerRegistry::Preview(
    const std::string& job_id, int workers, const std::vector<double>& min_memory_bytes,
    const WorkerFilter& filter) const {
  absl::StatusOr<std::vector<int64_t>> chosen = Choose(job_id, workers, min_memory_bytes, filter);
  if (!chosen.ok()) return chosen.status();
  std::vector<std::string> ids;
  for (int64_t number : *chosen) ids.push_back(workers_.at(number).id);
  return ids;
}

absl::StatusOr<std::vector<std::string>> WorkerRegistry::Assign(
    const std::string& job_id, int workers, const std::vector<double>& min_memory_bytes,
    const WorkerFilter& filter) {
  absl::StatusOr<std::vector<int64_t>> chosen = Choose(job_id, workers, min_memory_bytes, filter);
  if (!chosen.ok()) return chosen.status();
  std::vector<std::string> ids;
  for (int index = 0; index < workers; ++index) {
    WorkerRecord& record = workers_.at((*chosen)[index]);
    record.state = WorkerState::kAssigned;
    record.job_id = job_id;
    record.worker_index = index;
    ids.push_back(record.id);
  }
  return ids;
}

absl::Status WorkerRegistry::AssignWorkers(const std::string& job_id,
                                           const std::vector<std::string>& worker_ids) {
  std::vector<WorkerRecord*> records;
  for (const std::string& worker_id : worker_ids) {
    WorkerRecord* record = Find(worker_id);
    const bool spare_of_another = record != nullptr && IsSpare(*record) &&
                                  record->heartbeat.held().job_id() != job_id;
    if (record == nullptr || record->state != WorkerState::kIdle || spare_of_another) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, ": worker ", worker_id, " is not free for it (",
          record == nullptr                         ? "unknown"
          : record->state == WorkerState::kLost     ? "lost"
          : record->state == WorkerState::kAssigned ? "assigned"
                                                    : "a spare of another job",
          ")"));
    }
    records.push_back(record);
  }
  for (size_t index = 0; index < records.size(); ++index) {
    records[index]->state = WorkerState::kAssigned;
    records[index]->job_id = job_id;
    records[index]->worker_index = static_cast<int>(index);
    records[index]->draining = false;
  }
  return absl::OkStatus();
}

int WorkerRegistry::Release(const std::string& job_id) {
  int released = 0;
  for (auto& [number, record] : workers_) {
    if (record.state == WorkerState::kAssigned && record.job_id == job_id) {
      record.state = WorkerState::kIdle;
      record.job_id.clear();
      record.worker_index = -1;
      record.draining = true;
      ++released;
    }
  }
  return released;
}

bool WorkerRegistry::ConfirmIdle(const std::string& worker_id) {
  WorkerRecord* record = Find(worker_id);
  if (record == nullptr) return false;
  const bool changed = record->draining;
  record->draining = false;
  return changed;
}

int WorkerRegistry::CountAssignable() const {
  int count = 0;
  for (const auto& [number, record] : workers_) count += IsAssignable(record);
  return count;
}

std::vector<const WorkerRecord*> WorkerRegistry::IdleHolders(const std::string& job_id) const {
  std::vector<const WorkerRecord*> holders;
  for (const auto& [number, record] : workers_) {
    if (record.state == WorkerState::kIdle && record.session != nullptr &&
        record.heartbeat.held().job_id() == job_id) {
      holders.push_back(&record);
    }
  }
  return holders;
}

// ----------------------------------------------------------- sessions

absl::StatusOr<WorkerRegistry::OpenedSession> WorkerRegistry::OpenSession(
    const std::string& worker_id, const std::string& address) {
  if (const WorkerRecord* record = Find(worker_id);
      record != nullptr && record->description.address() != address) {
    // Checked before the lease is renewed: the caller is another process.
    return absl::NotFoundError(absl::StrCat(
        "worker ", worker_id, " is registered for ", record->description.address(), ", not ",
        address, " (the coordinator restarted?); register again"));
  }
  absl::StatusOr<WorkerRecord*> record = Renew(worker_id);
  if (!record.ok()) return record.status();
  // Refused, not replaced: handing the stream over would give whoever asks
  // second the worker's assignment, peers and grants. A worker whose stream
  // broke retries until its old one is seen to end (CloseSession) or its
  // lease expires.
  if ((*record)->session != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(
        "worker ", worker_id, " already has an open Session; retry once it has ended"));
  }
  (*record)->session = std::make_shared<SessionOutbox>();
  return OpenedSession{(*record)->session, *record};
}

void WorkerRegistry::CloseSession(const std::string& worker_id,
                                  const std::shared_ptr<SessionOutbox>& outbox) {
  outbox->Close(absl::CancelledError("session closed"));
  WorkerRecord* record = Find(worker_id);
  if (record != nullptr && record->session == outbox) record->session.reset();
}

void WorkerRegistry::LoseSession(const std::string& worker_id, absl::Status status) {
  WorkerRecord* record = Find(worker_id);
  if (record == nullptr || record->session == nullptr) return;
  record->session->Close(std::move(status));
  record->session.reset();
}

void WorkerRegistry::CloseAllSessions(const absl::Status& status) {
  for (auto& [number, record] : workers_) {
    if (record.session != nullptr) record.session->Close(status);
  }
}

void WorkerRegistry::Send(const std::string& worker_id, SessionMessage message) {
  WorkerRecord* record = Find(worker_id);
  if (record == nullptr || record->session == nullptr) return;  // Replayed on reopening.
  record->session->Push(std::move(message));
}

// -------------------------------------------------------------- views

absl::StatusOr<zbpp::v1::ListWorkersResponse> WorkerRegistry::List(
    const zbpp::v1::ListWorkersRequest& request, const PlaceOfWorker& place) const {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0, got ", request.page_size()));
  }
  // The token is the registration number of the last worker returned:
  // forgetting that worker meanwhile does not lose the place.
  int64_t after = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &after) || after < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token: malformed \"", request.page_token(), "\""));
  }
  const int limit = request.page_size() == 0 ? kDefaultWorkersPage
                                             : std::min(request.page_size(), kMaxWorkersPage);
  const std::set<int> states(request.states().begin(), request.states().end());
  zbpp::v1::ListWorkersResponse response;
  int64_t last_number = 0;
  for (auto it = workers_.upper_bound(after); it != workers_.end(); ++it) {
    const WorkerRecord& record = it->second;
    const zbpp::v1::WorkerState state = ApiState(record, place);
    if (states.empty() ? state == zbpp::v1::WORKER_STATE_LOST : !states.count(state)) {
      continue;
    }
    if (response.workers_size() == limit) {
      response.set_next_page_token(absl::StrCat(last_number));
      break;
    }
    last_number = it->first;
    zbpp::v1::Worker* worker = response.add_workers();
    worker->set_worker_id(record.id);
    *worker->mutable_description() = record.description;
    const std::optional<WorkerPlace> where =
        record.state == WorkerState::kAssigned ? place(record.job_id, record.worker_index)
                                               : std::nullopt;
    worker->set_state(state);
    if (state == zbpp::v1::WORKER_STATE_SPARE) {
      // Kept for its job: the stage it holds, in no replica.
      worker->set_job_id(record.heartbeat.held().job_id());
      worker->set_stage(record.heartbeat.held().stage());
      worker->set_replica(-1);
    } else {
      worker->set_job_id(where.has_value() ? record.job_id : "");
      worker->set_stage(where.has_value() ? where->stage : -1);
      worker->set_replica(where.has_value() ? where->replica : -1);
    }
    *worker->mutable_register_time() = ToTimestamp(record.registered_at);
    *worker->mutable_last_heartbeat_time() = ToTimestamp(record.last_heartbeat);
    worker->set_phase(record.heartbeat.phase());
  }
  return response;
}

std::map<std::string, int> WorkerRegistry::Counts(const PlaceOfWorker& place) const {
  int by_state[zbpp::v1::WorkerState_ARRAYSIZE] = {};
  for (const auto& [number, record] : workers_) ++by_state[ApiState(record, place)];
  std::map<std::string, int> counts;
  const size_t prefix = std::string("WORKER_STATE_").size();
  for (auto state : {zbpp::v1::WORKER_STATE_IDLE, zbpp::v1::WORKER_STATE_ASSIGNED,
                     zbpp::v1::WORKER_STATE_RUNNING, zbpp::v1::WORKER_STATE_SPARE,
                     zbpp::v1::WORKER_STATE_LOST}) {
    counts[zbpp::v1::WorkerState_Name(state).substr(prefix)] = by_state[state];
  }
  return counts;
}

}  // namespace zbpp::coordinator
