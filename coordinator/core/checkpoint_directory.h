#ifndef ZBPP_COORDINATOR_CORE_CHECKPOINT_DIRECTORY_H_
#define ZBPP_COORDINATOR_CORE_CHECKPOINT_DIRECTORY_H_

#include <string>

#include "absl/strings/string_view.h"
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
/// or reads one (checkpoint.resume_step set, and every recovery of such a
/// job before its first checkpoint) in checkpoint.directory. Pure.
bool UsesCheckpointDirectory(const zbpp::v1::JobSpec& spec);

/// Whether a job of `spec` writes checkpoints into its directory. Pure.
bool WritesCheckpoints(const zbpp::v1::JobSpec& spec);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_CHECKPOINT_DIRECTORY_H_
