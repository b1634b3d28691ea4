#ifndef ZBPP_COORDINATOR_CORE_JOB_STATE_H_
#define ZBPP_COORDINATOR_CORE_JOB_STATE_H_

#include "absl/status/status.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

// Life cycle of a training job (zbpp.v1.JobState; names and terminal
// states in api/job_state.h):
//
//     PENDING ──> ASSIGNING ──> RUNNING ──> SUCCEEDED
//        ^            │           │  ^
//        └────────────┘           v  │
//       (too few workers)      RECOVERING ──> FAILED
//
// PENDING, ASSIGNING and RUNNING may also go to FAILED (PENDING: the job
// cannot run, e.g. its schedule cannot be built); every non-terminal state
// may go to CANCELLED. SUCCEEDED, FAILED and CANCELLED are terminal.
// JOB_STATE_UNSPECIFIED is no state of a job: no edge leaves or enters it.
// A RECOVERING job whose next attempt ends too stays RECOVERING: no edge
// (Job::ChangeState tells watchers RECOVERING -> RECOVERING and counts no
// recovery). Every change goes through the Job (job.h, "State machine").

/// True when the diagram above has an edge `from` -> `to` (never a
/// self-loop). Pure; thread-safe.
bool IsLegalTransition(zbpp::v1::JobState from, zbpp::v1::JobState to);

/// OK when `from` -> `to` is legal; FailedPrecondition naming both states
/// otherwise, e.g. "illegal job state transition SUCCEEDED -> RUNNING
/// (SUCCEEDED is terminal)". Pure; thread-safe.
absl::Status Transition(zbpp::v1::JobState from, zbpp::v1::JobState to);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_STATE_H_
