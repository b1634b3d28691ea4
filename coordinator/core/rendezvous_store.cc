#include "coordinator/core/rendezvous_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace zbpp::coordinator {
namespace {

// How often a wait looks at its `cancelled` callback.
constexpr absl::Duration kCancelPoll = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousStore>> RendezvousStore::Create(
    Options options) {
  if (options.max_key_bytes == 0 || options.max_value_bytes == 0 ||
      options.max_keys_per_scope == 0 || options.max_scope_bytes == 0 ||
      options.max_total_bytes == 0) {
    return absl::InvalidArgumentError(
        "RendezvousStore limits must be >= 1 (byte, key)");
  }
  if (options.max_wait <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("RendezvousStore max_wait must be > 0");
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

std::shared_ptr<RendezvousStore::Scope> RendezvousStore::FindOrCreate(
    const std::string& scope) {
  std::shared_ptr<Scope>& found = scopes_[scope];
  if (found == nullptr) found = std::make_shared<Scope>();
  return found;
}

absl::Status RendezvousStore::Put(Scope& scope, const std::string& key,
                                  std::string value) {
  if (value.size() > options_.max_value_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("value of \"", key, "\" is ", value.size(),
                     " bytes, limit ", options_.max_value_bytes));
  }
  auto it = scope.keys.find(key);
  const size_t old_bytes = it == scope.keys.end() ? 0 : key.size() + it->second.size();
  if (it == scope.keys.end() && scope.keys.size() >= options_.max_keys_per_scope) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the scope holds ", scope.keys.size(), " keys, limit ",
        options_.max_keys_per_scope));
  }
  const size_t bytes = scope.bytes - old_bytes + key.size() + value.size();
  if (bytes > options_.max_scope_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the scope would hold ", bytes, " bytes, limit ", options_.max_scope_bytes));
  }
  const size_t total = total_bytes_ - scope.bytes + bytes;
  if (bytes > scope.bytes && total > options_.max_total_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the rendezvous would hold ", total, " bytes in all scopes, limit ",
                     options_.max_total_bytes));
  }
  total_bytes_ = total;
  scope.bytes = bytes;
  scope.keys[key] = std::move(value);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status RendezvousStore::Set(const std::string& scope,
                                  const std::string& key, std::string value) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return Put(*FindOrCreate(scope), key, std::move(value));
}

absl::Status RendezvousStore::Await(
    const std::string& scope, absl::Time deadline, const CancelledFn& cancelled,
    const std::function<bool(const Scope&)>& ready,
    const std::function<absl::Status(const Scope&)>& timeout) {
  deadline = std::min(deadline, absl::Now() + options_.max_wait);
  absl::MutexLock lock(&mu_);
  const std::shared_ptr<Scope> waited = FindOrCreate(scope);
  while (true) {
    if (waited->ended) {
      return absl::FailedPreconditionError(
          absl::StrCat("rendezvous scope \"", scope, "\" ended (its attempt is over)"));
    }
    if (ready(*waited)) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) return timeout(*waited);
    if (cancelled != nullptr && cancelled()) {
      return absl::CancelledError("the caller cancelled the wait");
    }
    changed_.WaitWithDeadline(
        &mu_, cancelled != nullptr ? std::min(deadline, now + kCancelPoll) : deadline);
  }
}

absl::StatusOr<std::string> RendezvousStore::Get(const std::string& scope,
                                                 const std::string& key,
                                                 absl::Time deadline,
                                                 const CancelledFn& cancelled) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  // A deadline already past makes a lookup: absent is NotFound.
  const bool lookup = absl::Now() >= deadline;
  std::string value;
  auto ready = [&](const Scope& s) {
    auto kv = s.keys.find(key);
    if (kv == s.keys.end()) return false;
    value = kv->second;
    return true;
  };
  absl::Status status = Await(scope, deadline, cancelled, ready, [&](const Scope&) {
    return lookup ? absl::NotFoundError(absl::StrCat("key \"", key, "\" not set"))
                  : absl::DeadlineExceededError(
                        absl::StrCat("key \"", key, "\" did not appear in time"));
  });
  if (!status.ok()) return status;
  return value;
}

absl::Status RendezvousStore::Wait(const std::string& scope,
                                   const std::vector<std::string>& keys,
                                   absl::Time deadline,
                                   const CancelledFn& cancelled) {
  if (keys.empty()) return absl::InvalidArgumentError("keys: none given");
  for (const std::string& key : keys) {
    if (absl::Status s = CheckKey(key); !s.ok()) return s;
  }
  return Await(
      scope, deadline, cancelled,
      [&](const Scope& s) {
        return std::all_of(keys.begin(), keys.end(),
                           [&](const std::string& key) { return s.keys.count(key) == 1; });
      },
      [&](const Scope& s) {
        std::vector<std::string> missing;
        for (const std::string& key : keys) {
          if (s.keys.count(key) == 0) missing.push_back(key);
        }
        return absl::DeadlineExceededError(
            absl::StrCat("keys not set in time: ", absl::StrJoin(missing, ", ")));
      });
}

absl::StatusOr<int64_t> RendezvousStore::Add(const std::string& scope,
                                             const std::string& key,
                                             int64_t delta) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  Scope& keys = *FindOrCreate(scope);
  auto it = keys.keys.find(key);
  int64_t current = 0;
  if (it != keys.keys.end() && !absl::SimpleAtoi(it->second, &current)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key \"", key, "\" holds a non-integer value"));
  }
  current += delta;
  if (absl::Status s = Put(keys, key, absl::StrCat(current)); !s.ok()) return s;
  return current;
}

absl::StatusOr<std::string> RendezvousStore::CompareSet(
    const std::string& scope, const std::string& key,
    const std::string& expected, std::string desired) {
  if (absl::Status s = CheckKey(key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  Scope& keys = *FindOrCreate(scope);
  auto it = keys.keys.find(key);
  if (it == keys.keys.end() ? !expected.empty() : it->second != expected) {
    return it == keys.keys.end() ? std::string() : it->second;
  }
  const std::string after = desired;
  if (absl::Status s = Put(keys, key, std::move(desired)); !s.ok()) return s;
  return after;
}

bool RendezvousStore::Delete(const std::string& scope, const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) return false;
  Scope& keys = *it->second;
  auto kv = keys.keys.find(key);
  if (kv == keys.keys.end()) return false;
  keys.bytes -= key.size() + kv->second.size();
  total_bytes_ -= key.size() + kv->second.size();
  keys.keys.erase(kv);
  return true;
}

void RendezvousStore::DeleteScope(const std::string& scope) {
  absl::MutexLock lock(&mu_);
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) return;
  it->second->ended = true;
  total_bytes_ -= it->second->bytes;
  scopes_.erase(it);
  changed_.SignalAll();
}

size_t RendezvousStore::total_bytes() const {
  absl::MutexLock lock(&mu_);
  return total_bytes_;
}

int RendezvousStore::KeyCount(const std::string& scope) const {
  absl::MutexLock lock(&mu_);
  auto it = scopes_.find(scope);
  return it == scopes_.end() ? 0 : static_cast<int>(it->second->keys.size());
}

}  // namespace zbpp::coordinator
