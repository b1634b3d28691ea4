#include "worker/daemon/step_report.h"

#include <sys/resource.h>

#include <algorithm>

#include "worker/runtime/step_timeline.h"

namespace zbpp::worker {

void FillStepMeasurements(const StepResult& result, const sched::Schedule& schedule, int stage,
                          v1::ReportStepRequest& report) {
  const StepTimeline& t = result.timeline;
  for (size_t i = 0; i < t.action_start_seconds.size(); ++i) {
    report.add_action_start_seconds(t.action_start_seconds[i]);
    report.add_action_end_seconds(t.action_end_seconds[i]);
  }
  report.set_step_seconds(t.step_seconds);
  const SpanBreakdown span = BreakDownSpan(t, schedule.actions[stage]);
  report.set_idle_seconds(std::max(0.0, t.step_seconds - span.compute_seconds));
  report.set_comm_seconds(
      std::min(span.input_wait_seconds + span.send_wait_seconds, report.idle_seconds()));
  FillStepBreakdown(span, result.gap, *report.mutable_breakdown());
  if (result.loss.has_value()) report.set_loss(*result.loss);
  report.set_local_grad_norm_sq(result.local_grad_norm_sq);
  report.set_found_inf_nan(result.found_inf_nan);
  for (const StepValidation& validation : result.validations) {
    v1::ValidationResult* v = report.add_validations();
    v->set_step(validation.step);
    v->set_mode(validation.mode);
    v->set_found_inf_nan(validation.global_found_inf_nan);
    v->set_global_grad_norm_sq(validation.global_grad_norm_sq);
    v->set_decision(validation.clip_coefficient == 0  ? v1::VALIDATION_DECISION_SKIPPED
                    : validation.clip_coefficient < 1 ? v1::VALIDATION_DECISION_CLIPPED
                                                      : v1::VALIDATION_DECISION_COMMITTED);
    v->set_clip_coefficient(validation.clip_coefficient);
    v->set_rolled_back(validation.rolled_back);
    v->set_rollback_seconds(validation.rollback_seconds);
    v->set_replayed_forwards(validation.replayed_forwards);
  }
  report.set_peak_memory_bytes(PeakResidentBytes());
  report.set_peak_activation_bytes(result.peak_activation_bytes);
}

uint64_t PeakResidentBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace zbpp::worker
