// `zbppctl schedule JOB`: a published ScheduleVersion back in the
// scheduler's own types, simulated under its cost model and rendered.

#ifndef ZBPP_CLIENT_ZBPPCTL_SCHEDULE_H_
#define ZBPP_CLIENT_ZBPPCTL_SCHEDULE_H_

#include <string>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::ctl {

/// `schedule` as a sched::Schedule, each action parsed with ParseAction.
/// Errors: InvalidArgument for a bad action text (ParseAction's message,
/// prefixed with the worker) or sizes that disagree with workers * chunks.
absl::StatusOr<sched::Schedule> ScheduleFromProto(const v1::Schedule& schedule);

/// The simulator's problem for `schedule` under `cost_model`: shape from the
/// schedule, per-stage costs, comm seconds and limits from the cost model.
/// A cost model without stages gives unit costs (T_F = T_B = T_W = 1,
/// M_W = M_B / 2), enough to draw the order. Errors: InvalidArgument when
/// the cost model lists another number of stages or limits than the
/// schedule needs.
absl::StatusOr<sched::Problem> ProblemFromProto(
    const v1::Schedule& schedule, const v1::CostModel& cost_model);

/// `version` rendered as `format`:
///   "table": a header (job, version, effective step, reason, name, p, v, m,
///            the coordinator's prediction) and one line of actions per
///            worker in their text form;
///   "svg":   sched::ToSvg of the schedule simulated under its cost model;
///   "chrome-trace": sched::ToChromeTrace of the same.
/// Errors: those of ScheduleFromProto and ProblemFromProto, Simulate's
/// (e.g. FailedPrecondition for a deadlock), InvalidArgument for another
/// format.
absl::StatusOr<std::string> RenderSchedule(const v1::ScheduleVersion& version,
                                           const std::string& format);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_SCHEDULE_H_
