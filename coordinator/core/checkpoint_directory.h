#ifndef ZBPP_COORDINATOR_CORE_CHECKPOINT_DIRECTORY_H_
#define ZBPP_COORDINATOR_CORE_CHECKPOINT_DIRECTORY_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// The placeholder a CheckpointSpec.directory may hold (job_spec.proto): the
/// coordinator replaces it with the new job's id at submission, so one spec
/// submitted twice writes two directories.
inline constexpr absl::string_view kJobIdPlaceholder = "{job_id}";

/// `directory` with every kJobIdPlaceholder replaced by `job_id`. Pure.
std::string ExpandJobId(absl::string_view directory, absl::string_view job_id);

/// Whether two checkpoint directories as CheckPath accepts them (absolute,
/// normal components) name the same directory: equal but for one trailing
/// slash. Pure.
bool SameCheckpointDirectory(absl::string_view a, absl::string_view b);

/// Whether a job of `spec` writes checkpoints (checkpoint.interval_steps > 0)
/// or snapshots, or reads a checkpoint (checkpoint.resume_step set, and every recovery of such a
/// job before its first checkpoint) in checkpoint.directory. Pure.
bool UsesCheckpointDirectory(const zbpp::v1::JobSpec& spec);

/// Whether a job of `spec` writes checkpoints or snapshots
/// (checkpoint.snapshot_interval_steps) into its directory. Pure.
bool WritesCheckpoints(const zbpp::v1::JobSpec& spec);

/// Where a restart of a job resumes from (docs/elastic.md, "Snapshots").
struct RestorePoint {
  /// The step whose update it holds; -1: none, the job starts from its seed.
  int64_t step = -1;
  /// checkpoint.directory, or its snapshots' (api/snapshots.h); empty
  /// when step is -1.
  std::string directory;
  /// Whether it is a snapshot rather than a checkpoint.
  bool snapshot = false;

  /// "the checkpoint of step 29", "the snapshot of step 41" or "step 0".
  std::string Describe() const;
};

/// The newer of `job`'s last checkpoint (Job.last_checkpoint_step) and the
/// last step every stage has a snapshot of (Job.last_snapshot_step, when
/// Job.snapshot_steps is set); the checkpoint when both are of one step.
/// Pure.
RestorePoint NewestRestorePoint(const zbpp::v1::Job& job);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_CHECKPOINT_DIRECTORY_H_
