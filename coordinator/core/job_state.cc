#include "coordinator/core/job_state.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"

namespace zbpp::coordinator {

using zbpp::v1::JobState;

bool IsLegalTransition(JobState from, JobState to) {
  if (from == zbpp::v1::JOB_STATE_UNSPECIFIED ||
      to == zbpp::v1::JOB_STATE_UNSPECIFIED || IsTerminal(from) || from == to) {
    return false;
  }
  // A user may cancel at any point before the job ends.
  if (to == zbpp::v1::JOB_STATE_CANCELLED) return true;
  switch (from) {
    case zbpp::v1::JOB_STATE_PENDING:
      // FAILED when it cannot run at all (its schedule or cost model cannot
      // be built for its first attempt).
      return to == zbpp::v1::JOB_STATE_ASSIGNING ||
             to == zbpp::v1::JOB_STATE_FAILED;
    case zbpp::v1::JOB_STATE_ASSIGNING:
      // Back to PENDING when workers vanished between the choice and the
      // hand-out: the job waits instead of failing.
      return to == zbpp::v1::JOB_STATE_RUNNING ||
             to == zbpp::v1::JOB_STATE_PENDING ||
             to == zbpp::v1::JOB_STATE_FAILED;
    case zbpp::v1::JOB_STATE_RUNNING:
      return to == zbpp::v1::JOB_STATE_SUCCEEDED ||
             to == zbpp::v1::JOB_STATE_FAILED ||
             to == zbpp::v1::JOB_STATE_RECOVERING;
    case zbpp::v1::JOB_STATE_DEGRADED:
      // A running state on fewer replicas (docs/elastic.md); RUNNING again
      // once healed.
      return to == zbpp::v1::JOB_STATE_SUCCEEDED ||
             to == zbpp::v1::JOB_STATE_FAILED ||
             to == zbpp::v1::JOB_STATE_RECOVERING ||
             to == zbpp::v1::JOB_STATE_RUNNING;
    case zbpp::v1::JOB_STATE_RECOVERING:
      // SUCCEEDED when the surviving workers hold the last step's update.
      return to == zbpp::v1::JOB_STATE_RUNNING ||
             to == zbpp::v1::JOB_STATE_DEGRADED ||
             to == zbpp::v1::JOB_STATE_SUCCEEDED ||
             to == zbpp::v1::JOB_STATE_FAILED;
    default:
      return false;
  }
}

absl::Status Transition(JobState from, JobState to) {
  if (IsLegalTransition(from, to)) return absl::OkStatus();
  std::string why;
  if (IsTerminal(from)) {
    why = absl::StrCat(" (", JobStateName(from), " is terminal)");
  } else if (from == to) {
    why = " (already in that state)";
  }
  return absl::FailedPreconditionError(
      absl::StrCat("illegal job state transition ", JobStateName(from), " -> ",
                   JobStateName(to), why));
}

}  // namespace zbpp::coordinator
