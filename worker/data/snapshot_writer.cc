#include "worker/data/snapshot_writer.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/snapshots.h"

namespace zbpp::worker {

SnapshotWriter::SnapshotWriter(std::string directory, int stage, int stages, std::string owner)
    : directory_(std::move(directory)),
      stage_(stage),
      stages_(stages),
      owner_(std::move(owner)) {}

SnapshotWriter::~SnapshotWriter() { Finish(); }

void SnapshotWriter::Submit(int64_t step, NamedTensors state) {
  Finish();
  in_flight_ = std::async(std::launch::async, [this, step, state = std::move(state)] {
    if (absl::Status st = Write(step, state); !st.ok()) {
      std::cerr << "zbpp-worker: the snapshot of stage " << stage_ << " at step " << step
                << " was not written: " << st.message() << "\n";
    }
  });
}

void SnapshotWriter::Finish() {
  if (in_flight_.valid()) in_flight_.get();
}

std::optional<int64_t> SnapshotWriter::durable_step() const {
  const int64_t step = durable_.load();
  return step < 0 ? std::nullopt : std::optional<int64_t>(step);
}

absl::Status SnapshotWriter::Write(int64_t step, const NamedTensors& state) {
  // The owner file first, as for a checkpoint: a file is never without one.
  if (absl::Status st = ClaimCheckpoint(directory_, step, stage_, owner_); !st.ok()) return st;
  if (absl::Status st = WriteCheckpoint(directory_, step, stage_, state); !st.ok()) return st;
  durable_.store(step);
  // A failed clean-up costs disk, not the snapshot just written.
  absl::StatusOr<int> pruned =
      PruneCheckpoints(directory_, stage_, stages_, kSnapshotsKept, owner_, step);
  if (!pruned.ok()) {
    std::cerr << "zbpp-worker: pruning snapshots: " << pruned.status().message() << "\n";
  }
  return absl::OkStatus();
}

}  // namespace zbpp::worker
