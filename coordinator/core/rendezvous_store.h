#ifndef ZBPP_COORDINATOR_CORE_RENDEZVOUS_STORE_H_
#define ZBPP_COORDINATOR_CORE_RENDEZVOUS_STORE_H_

#include <cstdint>
#include <functional>
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
/// real. Every wait is bounded by Options::max_wait whatever the caller
/// asks, ends within a second of `cancelled` turning true (the RPC's client
/// went away), and ends at once when its scope is deleted (the attempt
/// ended): a waiting call cannot pin a server thread. Scopes are bounded in
/// keys and bytes, and all of them together in bytes. Thread-safe.
class RendezvousStore {
 public:
  struct Options {
    /// Longest key, bytes.
    size_t max_key_bytes = 512;
    /// Largest value, bytes (RESOURCE_EXHAUSTED beyond).
    size_t max_value_bytes = 1 << 20;
    /// Keys in one scope (RESOURCE_EXHAUSTED beyond): Gloo and NCCL need a
    /// few per stage.
    size_t max_keys_per_scope = 4096;
    /// Bytes of keys and values in one scope (RESOURCE_EXHAUSTED beyond).
    size_t max_scope_bytes = 64 << 20;
    /// Bytes of keys and values in every scope together (RESOURCE_EXHAUSTED
    /// beyond): many attempts' scopes cannot add up past it. Gloo and NCCL
    /// keep a few KiB per stage.
    size_t max_total_bytes = 256 << 20;
    /// Longest wait of one Get or Wait, whatever its deadline; > 0.
    absl::Duration max_wait = absl::Minutes(10);
  };

  /// Polled about once a second by waits: true ends the wait (Cancelled).
  using CancelledFn = std::function<bool()>;

  static absl::StatusOr<std::unique_ptr<RendezvousStore>> Create(
      Options options);

  /// Sets `key` to `value`. InvalidArgument for an empty key,
  /// ResourceExhausted for a key, value or scope over the limits.
  absl::Status Set(const std::string& scope, const std::string& key,
                   std::string value) ABSL_LOCKS_EXCLUDED(mu_);

  /// The value of `key`, waiting until `deadline` (at most max_wait) for it
  /// to appear. NotFound when absent and `deadline` has passed at the call;
  /// DeadlineExceeded when it did not appear in time; Cancelled when
  /// `cancelled` (may be null) said so; FailedPrecondition when the scope
  /// was deleted meanwhile.
  absl::StatusOr<std::string> Get(const std::string& scope,
                                  const std::string& key, absl::Time deadline,
                                  const CancelledFn& cancelled = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Returns when every key exists. DeadlineExceeded naming the missing
  /// keys at `deadline` (at most max_wait); InvalidArgument for no keys;
  /// Cancelled and FailedPrecondition as Get.
  absl::Status Wait(const std::string& scope,
                    const std::vector<std::string>& keys, absl::Time deadline,
                    const CancelledFn& cancelled = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Adds `delta` to the decimal counter in `key` (absent = 0) and returns
  /// the new value. InvalidArgument when the key holds a non-integer;
  /// ResourceExhausted as Set.
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

  /// Removes every key of `scope` (the attempt ended) and ends the waits
  /// on it.
  void DeleteScope(const std::string& scope) ABSL_LOCKS_EXCLUDED(mu_);

  /// Keys stored in `scope` (for tests).
  int KeyCount(const std::string& scope) const ABSL_LOCKS_EXCLUDED(mu_);
  /// Bytes of keys and values held in every scope.
  size_t total_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The keys of one scope. Waiters hold it by pointer, so that deleting the
  // scope (erased from scopes_, `ended` set) ends their waits.
  struct Scope {
    std::map<std::string, std::string> keys;
    size_t bytes = 0;  // Of keys and values.
    bool ended = false;
  };

  explicit RendezvousStore(Options options) : options_(options) {}
  absl::Status CheckKey(const std::string& key) const;
  std::shared_ptr<Scope> FindOrCreate(const std::string& scope)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `value` under `key`, within the scope's limits.
  absl::Status Put(Scope& scope, const std::string& key, std::string value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Blocks until `ready` (called under the lock) returns true, the wait's
  // deadline (capped at max_wait) passes, `cancelled` says so, or the scope
  // ends; `timeout` makes the status at the deadline.
  absl::Status Await(const std::string& scope, absl::Time deadline,
                     const CancelledFn& cancelled, const std::function<bool(const Scope&)>& ready,
                     const std::function<absl::Status(const Scope&)>& timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  /// Signalled on every change.
  absl::CondVar changed_;
  std::map<std::string, std::shared_ptr<Scope>> scopes_ ABSL_GUARDED_BY(mu_);
  /// Sum of the scopes' `bytes`.
  size_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_RENDEZVOUS_STORE_H_
