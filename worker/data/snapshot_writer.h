#ifndef ZBPP_WORKER_DATA_SNAPSHOT_WRITER_H_
#define ZBPP_WORKER_DATA_SNAPSHOT_WRITER_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <optional>
#include <string>

#include "worker/data/checkpoint.h"

namespace zbpp::worker {

/// Writes one stage's snapshots (CheckpointSpec.snapshot_interval_steps;
/// docs/elastic.md, "Snapshots") in the background: each as a checkpoint
/// file of `stage` under `directory` (api/snapshots.h SnapshotDirectory),
/// claimed for `owner` first and pruned to the kSnapshotsKept newest
/// complete steps after (worker/data/checkpoint.h). At most one write runs:
/// Submit waits for the previous one, so the newest durable snapshot is
/// never more than one submission behind.
///
/// A failed write is logged to stderr and leaves durable_step() where it
/// was: the job trains on, and a restart goes back to an older snapshot or
/// the checkpoint. Thread-compatible: one thread calls Submit and Finish;
/// durable_step() may be read from any thread.
class SnapshotWriter {
 public:
  SnapshotWriter(std::string directory, int stage, int stages, std::string owner);
  /// Waits for the write in flight.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  /// Hands the stage's state after `step` (its own copy: the caller's
  /// tensors change with the next step) to the writer, once the previous
  /// write has ended. Blocks for that write only.
  void Submit(int64_t step, NamedTensors state);

  /// Waits for the write in flight, if any.
  void Finish();

  /// The newest step whose snapshot this writer wrote durably (file and
  /// owner file fsynced and renamed); nullopt before the first.
  std::optional<int64_t> durable_step() const;

 private:
  const std::string directory_;
  const int stage_;
  const int stages_;
  const std::string owner_;
  std::future<void> in_flight_;
  std::atomic<int64_t> durable_{-1};
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_SNAPSHOT_WRITER_H_
