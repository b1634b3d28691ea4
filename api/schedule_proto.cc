#include "api/schedule_proto.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp {

v1::Schedule ScheduleToProto(const sched::Schedule& schedule) {
  v1::Schedule proto;
  proto.set_name(schedule.name);
  proto.set_stages(schedule.stages);
  proto.set_chunks(schedule.chunks);
  proto.set_microbatches(schedule.microbatches);
  for (int w : schedule.stage_of) proto.add_stage_of(w);
  for (const auto& actions : schedule.actions) {
    v1::StageActions* out = proto.add_stage_actions();
    for (const sched::Action& a : actions) {
      out->add_actions(sched::ActionToString(a));
    }
  }
  return proto;
}

absl::StatusOr<sched::Schedule> ScheduleFromProto(const v1::Schedule& proto) {
  sched::Schedule schedule;
  schedule.name = proto.name();
  schedule.stages = proto.stages();
  schedule.chunks = proto.chunks();
  schedule.microbatches = proto.microbatches();
  // The message comes off the wire or out of the store: check every size the
  // simulator will index by before trusting it.
  if (schedule.stages < 1 || schedule.chunks < 1 ||
      schedule.microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule.stages, schedule.chunks and schedule.microbatches must "
        "each be >= 1, got ",
        schedule.stages, ", ", schedule.chunks, " and ",
        schedule.microbatches));
  }
  if (proto.stage_of_size() != schedule.num_virtual_stages()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule.stage_of has ", proto.stage_of_size(),
        " entries, schedule.stages * schedule.chunks is ",
        schedule.num_virtual_stages()));
  }
  if (proto.stage_actions_size() != schedule.stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule.stage_actions has ", proto.stage_actions_size(),
                     " entries, schedule.stages is ", schedule.stages));
  }
  for (int s = 0; s < proto.stage_of_size(); ++s) {
    const int w = proto.stage_of(s);
    if (w < 0 || w >= schedule.stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule.stage_of[", s, "]: ", w,
                       " is not a worker in [0, ", schedule.stages, ")"));
    }
  }
  schedule.stage_of.assign(proto.stage_of().begin(),
                                  proto.stage_of().end());
  schedule.actions.resize(schedule.stages);
  for (int w = 0; w < schedule.stages; ++w) {
    for (const std::string& text : proto.stage_actions(w).actions()) {
      absl::StatusOr<sched::Action> action = sched::ParseAction(text);
      if (!action.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("schedule.stage_actions[", w,
                         "]: ", action.status().message()));
      }
      schedule.actions[w].push_back(*action);
    }
  }
  return schedule;
}

v1::CostModel CostModelToProto(const sched::Problem& problem) {
  v1::CostModel proto;
  for (const sched::VirtualStageCost& cost : problem.virtual_stages) {
    v1::VirtualStageCost* out = proto.add_virtual_stages();
    out->set_f_seconds(cost.f_seconds);
    out->set_b_seconds(cost.b_seconds);
    out->set_w_seconds(cost.w_seconds);
    out->set_m_b_bytes(cost.m_b_bytes);
    out->set_m_w_bytes(cost.m_w_bytes);
    out->set_reduce_seconds(cost.reduce_seconds);
    out->set_bw_seconds(cost.bw_seconds);
    out->set_transient_bytes(cost.transient_bytes);
  }
  proto.set_comm_seconds(problem.comm_seconds);
  for (double limit : problem.memory_limit_bytes) {
    proto.add_memory_limit_bytes(limit);
  }
  for (const sched::VocabularyCost& cost : problem.vocabulary) {
    v1::VocabularyCost* out = proto.add_vocabulary();
    out->set_s_seconds(cost.s_seconds);
    out->set_t_seconds(cost.t_seconds);
    out->set_m_bytes(cost.m_bytes);
    out->set_transient_bytes(cost.transient_bytes);
  }
  return proto;
}

absl::StatusOr<sched::Problem> ProblemFromCostModel(
    const v1::Schedule& schedule, const v1::CostModel& cost_model) {
  sched::Problem problem;
  problem.stages = schedule.stages();
  problem.chunks = schedule.chunks();
  problem.microbatches = schedule.microbatches();
  problem.comm_seconds = cost_model.comm_seconds();
  const int stages = problem.num_virtual_stages();
  if (cost_model.virtual_stages_size() == 0) {
    problem.virtual_stages.assign(stages, sched::VirtualStageCost{});
  } else if (cost_model.virtual_stages_size() != stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model has ", cost_model.virtual_stages_size(),
                     " stages; the schedule has ", stages));
  }
  for (const v1::VirtualStageCost& c : cost_model.virtual_stages()) {
    problem.virtual_stages.push_back({c.f_seconds(), c.b_seconds(), c.w_seconds(),
                              c.m_b_bytes(), c.m_w_bytes(), c.reduce_seconds(),
                              c.bw_seconds(), c.transient_bytes()});
  }
  if (cost_model.memory_limit_bytes_size() != 0 &&
      cost_model.memory_limit_bytes_size() != problem.stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost model has ", cost_model.memory_limit_bytes_size(),
        " memory limits; the schedule has ", problem.stages, " workers"));
  }
  problem.memory_limit_bytes.assign(cost_model.memory_limit_bytes().begin(),
                                    cost_model.memory_limit_bytes().end());
  if (cost_model.vocabulary_size() != 0 && cost_model.vocabulary_size() != problem.stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost model has vocabulary costs for ", cost_model.vocabulary_size(),
        " stages; the schedule has ", problem.stages));
  }
  for (const v1::VocabularyCost& c : cost_model.vocabulary()) {
    problem.vocabulary.push_back({c.s_seconds(), c.t_seconds(), c.m_bytes(), c.transient_bytes()});
  }
  return problem;
}

v1::SchedulePrediction PredictionToProto(
    const sched::SimulationResult& result) {
  v1::SchedulePrediction proto;
  proto.set_makespan_seconds(result.makespan_seconds);
  proto.set_step_seconds(result.step_seconds);
  proto.set_bubble_rate(result.bubble_rate);
  for (double idle : result.idle_seconds) {
    proto.add_stage_bubble_rate(
        result.makespan_seconds > 0 ? idle / result.makespan_seconds : 0);
  }
  for (double peak : result.peak_running_memory_bytes) {
    proto.add_peak_memory_bytes(peak);
  }
  proto.set_max_peak_memory_m_b(result.max_peak_memory_m_b);
  proto.set_exposed_reduce_seconds(result.exposed_reduce_seconds);
  return proto;
}

absl::StatusOr<TimedSchedule> SimulatedVersion(const v1::ScheduleVersion& version) {
  absl::StatusOr<sched::Schedule> schedule = ScheduleFromProto(version.schedule());
  if (!schedule.ok()) return schedule.status();
  absl::StatusOr<sched::Problem> problem =
      ProblemFromCostModel(version.schedule(), version.cost_model());
  if (!problem.ok()) return problem.status();
  absl::StatusOr<sched::SimulationResult> timing = sched::Simulate(*problem, *schedule);
  if (!timing.ok()) return timing.status();
  return TimedSchedule{*std::move(schedule), *std::move(timing)};
}

absl::StatusOr<TimedSchedule> MeasuredLastStep(const v1::Job& job,
                                               const v1::ScheduleVersion& ran) {
  const v1::StepTimeline& timeline = job.last_step_timeline();
  if (timeline.stages_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id(), " has no measured step yet (state ", v1::JobState_Name(job.state()),
        ")"));
  }
  if (timeline.schedule_version() != ran.version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the last step (", timeline.step(), ") ran schedule version ",
        timeline.schedule_version(), ", not version ", ran.version()));
  }
  absl::StatusOr<sched::Schedule> schedule = ScheduleFromProto(ran.schedule());
  if (!schedule.ok()) return schedule.status();
  schedule->name = absl::StrCat(schedule->name, " v", ran.version(), " step ", timeline.step(),
                                " (measured)");
  sched::SimulationResult measured;
  measured.timings.resize(timeline.stages_size());
  for (int s = 0; s < timeline.stages_size(); ++s) {
    const v1::StageTimeline& stage = timeline.stages(s);
    const int n = std::min(stage.action_start_seconds_size(), stage.action_end_seconds_size());
    for (int i = 0; i < n; ++i) {
      measured.timings[s].push_back({stage.action_start_seconds(i), stage.action_end_seconds(i)});
      measured.makespan_seconds = std::max(measured.makespan_seconds, stage.action_end_seconds(i));
    }
  }
  measured.bubble_rate = job.last_step().measured_bubble_rate();
  return TimedSchedule{*std::move(schedule), std::move(measured)};
}

}  // namespace zbpp
