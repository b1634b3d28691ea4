#include "client/zbppctl_schedule.h"

#include <algorithm>

#include "nlohmann/json.hpp"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/schedule_proto.h"
#include "api/step_breakdown.h"
#include "client/zbppctl_tables.h"
#include "scheduler/cli/costs_file.h"
#include "scheduler/export_svg.h"
#include "scheduler/export_trace.h"
#include "scheduler/simulator.h"

namespace zbpp::ctl {
namespace {

using Json = nlohmann::ordered_json;

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
  absl::StrAppend(&text, s.name(), ": ", s.stages(), " stages x ", s.chunks(),
                  " chunks, ", s.microbatches(), " microbatches\n");
  absl::StrAppendFormat(&text,
                        "predicted: step %.4f s, makespan %.4f s, bubble rate "
                        "%.4f, peak %.2f M_B\n",
                        predicted.step_seconds(), predicted.makespan_seconds(),
                        predicted.bubble_rate(),
                        predicted.max_peak_memory_m_b());
  for (int w = 0; w < s.stage_actions_size(); ++w) {
    absl::StrAppend(&text, "stage ", w, ": ",
                    absl::StrJoin(s.stage_actions(w).actions(), " "), "\n");
  }
  return text;
}

// The gap before the step (StepBreakdown's second part) drawn on each
// stage's row, ending at the stage's step start: one slice per phase with
// time in it, in the order the phases run. Chrome traces start at 0, so
// every event moves right by the longest gap; otherData says by how much
// (gap_offset_seconds).
std::string WithGapPhases(const std::string& trace, const v1::StepTimeline& timeline) {
  double offset = 0;
  for (const v1::StageTimeline& stage : timeline.stages()) {
    offset = std::max(offset, stage.breakdown().gap_seconds());
  }
  if (!(offset > 0)) return trace;
  Json json = Json::parse(trace);
  Json& events = json["traceEvents"];
  for (Json& event : events) {
    if (event.contains("ts")) event["ts"] = event["ts"].get<double>() + offset * 1e6;
  }
  for (int s = 0; s < timeline.stages_size(); ++s) {
    const v1::StepBreakdown& b = timeline.stages(s).breakdown();
    double at = offset - b.gap_seconds();
    for (const BreakdownPart& part : GapParts()) {
      const double seconds = part.Of(b);
      if (!(seconds > 0)) continue;
      events.push_back({{"name", part.label},
                        {"cat", "between steps"},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", s},
                        {"ts", at * 1e6},
                        {"dur", seconds * 1e6},
                        {"cname", "grey"},
                        {"args", {{"phase", part.field}, {"seconds", seconds}}}});
      at += seconds;
    }
  }
  json["otherData"]["gap_offset_seconds"] = offset;
  return json.dump();
}

}  // namespace

std::string VersionLabel(const v1::ScheduleVersion& version) {
  return absl::StrCat(
      "v", version.version(), " (",
      ShortEnumName(v1::ScheduleChangeReason_Name(version.reason()), "SCHEDULE_CHANGE_REASON_"),
      ", from step ", version.effective_step(), ")");
}

absl::StatusOr<std::string> RenderSchedule(const v1::ScheduleVersion& version,
                                           const std::string& format) {
  if (format == "table") return TableOf(version);
  if (format != "svg" && format != "chrome-trace") {
    return absl::InvalidArgumentError("unknown schedule format \"" + format +
                                      "\"");
  }
  absl::StatusOr<TimedSchedule> planned = SimulatedVersion(version);
  if (!planned.ok()) return planned.status();
  // The exporters' title is the name, then the simulated makespan: this
  // version's prediction under the cost model it was planned with.
  planned->schedule.name =
      absl::StrCat(planned->schedule.name, " ", VersionLabel(version), " as planned");
  return format == "svg" ? sched::ToSvg(planned->schedule, planned->timing)
                         : sched::ToChromeTrace(planned->schedule, planned->timing);
}

absl::StatusOr<std::string> RenderMeasuredTrace(const v1::Job& job,
                                                const v1::ScheduleVersion& ran) {
  absl::StatusOr<TimedSchedule> measured = MeasuredLastStep(job, ran);
  if (!measured.ok()) return measured.status();
  const std::string trace = sched::ToChromeTrace(measured->schedule, measured->timing);
  return WithGapPhases(trace, job.last_step_timeline());
}

absl::StatusOr<std::string> RenderCostFile(const v1::ScheduleVersion& version) {
  if (version.cost_model().virtual_stages_size() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "schedule version ", version.version(), " carries no cost model"));
  }
  absl::StatusOr<sched::Problem> problem =
      ProblemFromCostModel(version.schedule(), version.cost_model());
  if (!problem.ok()) return problem.status();
  return absl::StrCat("# job ", version.job_id(), ", schedule version ",
                      version.version(), " (", version.schedule().name(),
                      ") from step ", version.effective_step(), "\n",
                      sched::cli::CostFileYaml(*problem));
}

}  // namespace zbpp::ctl
