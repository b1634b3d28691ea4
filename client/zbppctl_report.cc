#include "client/zbppctl_report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "api/time_proto.h"
#include "client/zbppctl_schedule.h"
#include "client/zbppctl_tables.h"
#include "common/text_table.h"

namespace zbpp::ctl {
namespace {

// A bubble rate to 4 decimals; a rounding error below zero (the simulator's
// 1 - busy / span) prints as 0.0000, not -0.0000.
std::string Rate(double value) {
  return Number("%.4f", std::abs(value) < 0.00005 ? 0.0 : value);
}

std::string Loss(std::optional<double> value) {
  return value.has_value() ? Number("%.4f", *value) : "-";
}

// "POST (policy AUTO): 3 rollbacks, 1 skipped, 2 clipped; 2 recoveries (1
// restart, 5 steps degraded); 2 schedule versions (the last step ran v2)";
// the degraded steps only when there were some (docs/elastic.md).
std::string ValidationLine(const TrainingReport& r) {
  return absl::StrCat(
      ValidationSummary(r.validation_mode, r.validation_policy, r.rollbacks, r.skipped_steps,
                        r.clipped_steps),
      "; ", r.recoveries, r.recoveries == 1 ? " recovery (" : " recoveries (", r.restarts,
      r.restarts == 1 ? " restart" : " restarts",
      r.degraded_steps > 0 ? absl::StrCat(", ", r.degraded_steps,
                                          r.degraded_steps == 1 ? " step" : " steps", " degraded")
                           : std::string(),
      "); ",
      r.schedule_versions, r.schedule_versions == 1 ? " schedule version" : " schedule versions",
      " (the last step ran v", r.last_step_schedule_version, ")");
}

// The version among `versions` that ran `step`, as the report shows it;
// unset when absent.
std::optional<VersionRan> FindVersion(const std::vector<v1::ScheduleVersion>& versions,
                                      const v1::StepSummary& step) {
  for (const v1::ScheduleVersion& v : versions) {
    if (v.version() != step.schedule_version()) continue;
    return VersionRan{step.step(),
                      VersionLabel(v),
                      v.version(),
                      ShortEnumName(v1::ScheduleChangeReason_Name(v.reason()),
                                    "SCHEDULE_CHANGE_REASON_"),
                      v.effective_step(),
                      v.predicted().step_seconds(),
                      v.predicted().makespan_seconds(),
                      v.predicted().bubble_rate()};
  }
  return std::nullopt;
}

// The versions that ran the first and the last step, and the measured step
// of the window's steps that ran the last one (the window ends with the
// last step, so there is at least one).
void AddVersionsRan(const std::vector<v1::StepSummary>& steps,
                    const std::vector<v1::StepSummary>& window,
                    const std::vector<v1::ScheduleVersion>& versions, TrainingReport& r) {
  r.first_step_version = FindVersion(versions, steps.front());
  r.last_step_version = FindVersion(versions, steps.back());
  std::vector<double> times, predicted;
  for (const v1::StepSummary& s : window) {
    if (s.schedule_version() != steps.back().schedule_version()) continue;
    times.push_back(s.step_seconds());
    predicted.push_back(s.predicted_step_seconds());
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  r.last_version_step_seconds = median(times);
  r.last_version_measured_prediction_seconds = median(predicted);
  r.last_version_window_steps = static_cast<int64_t>(times.size());
}

// "step 99 ran v3 (RESOLVE, from step 40): predicted step 0.4400 s, makespan 0.4300 s,
// bubble rate 0.1000", and for the last step "; measured 0.4650 s (median of
// its 18 steps in the window), 1.057x the prediction; 1.012x its prediction
// under the measured costs (0.4595 s)".
std::string VersionRanLine(const VersionRan& v, const TrainingReport* last) {
  std::string line = absl::StrCat("step ", v.step, " ran ", v.label, ": predicted step ",
                                  Number("%.4f", v.predicted_step_seconds), " s, makespan ",
                                  Number("%.4f", v.predicted_makespan_seconds),
                                  " s, bubble rate ", Rate(v.predicted_bubble_rate));
  if (last != nullptr) {
    absl::StrAppend(&line, "; measured ", Number("%.4f", last->last_version_step_seconds),
                    " s (median of its ", last->last_version_window_steps,
                    last->last_version_window_steps == 1 ? " step" : " steps",
                    " in the window)");
    if (v.predicted_step_seconds > 0) {
      absl::StrAppend(&line, ", ",
                      Number("%.3f", last->last_version_step_seconds / v.predicted_step_seconds),
                      "x the prediction");
    }
    if (const double measured = last->last_version_measured_prediction_seconds; measured > 0) {
      absl::StrAppend(&line, "; ", Number("%.3f", last->last_version_step_seconds / measured),
                      "x its prediction under the measured costs (", Number("%.4f", measured),
                      " s)");
    }
  }
  return line + "\n";
}

}  // namespace

absl::StatusOr<TrainingReport> BuildReport(const v1::Job& job,
                                           const std::vector<v1::StepSummary>& steps,
                                           const std::vector<v1::ScheduleVersion>& read_back) {
  if (steps.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id(), " has no completed step yet (state ", JobStateName(job.state()), ")"));
  }
  TrainingReport r;
  r.job_id = job.id();
  r.state = JobStateName(job.state());
  r.schedule = job.spec().schedule().name();
  r.stages = job.spec().pipeline().stages();
  r.replicas = DataParallelOf(job.spec().pipeline());
  r.microbatches = job.spec().pipeline().microbatches();
  r.steps = job.steps_completed();
  r.recoveries = job.recoveries_total();
  r.restarts = job.restarts_total();
  r.degraded_steps = job.degraded_steps();
  r.replicas_active = job.replicas_active();
  r.validation_mode = ValidationModeName(job.validation_mode());
  r.validation_policy = ValidationPolicyName(job.spec());
  r.precision = PrecisionName(job.spec());
  r.transport = ShortEnumName(v1::Transport_Name(job.transport()), "TRANSPORT_");
  r.transport_reason = job.transport_reason();
  r.layout.assign(job.layout().begin(), job.layout().end());
  r.layout_reason = job.layout_reason();
  r.better_layout.assign(job.better_layout().begin(), job.better_layout().end());
  r.better_layout_reason = job.better_layout_reason();
  r.rollbacks = job.rollbacks_total();
  r.skipped_steps = job.skipped_steps_total();
  r.clipped_steps = job.clipped_steps_total();
  if (job.has_param_checksum()) r.param_checksum = job.param_checksum();
  r.transitions.assign(job.transitions().begin(), job.transitions().end());
  // One summary per completed step from the first the job ran (a resumed
  // job starts after its resume step).
  const int64_t first_step = job.spec().checkpoint().has_resume_step()
                                 ? job.spec().checkpoint().resume_step() + 1
                                 : 0;
  std::set<int64_t> stored;
  for (const v1::StepSummary& s : steps) {
    if (s.step() >= first_step && s.step() < job.steps_completed()) stored.insert(s.step());
  }
  r.missing_steps = std::max<int64_t>(job.steps_completed() - first_step, 0) -
                    static_cast<int64_t>(stored.size());
  r.history_complete = r.missing_steps == 0;
  std::set<int64_t> versions;
  for (const v1::StepSummary& s : steps) versions.insert(s.schedule_version());
  r.schedule_versions = static_cast<int64_t>(versions.size());
  r.last_step_schedule_version = steps.back().schedule_version();
  r.loss_start = steps.front().loss();
  r.loss_end = steps.back().loss();
  for (const v1::StepSummary& s : steps) {
    if (!s.has_eval_loss()) continue;
    if (!r.eval_loss_start.has_value()) r.eval_loss_start = s.eval_loss();
    r.eval_loss = s.eval_loss();
  }

  const size_t skip = std::min(steps.size() - 1, steps.size() / 10);
  const std::vector<v1::StepSummary> window(steps.begin() + skip, steps.end());
  r.window_steps = static_cast<int64_t>(window.size());
  const double tokens_per_step = double(r.replicas) *
                                 job.spec().pipeline().microbatches() *
                                 job.spec().pipeline().microbatch_size() *
                                 job.spec().model().seq_len();
  const double wall =
      absl::ToDoubleSeconds(FromTimestamp(window.back().complete_time()) -
                            FromTimestamp(window.front().complete_time()));
  if (window.size() >= 2 && wall > 0) {
    r.tokens_per_second = tokens_per_step * double(window.size() - 1) / wall;
  } else {
    r.tokens_per_second = window.back().tokens_per_second();
  }
  std::vector<double> times;
  for (const v1::StepSummary& s : window) times.push_back(s.step_seconds());
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  r.step_seconds = times[times.size() / 2];

  // Per-stage means over the window.
  std::vector<std::vector<double>*> means = {&r.bubble_rate_measured, &r.bubble_rate_predicted,
                                             &r.reduce_seconds, &r.exposed_reduce_seconds};
  for (std::vector<double>* mean : means) mean->assign(r.stages, 0.0);
  std::vector<int> counts(r.stages, 0);
  for (const v1::StepSummary& s : window) {
    for (const v1::StageStepStats& stage : s.stages()) {
      if (stage.stage() < 0 || stage.stage() >= r.stages) continue;
      const double values[] = {stage.measured_bubble_rate(), stage.predicted_bubble_rate(),
                               stage.reduce_seconds(), stage.exposed_reduce_seconds()};
      for (size_t i = 0; i < means.size(); ++i) (*means[i])[stage.stage()] += values[i];
      ++counts[stage.stage()];
    }
  }
  for (int w = 0; w < r.stages; ++w) {
    if (counts[w] == 0) continue;
    for (std::vector<double>* mean : means) (*mean)[w] /= counts[w];
  }
  r.breakdown = BuildBreakdown(window, r.stages);
  AddVersionsRan(steps, window, read_back, r);
  r.activation_memory = BuildActivationMemory(window, r.stages);
  return r;
}

std::string ReportTable(const TrainingReport& r) {
  std::string text = absl::StrCat(
      "job ", r.job_id, " ", r.state, ": ", r.steps, " steps of ", r.schedule, " on ",
      r.workers(), " workers, ", r.microbatches,
      r.replicas > 1 ? " microbatches per step and replica\n" : " microbatches per step\n");
  if (!r.history_complete) {
    absl::StrAppend(&text, "history:      INCOMPLETE: the coordinator's store holds no summary of ",
                    r.missing_steps, r.missing_steps == 1 ? " completed step" : " completed steps",
                    "; the figures below cover the stored steps only\n");
  }
  if (r.replicas > 1) {
    absl::StrAppend(&text, "replicas:     ", r.replicas, " data-parallel copies of the ",
                    r.stages, "-stage pipeline (", r.workers(), " workers, ",
                    r.microbatches * r.replicas, " microbatches per step in all)\n");
  }
  absl::StrAppend(&text, "train loss:   ", Number("%.4f", r.loss_start), " -> ",
                  Number("%.4f", r.loss_end), "\n");
  absl::StrAppend(&text, "eval loss:    ", Loss(r.eval_loss_start), " -> ", Loss(r.eval_loss),
                  "\n");
  absl::StrAppend(&text, "precision:    ", r.precision, "\n");
  absl::StrAppend(&text, "transport:    ", r.transport,
                  r.transport_reason.empty() ? "" : absl::StrCat(" (", r.transport_reason, ")"),
                  "\n");
  absl::StrAppend(&text, "layout:       ", LayoutSummary(r.layout, r.layout_reason), "\n");
  if (!r.better_layout.empty()) {
    absl::StrAppend(&text, "better layout: ",
                    LayoutSummary(r.better_layout, r.better_layout_reason), "\n");
  }
  absl::StrAppend(&text, "throughput:   ", Number("%.0f", r.tokens_per_second),
                  " tokens/s (wall clock over the last ", r.window_steps, " steps)\n");
  absl::StrAppend(&text, "step time:    ", Number("%.4f", r.step_seconds), " s (median)\n");
  absl::StrAppend(&text, "validation:   ", ValidationLine(r), "\n");
  if (r.first_step_version.has_value()) {
    absl::StrAppend(&text, "first step:   ",
                    VersionRanLine(*r.first_step_version, nullptr));
  }
  if (r.last_step_version.has_value()) {
    absl::StrAppend(&text, "last step:    ", VersionRanLine(*r.last_step_version, &r));
  }
  if (r.param_checksum.has_value()) {
    absl::StrAppendFormat(&text, "checksum:     %.17g (sum of the model's parameters, each once)\n",
                          *r.param_checksum);
  }
  const bool reduces = r.replicas > 1;
  std::vector<std::vector<std::string>> rows = {
      {"STAGE", "BUBBLE_MEASURED", "BUBBLE_PREDICTED", "DIFFERENCE"}};
  if (reduces) rows[0].insert(rows[0].end(), {"REDUCE_S", "EXPOSED_REDUCE_S"});
  for (int w = 0; w < r.stages; ++w) {
    rows.push_back({absl::StrCat(w), Rate(r.bubble_rate_measured[w]),
                    Rate(r.bubble_rate_predicted[w]),
                    absl::StrFormat("%+.4f", r.bubble_rate_measured[w] -
                                                 r.bubble_rate_predicted[w])});
    if (reduces) {
      rows.back().insert(rows.back().end(),
                         {Number("%.4f", r.reduce_seconds[w]),
                          Number("%.4f", r.exposed_reduce_seconds[w])});
    }
  }
  text += FormatTable(rows) + ActivationMemoryText(r.activation_memory) +
          BreakdownText(r.breakdown, r.replicas);
  if (!r.transitions.empty()) {
    absl::StrAppend(&text, "state changes:\n");
    for (const v1::JobTransition& t : r.transitions) {
      absl::StrAppend(&text, "  ", TransitionLine(t), "\n");
    }
  }
  return text;
}

}  // namespace zbpp::ctl
