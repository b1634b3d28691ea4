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
#include "coordinator/store/store.h"

namespace zbpp::coordinator {

/// One thread that applies store writes in the order they were queued, so
/// the Coordinator can decide a change under its mutex and persist it
/// without holding that mutex across a SQLite commit.
///
/// Ordering: writes are applied one at a time, in Enqueue order (the
/// Coordinator enqueues under its mutex, so that is the order it decided
/// them). A crash loses at most a suffix of what was queued — the store
/// always holds a prefix of the decided history, as it would after losing
/// the last commits of a synchronous writer.
///
/// A failed write is reported on stderr with its context; later writes
/// still run (the in-memory state stays authoritative for this process).
///
/// Thread-safe. The destructor applies everything queued, then joins.
class StoreWriter {
 public:
  struct Options {
    /// Where writes go (not owned; must outlive the writer); required.
    Store* store = nullptr;
  };

  /// One write: called on the writer thread with the store.
  using Write = std::function<absl::Status(Store&)>;

  /// InvalidArgument for a null store.
  static absl::StatusOr<std::unique_ptr<StoreWriter>> Create(Options options);

  ~StoreWriter();

  /// Queues `write`; `context` names it in the error line ("storing job
  /// job-1"). `ignore_already_exists`: an AlreadyExists result is expected
  /// (a record replayed after a restart) and not reported.
  void Enqueue(Write write, std::string context,
               bool ignore_already_exists = false) ABSL_LOCKS_EXCLUDED(mu_);

  /// Waits until every write queued before this call has been applied.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  /// Writes queued and not yet applied (for tests and metrics).
  int64_t Pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Item {
    Write write;
    std::string context;
    bool ignore_already_exists = false;
  };

  explicit StoreWriter(Options options) : options_(options) {}
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  ///< Writes ever queued.
  int64_t applied_ ABSL_GUARDED_BY(mu_) = 0;   ///< Writes ever applied.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_STORE_WRITER_H_
