#include "coordinator/core/checkpoint_directory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "api/snapshots.h"

namespace zbpp::coordinator {
namespace {

absl::string_view WithoutTrailingSlash(absl::string_view path) {
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return path;
}

}  // namespace

std::string ExpandJobId(absl::string_view directory, absl::string_view job_id) {
  return absl::StrReplaceAll(directory, {{kJobIdPlaceholder, job_id}});
}

bool SameCheckpointDirectory(absl::string_view a, absl::string_view b) {
  return WithoutTrailingSlash(a) == WithoutTrailingSlash(b);
}

bool UsesCheckpointDirectory(const zbpp::v1::JobSpec& spec) {
  return !spec.checkpoint().directory().empty() &&
         (WritesCheckpoints(spec) || spec.checkpoint().has_resume_step());
}

bool WritesCheckpoints(const zbpp::v1::JobSpec& spec) {
  return spec.checkpoint().interval_steps() > 0 || spec.checkpoint().snapshot_interval_steps() > 0;
}

std::string RestorePoint::Describe() const {
  if (step < 0) return "step 0";
  return absl::StrCat(snapshot ? "the snapshot of step " : "the checkpoint of step ", step);
}

RestorePoint NewestRestorePoint(const zbpp::v1::Job& job) {
  RestorePoint point;
  const std::string& directory = job.spec().checkpoint().directory();
  if (job.last_checkpoint_step() >= 0) {
    point.step = job.last_checkpoint_step();
    point.directory = directory;
  }
  if (job.snapshot_steps_size() > 0 && job.last_snapshot_step() > point.step) {
    point.step = job.last_snapshot_step();
    point.directory = SnapshotDirectory(directory);
    point.snapshot = true;
  }
  return point;
}

}  // namespace zbpp::coordinator
