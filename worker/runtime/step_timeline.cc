#include "worker/runtime/step_timeline.h"

#include <algorithm>

#include "zbpp/v1/job.pb.h"

namespace zbpp::worker {
namespace {

double Seconds(GapClock::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

SpanBreakdown BreakDownSpan(const StepTimeline& timeline, const std::vector<sched::Action>& actions) {
  SpanBreakdown out;
  out.input_wait_seconds = timeline.input_wait_seconds;
  out.send_wait_seconds = timeline.send_wait_seconds;
  out.validation_check_seconds = timeline.validation_check_seconds;
  const size_t n = std::min({actions.size(), timeline.action_start_seconds.size(),
                             timeline.action_end_seconds.size()});
  double last_pass_end = 0;
  bool reduces = false;
  for (size_t i = 0; i < n; ++i) {
    if (actions[i].kind == sched::PassKind::kReduce) {
      reduces = true;
      continue;
    }
    out.compute_seconds += timeline.action_end_seconds[i] - timeline.action_start_seconds[i];
    last_pass_end = std::max(last_pass_end, timeline.action_end_seconds[i]);
  }
  if (reduces) out.reduction_wait_seconds = std::max(0.0, timeline.step_seconds - last_pass_end);
  out.overhead_seconds =
      std::max(0.0, timeline.step_seconds - out.compute_seconds - out.input_wait_seconds -
                        out.send_wait_seconds - out.validation_check_seconds -
                        out.reduction_wait_seconds);
  return out;
}

void GapClock::Open(Clock::time_point since) {
  since_ = since;
  last_ = since;
  gap_ = StepGap{};
}

void GapClock::Mark(GapPhase phase, Clock::time_point now) {
  if (!since_.has_value()) return;
  // A phase that ended before the last mark (clock reads out of order on
  // another thread's time point) adds nothing rather than a negative time.
  if (now <= last_) return;
  gap_.phase_seconds[static_cast<int>(phase)] += Seconds(now - last_);
  last_ = now;
}

std::optional<StepGap> GapClock::Close(Clock::time_point until) {
  if (!since_.has_value()) return std::nullopt;
  Mark(GapPhase::kOther, until);
  StepGap gap = gap_;
  gap.total_seconds = Seconds(until - *since_);
  since_.reset();
  return gap;
}

void FillStepBreakdown(const SpanBreakdown& span, const std::optional<StepGap>& gap,
                       v1::StepBreakdown& out) {
  out.set_compute_seconds(span.compute_seconds);
  out.set_input_wait_seconds(span.input_wait_seconds);
  out.set_send_wait_seconds(span.send_wait_seconds);
  out.set_validation_check_seconds(span.validation_check_seconds);
  out.set_reduction_wait_seconds(span.reduction_wait_seconds);
  out.set_overhead_seconds(span.overhead_seconds);
  if (!gap.has_value()) return;
  out.set_gap_seconds(gap->total_seconds);
  out.set_drain_seconds(gap->seconds(GapPhase::kDrain));
  out.set_validation_seconds(gap->seconds(GapPhase::kValidation));
  out.set_embedding_exchange_seconds(gap->seconds(GapPhase::kEmbedding));
  out.set_optimizer_seconds(gap->seconds(GapPhase::kOptimizer));
  out.set_evaluation_seconds(gap->seconds(GapPhase::kEvaluation));
  out.set_checkpoint_seconds(gap->seconds(GapPhase::kCheckpoint));
  out.set_report_seconds(gap->seconds(GapPhase::kReport));
  out.set_grant_seconds(gap->seconds(GapPhase::kGrant));
  out.set_other_seconds(gap->seconds(GapPhase::kOther));
}

}  // namespace zbpp::worker
