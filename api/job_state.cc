#include "api/job_state.h"

#include "absl/strings/strip.h"

namespace zbpp {

std::string JobStateName(v1::JobState state) {
  return std::string(absl::StripPrefix(v1::JobState_Name(state), "JOB_STATE_"));
}

bool IsRunning(v1::JobState state) {
  return state == v1::JOB_STATE_RUNNING || state == v1::JOB_STATE_DEGRADED;
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

}  // namespace zbpp
