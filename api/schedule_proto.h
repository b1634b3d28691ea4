// The one conversion between the scheduler's types and the API's messages
// (zbpp.v1.Schedule, CostModel, SchedulePrediction), shared by the
// coordinator, which publishes schedule versions, and zbppctl, which reads
// them back to simulate and draw. Protobuf messages only, never grpcpp.

#ifndef ZBPP_API_SCHEDULE_PROTO_H_
#define ZBPP_API_SCHEDULE_PROTO_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp {

/// `schedule` as the API's message (actions in PyTorch pipelining's text
/// form, scheduler/schedule.h ActionToString). Pure.
v1::Schedule ScheduleToProto(const sched::Schedule& schedule);

/// Inverse of ScheduleToProto, each action parsed with sched::ParseAction.
/// Errors: InvalidArgument naming the field when schedule.stages,
/// schedule.chunks or schedule.microbatches is below 1, when
/// schedule.stage_of does not have workers * chunks entries or
/// schedule.stage_actions not `workers`, and for an unparsable action
/// ("schedule.stage_actions[w]: " and ParseAction's message). Pure.
absl::StatusOr<sched::Schedule> ScheduleFromProto(const v1::Schedule& proto);

/// The cost part of `problem` (per-stage costs with their data-parallel
/// reduce_seconds, comm seconds, memory limits) as the API's message. Pure.
v1::CostModel CostModelToProto(const sched::Problem& problem);

/// Inverse of CostModelToProto: the simulator's problem for `schedule` under
/// `cost_model`, its shape (p, v, m) from the schedule. A cost model without
/// stages gives unit costs (sched::VirtualStageCost{}: T_F = T_B = T_W = 1,
/// M_W = M_B / 2), enough to draw the order. Errors: InvalidArgument when
/// the cost model lists another number of stages or memory limits than the
/// schedule needs. Pure.
absl::StatusOr<sched::Problem> ProblemFromCostModel(
    const v1::Schedule& schedule, const v1::CostModel& cost_model);

/// The simulator's figures for the API: makespan, step, bubble rate, the
/// seconds the data-parallel reductions add to the step, and per-stage
/// bubble rate (idle / makespan; 0 for a zero makespan) and peak memory in
/// bytes. Pure.
v1::SchedulePrediction PredictionToProto(const sched::SimulationResult& result);

/// A schedule with the time of every action: what the SVG and Chrome-trace
/// exporters draw.
struct TimedSchedule {
  sched::Schedule schedule;
  sched::SimulationResult timing;
};

/// `version`'s schedule simulated under its own cost model (the plan).
/// Errors: those of ScheduleFromProto, ProblemFromCostModel and Simulate.
absl::StatusOr<TimedSchedule> SimulatedVersion(const v1::ScheduleVersion& version);

/// The job's last completed step as its stages measured it
/// (Job.last_step_timeline, FULL view; seconds from each stage's own step
/// start), its actions named by `ran`, the schedule version that step ran
/// (StepTimeline.schedule_version, read back with JobService
/// GetScheduleVersion when the job published another since): named
/// "<schedule> v<N> step S (measured)". FailedPrecondition before the first
/// step or when `ran` is another version than the step ran;
/// ScheduleFromProto's errors. Pure.
absl::StatusOr<TimedSchedule> MeasuredLastStep(const v1::Job& job,
                                               const v1::ScheduleVersion& ran);

}  // namespace zbpp

#endif  // ZBPP_API_SCHEDULE_PROTO_H_
