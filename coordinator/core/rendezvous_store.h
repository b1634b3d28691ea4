#ifndef ZBPP_COORDINATOR_CORE_RENDEZVOUS_STORE_H_
#define ZBPP_COORDINATOR_CORE_RENDEZVOUS_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace zbpp::coordinator {

/// The key-value store through which the workers of one job attempt
/// bootstrap Gloo / NCCL (rendezvous.proto), with c10d::Store semantics.
/// Keys live in scopes (`Assignment.rendezvous_scope`); access control is
/// the caller's business (Coordinator::CheckRendezvousAccess).
///
/// Waits block the calling thread on real time (absl::CondVar) until the
/// keys appear or `deadline` passes: they serve RPCs, whose deadlines are
/// real. Thread-safe.
class RendezvousStore {
 public:
  struct Options {
    /// Longest key, bytes.
    size_t max_key_bytes = 512;
    /// Largest value, bytes (RESOURCE_EXHAUSTED beyond).
    size_t max_value_bytes = 1 << 20;
  };

  static absl::StatusOr<std::unique_ptr<RendezvousStore>> Create(
      Options options);

  /// Sets `key` to `value`. InvalidArgument for an empty key,
  /// ResourceExhausted for a key or value over the limits.
  absl::Status Set(const std::string& scope, const std::string& key,
                   std::string value) ABSL_LOCKS_EXCLUDED(mu_);

  /// The value of `key`, waiting until `deadline` for it to appear.
  /// NotFound when absent and `deadline` has passed at the call;
  /// DeadlineExceeded when it did not appear in time.
  absl::StatusOr<std::string> Get(const std::string& scope,
                                  const std::string& key, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Returns when every key exists. DeadlineExceeded naming the missing
  /// keys at `deadline`; InvalidArgument for no keys.
  absl::Status Wait(const std::string& scope,
                    const std::vector<std::string>& keys, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Adds `delta` to the decimal counter in `key` (absent = 0) and returns
  /// the new value. InvalidArgument when the key holds a non-integer.
  absl::StatusOr<int64_t> Add(const std::string& scope, const std::string& key,
                              int64_t delta) ABSL_LOCKS_EXCLUDED(mu_);

  /// Sets `key` to `desired` when it holds `expected` (empty: absent);
  /// returns the value after the call (c10d compareSet).
  absl::StatusOr<std::string> CompareSet(const std::string& scope,
                                         const std::string& key,
                                         const std::string& expected,
                                         std::string desired)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Removes `key`; true when it existed.
  bool Delete(const std::string& scope, const std::string& key)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Removes every key of `scope` (the attempt ended).
  void DeleteScope(const std::string& scope) ABSL_LOCKS_EXCLUDED(mu_);

  /// Keys stored in `scope` (for tests).
  int KeyCount(const std::string& scope) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit RendezvousStore(Options options) : options_(options) {}
  absl::Status CheckKey(const std::string& key) const;

  const Options options_;
  mutable absl::Mutex mu_;
  /// Signalled on every change.
  absl::CondVar changed_;
  std::map<std::string, std::map<std::string, std::string>> scopes_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_RENDEZVOUS_STORE_H_
