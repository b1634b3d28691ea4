#ifndef ZBPP_COORDINATOR_CORE_SCHEDULE_PROTO_H_
#define ZBPP_COORDINATOR_CORE_SCHEDULE_PROTO_H_

#include "absl/status/statusor.h"
#include "coordinator/core/predicted_stats.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator {

/// `schedule` as the API's message (actions in PyTorch pipelining's text
/// form, scheduler/schedule.h ActionToString). Pure.
zbpp::v1::Schedule ScheduleToProto(const sched::Schedule& schedule);

/// Inverse of ScheduleToProto. InvalidArgument for an unparsable action or
/// sizes that disagree with `workers` (naming the field). Pure.
absl::StatusOr<sched::Schedule> ScheduleFromProto(
    const zbpp::v1::Schedule& proto);

/// The cost part of `problem` (stages, comm, limits) as the API's message.
zbpp::v1::CostModel CostModelToProto(const sched::Problem& problem);

/// The simulator's figures for the API: makespan, step, bubble rate, and
/// per-rank bubble rate (idle / makespan) and peak memory.
zbpp::v1::SchedulePrediction PredictionToProto(
    const sched::SimulationResult& result);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_SCHEDULE_PROTO_H_
