#include "coordinator/core/rendezvous_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace zbpp::coordinator {

absl::StatusOr<std::unique_ptr<RendezvousStore>> RendezvousStore::Create(
    Options options) {
  if (options.max_key_bytes == 0 || options.max_value_bytes == 0) {
    return absl::InvalidArgumentError(
        "RendezvousStore limits must be >= 1 byte");
  }
  return std::unique_ptr<RendezvousStore>(new RendezvousStore(options));
}

absl::Status RendezvousStore::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("key is empty");
  if (key.size() > options_.max_key_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "key is ", key.size(), " bytes, limit ", options_.max_key_bytes));
  }
  return absl::OkStatus();
}

absl::Status RendezvousStore::Set(const std::string& scope,
                                  const std::string& key, std::string value) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (value.size() > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("value of \"", key, "\" is ", value.size(),
                     " bytes, limit ", options_.max_value_bytes));
  }
  absl::MutexLock lock(&mu_);
  scopes_[scope][key] = std::move(value);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousStore::Get(const std::string& scope,
                                                 const std::string& key,
                                                 absl::Time deadline) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  bool waited = false;
  while (true) {
    auto it = scopes_.find(scope);
    if (it != scopes_.end()) {
      auto kv = it->second.find(key);
      if (kv != it->second.end()) return kv->second;
    }
    if (absl::Now() >= deadline) {
      if (!waited) {
        return absl::NotFoundError(absl::StrCat("key \"", key, "\" not set"));
      }
      return absl::DeadlineExceededError(
          absl::StrCat("key \"", key, "\" did not appear in time"));
    }
    waited = true;
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

absl::Status RendezvousStore::Wait(const std::string& scope,
                                   const std::vector<std::string>& keys,
                                   absl::Time deadline) {
  if (keys.empty()) return absl::InvalidArgumentError("keys: none given");
  for (const std::string& key : keys) {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  while (true) {
    std::vector<std::string> missing;
    auto it = scopes_.find(scope);
    for (const std::string& key : keys) {
      if (it == scopes_.end() || it->second.count(key) == 0) {
        missing.push_back(key);
      }
    }
    if (missing.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "keys not set in time: ", absl::StrJoin(missing, ", ")));
    }
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

absl::StatusOr<int64_t> RendezvousStore::Add(const std::string& scope,
                                             const std::string& key,
                                             int64_t delta) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::string& value = scopes_[scope][key];
  int64_t current = 0;
  if (!value.empty() && !absl::SimpleAtoi(value, &current)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key \"", key, "\" holds a non-integer value"));
  }
  current += delta;
  value = absl::StrCat(current);
  changed_.SignalAll();
  return current;
}

absl::StatusOr<std::string> RendezvousStore::CompareSet(
    const std::string& scope, const std::string& key,
    const std::string& expected, std::string desired) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  if (desired.size() > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("value is ", desired.size(), " bytes, limit ",
                     options_.max_value_bytes));
  }
  absl::MutexLock lock(&mu_);
  auto& keys = scopes_[scope];
  auto it = keys.find(key);
  if (it == keys.end()) {
    if (!expected.empty()) return std::string();
    keys[key] = desired;
    changed_.SignalAll();
    return desired;
  }
  if (it->second != expected) return it->second;
  it->second = std::move(desired);
  changed_.SignalAll();
  return it->second;
}

bool RendezvousStore::Delete(const std::string& scope, const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) return false;
  return it->second.erase(key) > 0;
}

void RendezvousStore::DeleteScope(const std::string& scope) {
  absl::MutexLock lock(&mu_);
  scopes_.erase(scope);
}

int RendezvousStore::KeyCount(const std::string& scope) const {
  absl::MutexLock lock(&mu_);
  auto it = scopes_.find(scope);
  return it == scopes_.end() ? 0 : static_cast<int>(it->second.size());
}

}  // namespace zbpp::coordinator
