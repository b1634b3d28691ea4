#ifndef ZBPP_COORDINATOR_CORE_JOB_STATE_H_
#define ZBPP_COORDINATOR_CORE_JOB_STATE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::coordinator {

/// Life cycle of a training job:
///
///     PENDING ──> ASSIGNING ──> RUNNING ──> SUCCEEDED
///        ^            │           │  ^
///        └────────────┘           v  │
///       (too few workers)      RECOVERING ──> FAILED
///
/// ASSIGNING and RUNNING may also go to FAILED; every non-terminal state may
/// go to CANCELLED. SUCCEEDED, FAILED and CANCELLED are terminal.
enum class JobState {
  kPending,     ///< Accepted and stored; waiting for enough free workers.
  kAssigning,   ///< Workers chosen; schedule computed and being handed out.
  kRunning,     ///< Workers run steps.
  kRecovering,  ///< A worker was lost or a step failed; restarting from a
                ///< checkpoint.
  kSucceeded,   ///< All steps done.
  kFailed,      ///< Gave up; the reason is stored beside the state.
  kCancelled,   ///< Cancelled by a user.
};

/// Every state, in declaration order (for tables and metrics labels).
inline constexpr JobState kAllJobStates[] = {
    JobState::kPending,    JobState::kAssigning, JobState::kRunning,
    JobState::kRecovering, JobState::kSucceeded, JobState::kFailed,
    JobState::kCancelled};

/// Upper-case name, as the API and the store spell it: "PENDING", ...
std::string JobStateName(JobState state);

/// True for SUCCEEDED, FAILED and CANCELLED: no transition leaves them.
bool IsTerminal(JobState state);

/// True when the diagram above has an edge `from` -> `to` (never a
/// self-loop).
bool IsLegalTransition(JobState from, JobState to);

/// OK when `from` -> `to` is legal; FailedPrecondition naming both states
/// otherwise, e.g. "illegal job state transition SUCCEEDED -> RUNNING
/// (SUCCEEDED is terminal)". Pure; thread-safe.
absl::Status Transition(JobState from, JobState to);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_STATE_H_
