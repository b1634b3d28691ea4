#include "coordinator/core/step_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "api/pipeline_shape.h"
#include "api/step_breakdown.h"
#include "common/indices.h"

namespace zbpp::coordinator {
namespace {

// x within [0, 1]; NaN (a 0/0 rate) counts as 0.
double Clamp01(double x) {
  if (!(x >= 0)) return 0;
  return x > 1 ? 1 : x;
}

}  // namespace

StepOutcome SummarizeStep(const StepReports& step) {
  const int p = step.stages;
  const int d = step.replicas;
  StepOutcome outcome;
  zbpp::v1::StepSummary& summary = outcome.summary;
  summary.set_step(step.step);
  summary.set_schedule_version(step.version);
  summary.set_loss(std::numeric_limits<double>::quiet_NaN());
  double step_seconds = 0;
  double busy = 0;
  double cost = 0;  // The largest per-stage span.
  double loss_sum = 0, eval_loss_sum = 0;
  int losses = 0, eval_losses = 0;
  for (const auto& [index, report] : step.reports) {
    step_seconds = std::max(step_seconds, report.step_seconds);
    cost = std::max(cost, report.span_seconds);
    busy += report.busy_seconds;
    if (report.loss.has_value()) loss_sum += *report.loss, ++losses;
    if (report.eval_loss.has_value()) {
      eval_loss_sum += *report.eval_loss, ++eval_losses;
    }
  }
  if (losses > 0 && std::isfinite(loss_sum / losses)) {
    summary.set_loss(loss_sum / losses);
  }
  if (eval_losses > 0) summary.set_eval_loss(eval_loss_sum / eval_losses);
  // Replica 0's stages (worker indexes [0, p)) hold the model; the other
  // replicas hold copies of it.
  auto replica0 = [&](Stage s) -> const StageReport& {
    return step.reports.at(WorkerOf(s, Replica(0), p).value());
  };
  bool summed = true;
  double checksum = 0;
  for (const Stage s : IndicesOf<Stage>(p)) {
    summed = summed && replica0(s).parameter_sum.has_value();
    if (summed) checksum += *replica0(s).parameter_sum;
    if (replica0(s).checkpoint_written) {
      outcome.checkpointed_stages.push_back(s.value());
    }
  }
  if (summed) outcome.param_checksum = checksum;
  summary.set_step_seconds(step_seconds);
  if (step_seconds > 0) {
    summary.set_tokens_per_second(d * step.tokens_per_replica / step_seconds);
  }
  if (cost > 0) {
    summary.set_measured_bubble_rate(Clamp01(1 - busy / (p * d * cost)));
  }
  summary.set_predicted_bubble_rate(step.predicted_bubble_rate);
  summary.set_predicted_step_seconds(step.predicted_step_seconds);
  for (const Stage s : IndicesOf<Stage>(p)) {
    const int stage = s.value();
    StageReport mean;
    double peak_activation_bytes = 0;
    for (const Replica r : IndicesOf<Replica>(d)) {
      const StageReport& report = step.reports.at(WorkerOf(s, r, p).value());
      peak_activation_bytes = std::max(peak_activation_bytes, report.peak_activation_bytes);
      mean.busy_seconds += report.busy_seconds / d;
      mean.idle_seconds += report.idle_seconds / d;
      mean.comm_seconds += report.comm_seconds / d;
      mean.f_seconds += report.f_seconds / d;
      mean.b_seconds += report.b_seconds / d;
      mean.w_seconds += report.w_seconds / d;
      mean.reduce_seconds += report.reduce_seconds / d;
      mean.exposed_reduce_seconds += report.exposed_reduce_seconds / d;
      AddBreakdown(report.timeline.breakdown(), 1.0 / d, *mean.timeline.mutable_breakdown());
    }
    zbpp::v1::StageStepStats* out = summary.add_stages();
    out->set_stage(stage);
    out->set_worker_id(replica0(s).worker_id);
    out->set_measured_bubble_rate(
        cost > 0 ? Clamp01(1 - mean.busy_seconds / cost) : 0);
    out->set_predicted_bubble_rate(
        stage < static_cast<int>(step.predicted_stage_bubble_rate.size())
            ? step.predicted_stage_bubble_rate[stage]
            : 0);
    out->set_idle_seconds(mean.idle_seconds);
    out->set_comm_seconds(mean.comm_seconds);
    out->set_f_seconds(mean.f_seconds);
    out->set_b_seconds(mean.b_seconds);
    out->set_w_seconds(mean.w_seconds);
    out->set_reduce_seconds(mean.reduce_seconds);
    out->set_exposed_reduce_seconds(mean.exposed_reduce_seconds);
    *out->mutable_breakdown() = mean.timeline.breakdown();
    out->set_peak_activation_bytes(peak_activation_bytes);
    out->set_predicted_peak_activation_bytes(
        stage < static_cast<int>(step.predicted_peak_activation_bytes.size())
            ? step.predicted_peak_activation_bytes[stage]
            : 0);
  }
  return outcome;
}

}  // namespace zbpp::coordinator
