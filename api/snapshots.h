#ifndef ZBPP_API_SNAPSHOTS_H_
#define ZBPP_API_SNAPSHOTS_H_

// Where a job's snapshots lie (CheckpointSpec.snapshot_interval_steps;
// docs/elastic.md, "Snapshots"), for the worker that writes them and the
// coordinator that restarts from them.

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zbpp {

/// The snapshots' directory under a job's checkpoint directory; the files
/// in it are named as checkpoints are (worker/data/checkpoint.h). Pure.
inline std::string SnapshotDirectory(absl::string_view checkpoint_directory) {
  return absl::StrCat(checkpoint_directory,
                      absl::EndsWith(checkpoint_directory, "/") ? "" : "/", "snapshots");
}

/// How many of the newest complete snapshot steps each stage keeps. Three,
/// because the coordinator may know a stage's newest snapshot two steps
/// late: the report that would have said so can die with its worker, after
/// a write it did not report (docs/elastic.md, "Snapshots").
inline constexpr int kSnapshotsKept = 3;

}  // namespace zbpp

#endif  // ZBPP_API_SNAPSHOTS_H_
