#include "coordinator/core/job_state.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

std::string JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "PENDING";
    case JobState::kAssigning:
      return "ASSIGNING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kRecovering:
      return "RECOVERING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return absl::StrCat("JobState(", static_cast<int>(state), ")");
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

bool IsLegalTransition(JobState from, JobState to) {
  if (IsTerminal(from) || from == to) return false;
  // A user may cancel at any point before the job ends.
  if (to == JobState::kCancelled) return true;
  switch (from) {
    case JobState::kPending:
      return to == JobState::kAssigning;
    case JobState::kAssigning:
      // Back to PENDING when workers vanished between the choice and the
      // hand-out: the job waits instead of failing.
      return to == JobState::kRunning || to == JobState::kPending ||
             to == JobState::kFailed;
    case JobState::kRunning:
      return to == JobState::kSucceeded || to == JobState::kFailed ||
             to == JobState::kRecovering;
    case JobState::kRecovering:
      return to == JobState::kRunning || to == JobState::kFailed;
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
