#ifndef ZBPP_COORDINATOR_CORE_JOB_STATE_H_
#define ZBPP_COORDINATOR_CORE_JOB_STATE_H_

#include "absl/status/status.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

// Life cycle of a training job (zbpp.v1.JobState; names and terminal
// states in api/job_state.h):
//
//     PENDING ──> ASSIGNING ──> RUNNING ──> SUCCEEDED
//        ^            │           │  ^  ^
//        └────────────┘           v  │  │ (heal)
//       (too few workers)      RECOVERING ──> DEGRADED
//                                 │  ^─────────┘
//                                 v
//                               FAILED
//
// DEGRADED (docs/elastic.md) runs steps on fewer replicas after a recovery
// from memory; it goes RECOVERING on a fault, RUNNING once healed, and may
// end like RUNNING (SUCCEEDED, FAILED). RECOVERING may go SUCCEEDED when
// the surviving workers hold the last step's update.
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
