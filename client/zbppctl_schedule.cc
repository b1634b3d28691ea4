#include "client/zbppctl_schedule.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/zbppctl_tables.h"
#include "scheduler/export_svg.h"
#include "scheduler/export_trace.h"
#include "scheduler/simulator.h"

namespace zbpp::ctl {
namespace {

std::string TableOf(const v1::ScheduleVersion& version) {
  const v1::Schedule& s = version.schedule();
  const v1::SchedulePrediction& predicted = version.predicted();
  std::string text = absl::StrCat(
      "job ", version.job_id(), " schedule v", version.version(), " from step ",
      version.effective_step(), " (",
      ShortEnumName(v1::ScheduleChangeReason_Name(version.reason()),
                    "SCHEDULE_CHANGE_REASON_"),
      version.reason_detail().empty() ? "" : ": " + version.reason_detail(),
      ")\n");
  absl::StrAppend(&text, s.name(), ": ", s.workers(), " workers x ", s.chunks(),
                  " chunks, ", s.microbatches(), " microbatches\n");
  absl::StrAppendFormat(&text,
                        "predicted: step %.4f s, makespan %.4f s, bubble rate "
                        "%.4f, peak %.2f M_B\n",
                        predicted.step_seconds(), predicted.makespan_seconds(),
                        predicted.bubble_rate(),
                        predicted.max_peak_memory_m_b());
  for (int w = 0; w < s.worker_actions_size(); ++w) {
    absl::StrAppend(&text, "worker ", w, ": ",
                    absl::StrJoin(s.worker_actions(w).actions(), " "), "\n");
  }
  return text;
}

}  // namespace

absl::StatusOr<sched::Schedule> ScheduleFromProto(const v1::Schedule& proto) {
  sched::Schedule schedule;
  schedule.name = proto.name();
  schedule.workers = proto.workers();
  schedule.chunks = proto.chunks();
  schedule.microbatches = proto.microbatches();
  if (schedule.workers < 1 || schedule.chunks < 1 ||
      schedule.microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule has ", schedule.workers, " workers, ",
                     schedule.chunks, " chunks and ", schedule.microbatches,
                     " microbatches; each must be >= 1"));
  }
  if (proto.worker_of_stage_size() != schedule.num_stages() ||
      proto.worker_actions_size() != schedule.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule lists ", proto.worker_of_stage_size(),
                     " stage placements and ", proto.worker_actions_size(),
                     " workers' actions; expected ", schedule.num_stages(),
                     " and ", schedule.workers));
  }
  schedule.worker_of_stage.assign(proto.worker_of_stage().begin(),
                                  proto.worker_of_stage().end());
  schedule.actions.resize(schedule.workers);
  for (int w = 0; w < schedule.workers; ++w) {
    for (const std::string& text : proto.worker_actions(w).actions()) {
      absl::StatusOr<sched::Action> action = sched::ParseAction(text);
      if (!action.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("worker ", w, ": ", action.status().message()));
      }
      schedule.actions[w].push_back(*action);
    }
  }
  return schedule;
}

absl::StatusOr<sched::Problem> ProblemFromProto(
    const v1::Schedule& schedule, const v1::CostModel& cost_model) {
  sched::Problem problem;
  problem.workers = schedule.workers();
  problem.chunks = schedule.chunks();
  problem.microbatches = schedule.microbatches();
  problem.comm_seconds = cost_model.comm_seconds();
  const int stages = problem.num_stages();
  if (cost_model.stages_size() == 0) {
    problem.stages.assign(stages, sched::StageCost{});
  } else if (cost_model.stages_size() != stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost model has ", cost_model.stages_size(),
                     " stages; the schedule has ", stages));
  }
  for (const v1::StageCost& c : cost_model.stages()) {
    problem.stages.push_back({c.f_seconds(), c.b_seconds(), c.w_seconds(),
                              c.m_b_bytes(), c.m_w_bytes()});
  }
  if (cost_model.memory_limit_bytes_size() != 0 &&
      cost_model.memory_limit_bytes_size() != problem.workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost model has ", cost_model.memory_limit_bytes_size(),
        " memory limits; the schedule has ", problem.workers, " workers"));
  }
  problem.memory_limit_bytes.assign(cost_model.memory_limit_bytes().begin(),
                                    cost_model.memory_limit_bytes().end());
  return problem;
}

absl::StatusOr<std::string> RenderSchedule(const v1::ScheduleVersion& version,
                                           const std::string& format) {
  if (format == "table") return TableOf(version);
  if (format != "svg" && format != "chrome-trace") {
    return absl::InvalidArgumentError("unknown schedule format \"" + format +
                                      "\"");
  }
  absl::StatusOr<sched::Schedule> schedule =
      ScheduleFromProto(version.schedule());
  if (!schedule.ok()) return schedule.status();
  absl::StatusOr<sched::Problem> problem =
      ProblemFromProto(version.schedule(), version.cost_model());
  if (!problem.ok()) return problem.status();
  absl::StatusOr<sched::SimulationResult> result =
      sched::Simulate(*problem, *schedule);
  if (!result.ok()) return result.status();
  return format == "svg" ? sched::ToSvg(*schedule, *result)
                         : sched::ToChromeTrace(*schedule, *result);
}

}  // namespace zbpp::ctl
