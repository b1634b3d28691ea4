// The job states of the API (zbpp.v1.JobState) as every module names and
// reads them: the coordinator (its state machine, metrics, schedule page),
// zbppctl and the tests.

#ifndef ZBPP_API_JOB_STATE_H_
#define ZBPP_API_JOB_STATE_H_

#include <string>

#include "zbpp/v1/job.pb.h"

namespace zbpp {

/// Every state a job can be in (JOB_STATE_UNSPECIFIED left out), in life
/// cycle order: for tables and metric labels.
inline constexpr v1::JobState kAllJobStates[] = {
    v1::JOB_STATE_PENDING,    v1::JOB_STATE_ASSIGNING, v1::JOB_STATE_RUNNING,
    v1::JOB_STATE_DEGRADED,   v1::JOB_STATE_RECOVERING, v1::JOB_STATE_SUCCEEDED,
    v1::JOB_STATE_FAILED,     v1::JOB_STATE_CANCELLED};

/// The state's upper-case name without the "JOB_STATE_" prefix, as the
/// store, zbppctl and the metric labels spell it: "PENDING", "RUNNING", ...
/// A value outside the enum gives "". Pure; thread-safe.
std::string JobStateName(v1::JobState state);

/// True for RUNNING and DEGRADED (running steps on fewer replicas,
/// docs/elastic.md): an attempt of the job trains. Pure; thread-safe.
bool IsRunning(v1::JobState state);

/// True for SUCCEEDED, FAILED and CANCELLED: a job in one of them never
/// changes state again. Pure; thread-safe.
bool IsTerminal(v1::JobState state);

}  // namespace zbpp

#endif  // ZBPP_API_JOB_STATE_H_
