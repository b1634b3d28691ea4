#include "coordinator/core/membership.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

absl::StatusOr<std::unique_ptr<Membership>> Membership::Create(
    Options options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("Membership::Options.clock is null");
  }
  if (!std::isfinite(options.heartbeat_timeout_seconds) ||
      options.heartbeat_timeout_seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat_timeout_seconds must be > 0, got ",
                     options.heartbeat_timeout_seconds));
  }
  if (options.max_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_workers must be >= 1, got ", options.max_workers));
  }
  if (!std::isfinite(options.lost_worker_retention_seconds) ||
      options.lost_worker_retention_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lost_worker_retention_seconds must be >= 0, got ",
                     options.lost_worker_retention_seconds));
  }
  return std::unique_ptr<Membership>(new Membership(options));
}

absl::StatusOr<Registration> Membership::Register(const WorkerInfo& info) {
  if (info.address.empty()) {
    return absl::InvalidArgumentError("worker address must not be empty");
  }
  if (info.memory_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker memory_bytes must be >= 0, got ", info.memory_bytes));
  }
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  if (workers_.size() >= static_cast<size_t>(options_.max_workers)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "max_workers: the coordinator holds ", workers_.size(),
        " workers, its cap of ", options_.max_workers,
        " (lost workers count until forgotten ",
        options_.lost_worker_retention_seconds, "s after they were lost)"));
  }
  Registration registration;
  // One live worker per address: a process that restarts faster than its
  // lease expires must not leave a ghost holding a pipeline rank.
  for (auto& [seq, record] : workers_) {
    if (IsLive(record) && record.info.address == info.address) {
      record.state = WorkerState::kLost;
      record.lost_at = now;
      registration.superseded = record;
    }
  }
  const int64_t seq = next_seq_++;
  WorkerRecord record;
  record.id = absl::StrCat("worker-", seq);
  record.info = info;
  record.registered_at = now;
  record.last_heartbeat = now;
  registration.worker_id = record.id;
  seq_of_id_[record.id] = seq;
  workers_.emplace(seq, std::move(record));
  return registration;
}

absl::Status Membership::Heartbeat(const std::string& worker_id) {
  const absl::Time now = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  auto it = seq_of_id_.find(worker_id);
  if (it == seq_of_id_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  WorkerRecord& record = workers_.at(it->second);
  if (!IsLive(record)) {
    return absl::NotFoundError(
        absl::StrCat("worker ", worker_id,
                     " is lost (lease expired or superseded); register again"));
  }
  record.last_heartbeat = now;
  return absl::OkStatus();
}

std::vector<WorkerRecord> Membership::ExpireLeases() {
  const absl::Time now = options_.clock->Now();
  const absl::Time deadline =
      now - absl::Seconds(options_.heartbeat_timeout_seconds);
  absl::MutexLock lock(&mu_);
  std::vector<WorkerRecord> lost;
  for (auto& [seq, record] : workers_) {
    if (IsLive(record) && record.last_heartbeat < deadline) {
      record.state = WorkerState::kLost;
      record.lost_at = now;
      lost.push_back(record);
    }
  }
  return lost;
}

absl::StatusOr<WorkerRecord> Membership::Get(
    const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = seq_of_id_.find(worker_id);
  if (it == seq_of_id_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  return workers_.at(it->second);
}

std::vector<std::string> Membership::ForgetLost(
    const std::function<bool(const std::string&)>& keep) {
  const absl::Time deadline =
      options_.clock->Now() - absl::Seconds(options_.lost_worker_retention_seconds);
  absl::MutexLock lock(&mu_);
  std::vector<std::string> forgotten;
  for (auto it = workers_.begin(); it != workers_.end();) {
    const WorkerRecord& record = it->second;
    if (IsLive(record) || record.lost_at >= deadline || keep(record.id)) {
      ++it;
      continue;
    }
    forgotten.push_back(record.id);
    seq_of_id_.erase(record.id);
    it = workers_.erase(it);
  }
  return forgotten;
}

void Membership::ForEachAfter(
    int64_t after,
    const std::function<bool(int64_t, const WorkerRecord&)>& visit) const {
  absl::MutexLock lock(&mu_);
  for (auto it = workers_.upper_bound(after); it != workers_.end(); ++it) {
    if (!visit(it->first, it->second)) return;
  }
}

std::vector<WorkerRecord> Membership::List(WorkerState state) const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerRecord> matching;
  for (const auto& [seq, record] : workers_) {
    if (record.state == state) matching.push_back(record);
  }
  return matching;
}

int Membership::Count(WorkerState state) const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [seq, record] : workers_) count += record.state == state;
  return count;
}

absl::StatusOr<std::vector<int64_t>> Membership::ChooseLocked(
    const std::string& job_id, int workers,
    const std::vector<double>& min_memory_bytes) const {
  if (job_id.empty()) {
    return absl::InvalidArgumentError("job id must not be empty");
  }
  if (workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": workers must be >= 1, got ", workers));
  }
  std::vector<const WorkerRecord*> free;
  std::vector<int64_t> free_seq;
  for (const auto& [seq, record] : workers_) {
    if (record.state == WorkerState::kAssigned && record.job_id == job_id) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " already holds workers (", record.id,
                       " has rank ", record.worker_index, "); release them first"));
    }
    if (record.state == WorkerState::kRegistered && !record.draining) {
      free.push_back(&record);
      free_seq.push_back(seq);
    }
  }
  if (static_cast<int>(free.size()) < workers) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job ", job_id, " needs ", workers, " workers; ",
                     free.size(), " registered and free"));
  }
  std::vector<int64_t> chosen;
  for (int rank = 0; rank < workers; ++rank) {
    const double need =
        min_memory_bytes.empty()
            ? 0
            : min_memory_bytes[rank % min_memory_bytes.size()];
    auto fits = std::find_if(free.begin(), free.end(), [&](const WorkerRecord* w) {
      return w != nullptr && static_cast<double>(w->info.memory_bytes) >= need;
    });
    if (fits == free.end()) {
      int64_t largest = 0;
      for (const WorkerRecord* w : free) {
        if (w != nullptr) largest = std::max(largest, w->info.memory_bytes);
      }
      return absl::ResourceExhaustedError(absl::StrCat(
          "job ", job_id, ": no free worker has the ",
          static_cast<int64_t>(need), " bytes that rank ", rank,
          " needs (largest free: ", largest, " bytes)"));
    }
    chosen.push_back(free_seq[fits - free.begin()]);
    *fits = nullptr;
  }
  return chosen;
}

absl::StatusOr<std::vector<std::string>> Membership::Preview(
    const std::string& job_id, int workers,
    const std::vector<double>& min_memory_bytes) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<int64_t>> chosen =
      ChooseLocked(job_id, workers, min_memory_bytes);
  if (!chosen.ok()) return chosen.status();
  std::vector<std::string> ids;
  for (int64_t seq : *chosen) ids.push_back(workers_.at(seq).id);
  return ids;
}

absl::StatusOr<Assignment> Membership::Assign(
    const std::string& job_id, int workers,
    const std::vector<double>& min_memory_bytes) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<int64_t>> chosen =
      ChooseLocked(job_id, workers, min_memory_bytes);
  if (!chosen.ok()) return chosen.status();
  Assignment assignment;
  assignment.job_id = job_id;
  for (int rank = 0; rank < workers; ++rank) {
    WorkerRecord& record = workers_.at((*chosen)[rank]);
    record.state = WorkerState::kAssigned;
    record.job_id = job_id;
    record.worker_index = rank;
    assignment.worker_ids.push_back(record.id);
  }
  return assignment;
}

int Membership::Release(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  int released = 0;
  for (auto& [seq, record] : workers_) {
    if (record.state == WorkerState::kAssigned && record.job_id == job_id) {
      record.state = WorkerState::kRegistered;
      record.job_id.clear();
      record.worker_index = -1;
      record.draining = true;
      ++released;
    }
  }
  return released;
}

bool Membership::ConfirmIdle(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = seq_of_id_.find(worker_id);
  if (it == seq_of_id_.end()) return false;
  WorkerRecord& record = workers_.at(it->second);
  const bool changed = record.draining;
  record.draining = false;
  return changed;
}

int Membership::CountAssignable() const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [seq, record] : workers_) {
    count += record.state == WorkerState::kRegistered && !record.draining;
  }
  return count;
}

}  // namespace zbpp::coordinator
