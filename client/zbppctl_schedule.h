// `zbppctl schedule JOB`: a published ScheduleVersion back in the
// scheduler's own types (api/schedule_proto.h), simulated under its cost
// model and rendered.

#ifndef ZBPP_CLIENT_ZBPPCTL_SCHEDULE_H_
#define ZBPP_CLIENT_ZBPPCTL_SCHEDULE_H_

#include <string>

#include "absl/status/statusor.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::ctl {

/// How pictures and reports name a version: "v3 (CALIBRATION, from step
/// 0)" (number, ScheduleChangeReason without its prefix, effective step).
std::string VersionLabel(const v1::ScheduleVersion& version);

/// `version` rendered as `format`:
///   "table": a header (job, version, effective step, reason, name, p, v, m,
///            the coordinator's prediction) and one line of actions per
///            worker in their text form;
///   "svg":   sched::ToSvg of the schedule simulated under its cost model,
///            titled "<name> <VersionLabel> as planned" with the makespan
///            (the version's prediction: measured costs for a CALIBRATION
///            or RESOLVE version, the analytic model for an INITIAL one);
///   "chrome-trace": sched::ToChromeTrace of the same, named alike.
/// Errors: those of ScheduleFromProto and ProblemFromCostModel, Simulate's
/// (e.g. FailedPrecondition for a deadlock), InvalidArgument for another
/// format.
absl::StatusOr<std::string> RenderSchedule(const v1::ScheduleVersion& version,
                                           const std::string& format);

/// Chrome trace of the job's last completed step as the workers measured it
/// (Job.last_step_timeline, FULL view): one row per stage, each stage's
/// clock from its own step start, the actions named by `ran`, the schedule
/// version that step ran (StepTimeline.schedule_version), whatever the job
/// published after it. Before each stage's step start, the gap before the
/// step as slices named by phase ("grant latency", "validation", ...; cat
/// "between steps"; StageTimeline.breakdown), the whole trace shifted right
/// by the longest gap (otherData.gap_offset_seconds). MeasuredLastStep's
/// errors: FailedPrecondition before the first step or when `ran` is
/// another version.
absl::StatusOr<std::string> RenderMeasuredTrace(const v1::Job& job,
                                                const v1::ScheduleVersion& ran);

/// The cost model of `version` (measured costs after a re-solve, the job
/// spec's analytic model for a first version) as a cost file of
/// `zbpp-sched --costs` (sched::cli::CostFileYaml: per virtual stage, comm,
/// memory limits), after a comment line naming the job, the version and its
/// schedule. FailedPrecondition when the version carries no cost model;
/// ProblemFromCostModel's errors.
absl::StatusOr<std::string> RenderCostFile(const v1::ScheduleVersion& version);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_SCHEDULE_H_
