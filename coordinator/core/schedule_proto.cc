#include "coordinator/core/schedule_proto.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

zbpp::v1::Schedule ScheduleToProto(const sched::Schedule& schedule) {
  zbpp::v1::Schedule proto;
  proto.set_name(schedule.name);
  proto.set_workers(schedule.workers);
  proto.set_chunks(schedule.chunks);
  proto.set_microbatches(schedule.microbatches);
  for (int w : schedule.worker_of_stage) proto.add_worker_of_stage(w);
  for (const auto& actions : schedule.actions) {
    zbpp::v1::WorkerActions* out = proto.add_worker_actions();
    for (const sched::Action& a : actions) {
      out->add_actions(sched::ActionToString(a));
    }
  }
  return proto;
}

absl::StatusOr<sched::Schedule> ScheduleFromProto(
    const zbpp::v1::Schedule& proto) {
  sched::Schedule schedule;
  schedule.name = proto.name();
  schedule.workers = proto.workers();
  schedule.chunks = proto.chunks();
  schedule.microbatches = proto.microbatches();
  if (proto.worker_actions_size() != proto.workers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule.worker_actions has ", proto.worker_actions_size(),
                     " entries, schedule.workers is ", proto.workers()));
  }
  schedule.worker_of_stage.assign(proto.worker_of_stage().begin(),
                                  proto.worker_of_stage().end());
  schedule.actions.resize(proto.workers());
  for (int w = 0; w < proto.workers(); ++w) {
    for (const std::string& text : proto.worker_actions(w).actions()) {
      absl::StatusOr<sched::Action> action = sched::ParseAction(text);
      if (!action.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule.worker_actions[", w,
                         "]: ", action.status().message()));
      }
      schedule.actions[w].push_back(*action);
    }
  }
  return schedule;
}

zbpp::v1::CostModel CostModelToProto(const sched::Problem& problem) {
  zbpp::v1::CostModel proto;
  for (const sched::StageCost& cost : problem.stages) {
    zbpp::v1::StageCost* out = proto.add_stages();
    out->set_f_seconds(cost.f_seconds);
    out->set_b_seconds(cost.b_seconds);
    out->set_w_seconds(cost.w_seconds);
    out->set_m_b_bytes(cost.m_b_bytes);
    out->set_m_w_bytes(cost.m_w_bytes);
  }
  proto.set_comm_seconds(problem.comm_seconds);
  for (double limit : problem.memory_limit_bytes) {
    proto.add_memory_limit_bytes(limit);
  }
  return proto;
}

zbpp::v1::SchedulePrediction PredictionToProto(
    const sched::SimulationResult& result) {
  zbpp::v1::SchedulePrediction proto;
  proto.set_makespan_seconds(result.makespan_seconds);
  proto.set_step_seconds(result.step_seconds);
  proto.set_bubble_rate(result.bubble_rate);
  for (double idle : result.idle_seconds) {
    proto.add_worker_bubble_rate(
        result.makespan_seconds > 0 ? idle / result.makespan_seconds : 0);
  }
  for (double peak : result.peak_memory_bytes) {
    proto.add_peak_memory_bytes(peak);
  }
  proto.set_max_peak_memory_m_b(result.max_peak_memory_m_b);
  return proto;
}

}  // namespace zbpp::coordinator
