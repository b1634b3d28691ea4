#include "worker/data/snapshot_writer.h"

#include <iostream>
#include <utility>

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
    if (absl::Status st = WriteOwnedCheckpoint(directory_, step, stage_, stages_, owner_, state,
                                               kSnapshotsKept);
        !st.ok()) {
      std::cerr << "zbpp-worker: the snapshot of stage " << stage_ << " at step " << step
                << " was not written: " << st.message() << "\n";
      return;
    }
    durable_.store(step);
  });
}

void SnapshotWriter::Finish() {
  if (in_flight_.valid()) in_flight_.get();
}

std::optional<int64_t> SnapshotWriter::durable_step() const {
  const int64_t step = durable_.load();
  return step < 0 ? std::nullopt : std::optional<int64_t>(step);
}

}  // namespace zbpp::worker
