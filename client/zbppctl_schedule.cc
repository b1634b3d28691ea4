#include "client/zbppctl_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/zbppctl_tables.h"
#include "common/schedule_proto.h"
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
      ProblemFromCostModel(version.schedule(), version.cost_model());
  if (!problem.ok()) return problem.status();
  absl::StatusOr<sched::SimulationResult> result =
      sched::Simulate(*problem, *schedule);
  if (!result.ok()) return result.status();
  return format == "svg" ? sched::ToSvg(*schedule, *result)
                         : sched::ToChromeTrace(*schedule, *result);
}

absl::StatusOr<std::string> RenderMeasuredTrace(const v1::Job& job) {
  const v1::StepTimeline& timeline = job.last_step_timeline();
  if (timeline.ranks_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id(), " has no measured step yet (state ", JobStateName(job.state()), ")"));
  }
  if (timeline.schedule_version() != job.schedule().version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the last step (", timeline.step(), ") ran schedule version ",
        timeline.schedule_version(), ", the job now holds version ", job.schedule().version()));
  }
  absl::StatusOr<sched::Schedule> schedule = ScheduleFromProto(job.schedule().schedule());
  if (!schedule.ok()) return schedule.status();
  schedule->name = absl::StrCat(schedule->name, " step ", timeline.step(), " (measured)");
  sched::SimulationResult measured;
  measured.timings.resize(timeline.ranks_size());
  double makespan = 0;
  for (int r = 0; r < timeline.ranks_size(); ++r) {
    const v1::RankTimeline& rank = timeline.ranks(r);
    for (int i = 0; i < rank.action_start_seconds_size() && i < rank.action_end_seconds_size();
         ++i) {
      measured.timings[r].push_back({rank.action_start_seconds(i), rank.action_end_seconds(i)});
      makespan = std::max(makespan, rank.action_end_seconds(i));
    }
  }
  measured.makespan_seconds = makespan;
  measured.bubble_rate = job.last_step().measured_bubble_rate();
  return sched::ToChromeTrace(*schedule, measured);
}

}  // namespace zbpp::ctl
