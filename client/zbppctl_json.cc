#include "client/zbppctl_json.h"

#include <cmath>
#include <optional>

#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "absl/time/time.h"
#include "api/job_state.h"
#include "api/step_breakdown.h"
#include "api/time_proto.h"

namespace zbpp::ctl {
namespace {

using Json = nlohmann::ordered_json;

// nan and inf are not JSON numbers: null instead.
Json NumberOrNull(std::optional<double> value) {
  return value.has_value() && std::isfinite(*value) ? Json(*value) : Json(nullptr);
}

Json StageRates(const v1::Job& job) {
  Json stages = Json::array();
  if (job.last_step().stages_size() > 0) {
    for (const v1::StageStepStats& s : job.last_step().stages()) {
      stages.push_back(
          {{"stage", s.stage()},
           {"worker_id", s.worker_id()},
           {"measured_bubble_rate", NumberOrNull(s.measured_bubble_rate())},
           {"predicted_bubble_rate", NumberOrNull(s.predicted_bubble_rate())}});
    }
    return stages;
  }
  // Before the first step: only the simulator's view of the schedule.
  const auto& predicted = job.schedule().predicted().stage_bubble_rate();
  for (int w = 0; w < predicted.size(); ++w) {
    std::string worker_id;
    for (const v1::StageAssignment& a : job.assignments()) {
      if (a.stage() == w) worker_id = a.worker_id();
    }
    stages.push_back({{"stage", w},
                      {"worker_id", worker_id},
                      {"measured_bubble_rate", nullptr},
                      {"predicted_bubble_rate", NumberOrNull(predicted[w])}});
  }
  return stages;
}

Json ShareJson(const std::optional<BreakdownShare>& share) {
  if (!share.has_value()) return nullptr;
  return {{"part", share->part},
          {"stage", share->stage},
          {"seconds", share->seconds},
          {"share", share->share}};
}

// ReportBreakdown: per stage, every part in seconds by its field name.
Json BreakdownJson(const ReportBreakdown& b) {
  if (!b.measured) return nullptr;
  Json stages = Json::array();
  for (size_t s = 0; s < b.stages.size(); ++s) {
    Json stage = {{"stage", s}};
    for (const auto* parts : {&SpanParts(), &GapParts()}) {
      for (const BreakdownPart& part : *parts) stage[part.field] = part.Of(b.stages[s]);
    }
    stage["gap_seconds"] = b.stages[s].gap_seconds();
    stages.push_back(std::move(stage));
  }
  return {{"stages", std::move(stages)},
          {"bubble_excess", ShareJson(b.bubble_excess)},
          {"gap_seconds", b.gap_seconds},
          {"gap_share", b.gap_share},
          {"largest_gap_part", ShareJson(b.largest_gap_part)}};
}

// ActivationMemory: per stage, bytes, MiB and the ratio (null where not
// measured or not predicted), and the stage over its prediction.
Json ActivationMemoryJson(const ActivationMemory& m) {
  if (!m.measured && !m.predicted) return nullptr;
  constexpr double kMiB = 1024.0 * 1024.0;
  Json stages = Json::array();
  for (size_t s = 0; s < m.peak_bytes.size(); ++s) {
    const bool measured = m.peak_bytes[s] > 0;
    stages.push_back({{"stage", s},
                      {"peak_bytes", measured ? Json(m.peak_bytes[s]) : Json(nullptr)},
                      {"predicted_peak_bytes", m.predicted_peak_bytes[s]},
                      {"peak_mib", measured ? Json(m.peak_bytes[s] / kMiB) : Json(nullptr)},
                      {"predicted_peak_mib", m.predicted_peak_bytes[s] / kMiB},
                      {"ratio", NumberOrNull(m.ratio[s])}});
  }
  Json over = nullptr;
  if (m.over_prediction_stage.has_value()) {
    const int s = *m.over_prediction_stage;
    over = {{"stage", s}, {"ratio", *m.ratio[s]}};
  }
  return {{"measured", m.measured}, {"stages", std::move(stages)}, {"over_prediction", over}};
}

}  // namespace

absl::StatusOr<std::string> JobStatusJson(const v1::Job& job) {
  v1::Job slim = job;
  slim.mutable_schedule()->clear_schedule();
  slim.mutable_schedule()->clear_cost_model();
  if (!job.has_schedule()) slim.clear_schedule();

  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  auto printed =
      google::protobuf::util::MessageToJsonString(slim, &text, options);
  if (!printed.ok()) {
    return absl::InternalError("cannot print job as JSON: " +
                               printed.ToString());
  }
  Json out = Json::parse(text);
  const bool stepped = job.has_last_step();
  const v1::StepSummary& step = job.last_step();
  const double none = std::nan("");
  out["step"] = job.steps_completed();
  out["steps"] = job.spec().steps();
  out["schedule_version"] = job.schedule_version();
  out["loss"] = NumberOrNull(stepped ? step.loss() : none);
  out["tokens_per_second"] =
      NumberOrNull(stepped ? step.tokens_per_second() : none);
  out["measured_bubble_rate"] =
      NumberOrNull(stepped ? step.measured_bubble_rate() : none);
  out["predicted_bubble_rate"] = NumberOrNull(
      stepped ? step.predicted_bubble_rate()
              : (job.has_schedule() ? job.schedule().predicted().bubble_rate()
                                    : none));
  out["stages"] = StageRates(job);
  return out.dump(2) + "\n";
}

namespace {

// A version a step ran (VersionRan) as an object; null when unset.
Json VersionRanJson(const std::optional<VersionRan>& v) {
  if (!v.has_value()) return nullptr;
  return {{"step", v->step},
          {"version", v->version},
          {"reason", v->reason},
          {"effective_step", v->effective_step},
          {"predicted_step_seconds", NumberOrNull(v->predicted_step_seconds)},
          {"predicted_makespan_seconds", NumberOrNull(v->predicted_makespan_seconds)},
          {"predicted_bubble_rate", NumberOrNull(v->predicted_bubble_rate)}};
}

// Job.transitions as objects: states by short name ("DEGRADED"), the time
// in whole seconds, RFC 3339 UTC ("2001-09-09T01:46:40Z"; null when unset).
Json TransitionsJson(const std::vector<v1::JobTransition>& transitions) {
  Json list = Json::array();
  for (const v1::JobTransition& t : transitions) {
    list.push_back({{"previous_state", JobStateName(t.from())},
                    {"state", JobStateName(t.to())},
                    {"time", t.has_time() ? Json(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                                                                  FromTimestamp(t.time()),
                                                                  absl::UTCTimeZone()))
                                          : Json(nullptr)},
                    {"steps_completed", t.steps_completed()},
                    {"message", t.message()}});
  }
  return list;
}

}  // namespace

std::string ReportJson(const TrainingReport& r) {
  Json json = {{"job_id", r.job_id},
               {"state", r.state},
               {"steps", r.steps},
               {"schedule", r.schedule},
               {"stages", r.stages},
               {"replicas", r.replicas},
               {"workers", r.workers()},
               {"microbatches", r.microbatches},
               {"loss_start", NumberOrNull(r.loss_start)},
               {"loss_end", NumberOrNull(r.loss_end)},
               {"eval_loss_start", NumberOrNull(r.eval_loss_start)},
               {"eval_loss", NumberOrNull(r.eval_loss)},
               {"tokens_per_second", r.tokens_per_second},
               {"step_seconds", r.step_seconds},
               {"window_steps", r.window_steps},
               {"bubble_rate_measured", r.bubble_rate_measured},
               {"bubble_rate_predicted", r.bubble_rate_predicted},
               {"reduce_seconds", r.reduce_seconds},
               {"exposed_reduce_seconds", r.exposed_reduce_seconds},
               {"breakdown", BreakdownJson(r.breakdown)},
               {"activation_memory", ActivationMemoryJson(r.activation_memory)},
               {"recoveries", r.recoveries},
               {"restarts", r.restarts},
               {"degraded_steps", r.degraded_steps},
               {"replicas_active", r.replicas_active},
               {"validation_mode", r.validation_mode.empty() ? Json(nullptr)
                                                             : Json(r.validation_mode)},
               {"validation_policy", r.validation_policy},
               {"precision", r.precision},
               {"transport", r.transport},
               {"transport_reason", r.transport_reason},
               {"layout", r.layout},
               {"layout_reason", r.layout_reason},
               {"better_layout", r.better_layout},
               {"better_layout_reason", r.better_layout_reason},
               {"rollbacks", r.rollbacks},
               {"skipped_steps", r.skipped_steps},
               {"clipped_steps", r.clipped_steps},
               {"schedule_versions", r.schedule_versions},
               {"last_step_schedule_version", r.last_step_schedule_version},
               {"first_step_version", VersionRanJson(r.first_step_version)},
               {"last_step_version", VersionRanJson(r.last_step_version)},
               {"last_version_step_seconds", r.last_version_step_seconds},
               {"last_version_measured_prediction_seconds",
                r.last_version_measured_prediction_seconds},
               {"history_complete", r.history_complete},
               {"missing_steps", r.missing_steps},
               {"param_checksum", NumberOrNull(r.param_checksum)},
               {"transitions", TransitionsJson(r.transitions)}};
  return json.dump() + "\n";
}

}  // namespace zbpp::ctl
