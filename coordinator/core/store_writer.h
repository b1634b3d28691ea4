#ifndef ZBPP_COORDINATOR_CORE_STORE_WRITER_H_
#define ZBPP_COORDINATOR_CORE_STORE_WRITER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/store/store.h"

namespace zbpp::coordinator {

/// One thread that applies store writes in the order they were queued, so
/// the Coordinator can decide a change under its mutex and persist it
/// without holding that mutex across a SQLite commit.
///
/// Ordering: writes are applied one at a time, in Enqueue order (the
/// Coordinator enqueues under its mutex, so that is the order it decided
/// them). The store always holds a prefix of the decided history: a crash
/// loses at most the queued suffix, as it would the last commits of a
/// synchronous writer.
///
/// Failures. A write that fails for its record — InvalidArgument, NotFound,
/// AlreadyExists (Store's errors about the record itself), which no retry
/// can change — is logged with its context, counted in `Health::refused`
/// and skipped. Any other failure (Unavailable, Internal: the storage
/// itself) is retried with back-off, `initial_backoff` doubling to
/// `max_backoff`, and every later write waits behind it, so the prefix
/// holds. The first failed attempt makes the writer *failing*
/// (`Health::healthy` false): one line on stderr naming the write and the
/// error; the next success makes it healthy again: one line with the
/// attempts and time it took; no line per retry. While failing, Flush
/// returns Unavailable instead of waiting, and `on_recovered` runs after
/// it recovers. The Coordinator pauses its jobs meanwhile
/// (coordinator.h, "Persistence"); the daemon reports it in gRPC health
/// and `zbpp_store_*` metrics.
///
/// Shutdown: the destructor applies everything queued; a write still
/// failing `drain_timeout` after the destructor began is given up, with
/// the writes behind it, on one line saying how many were not stored.
///
/// Thread-safe.
class StoreWriter {
 public:
  struct Options {
    /// Where writes go (not owned; must outlive the writer); required.
    Store* store = nullptr;
    /// Wait after the first failed attempt of a write; doubled after each
    /// further one, up to `max_backoff`. > 0.
    absl::Duration initial_backoff = absl::Milliseconds(100);
    /// Longest wait between two attempts; >= initial_backoff.
    absl::Duration max_backoff = absl::Seconds(5);
    /// How long the destructor keeps retrying a failing write; >= 0.
    absl::Duration drain_timeout = absl::Seconds(10);
    /// Called on the writer thread, holding no lock of the writer, each
    /// time a failing writer becomes healthy again (before the next write
    /// is applied). May take the caller's own locks and Enqueue; must not
    /// call Flush or destroy the writer. Optional.
    std::function<void()> on_recovered;
  };

  /// The writer's state, for health checks and metrics.
  struct Health {
    /// False from a write's first failed attempt until one succeeds.
    bool healthy = true;
    /// Writes queued and not yet applied (the failing one included).
    int64_t pending = 0;
    /// Failed attempts since creation (each retry counts).
    int64_t failed_attempts = 0;
    /// Writes skipped since creation: refused for their record, or given
    /// up at shutdown.
    int64_t refused = 0;
    /// While failing: "<context>: <status>" of the write being retried.
    std::string last_error;
  };

  /// One write: called on the writer thread with the store.
  using Write = std::function<absl::Status(Store&)>;

  /// InvalidArgument naming the option for a null store or a bad
  /// back-off or drain timeout.
  static absl::StatusOr<std::unique_ptr<StoreWriter>> Create(Options options);

  ~StoreWriter();

  /// Queues `write`; `context` names it in error lines ("storing job
  /// job-1").
  void Enqueue(Write write, std::string context) ABSL_LOCKS_EXCLUDED(mu_);

  /// Waits until every write queued before this call has been applied; OK
  /// then. Unavailable with the failing write and its error when the
  /// writer is (or becomes) failing before that: it does not wait for the
  /// store to come back.
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);

  /// The current state (one lock; cheap).
  Health GetHealth() const ABSL_LOCKS_EXCLUDED(mu_);

  /// True while no write is being retried.
  bool Healthy() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Item {
    Write write;
    std::string context;
  };

  explicit StoreWriter(Options options) : options_(std::move(options)) {}
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  /// Applies `item`, retrying storage failures until one attempt succeeds,
  /// fails for the record, or the drain timeout passes while stopping
  /// (false then: the item and everything queued are given up).
  bool Apply(const Item& item) ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  ///< Writes ever queued.
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;   ///< Writes done or skipped.
  int64_t failed_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);  ///< Empty while healthy.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time stop_time_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_STORE_WRITER_H_
