#include "coordinator/core/checkpoint_directory.h"

#include "absl/strings/str_replace.h"

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
  return spec.checkpoint().interval_steps() > 0;
}

}  // namespace zbpp::coordinator
