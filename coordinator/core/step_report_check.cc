#include "coordinator/core/step_report_check.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/step_breakdown.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

absl::StatusOr<std::vector<HopTiming>> HopTimingsOf(
    int from, const google::protobuf::RepeatedPtrField<zbpp::v1::HopLatency>& latencies,
    const sched::Schedule& schedule) {
  std::vector<HopTiming> hops;
  for (int i = 0; i < latencies.size(); ++i) {
    const zbpp::v1::HopLatency& latency = latencies.Get(i);
    const double seconds = latency.one_way_seconds();
    if (!(seconds >= 0) || !(seconds <= kMaxReportedSeconds)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hop_latencies[", i, "].one_way_seconds: ", seconds,
                       " is not a time in [0, ", kMaxReportedSeconds, "] s"));
    }
    const size_t before = hops.size();
    const int to = latency.to_stage();
    for (int h = 0; from != to && h + 1 < schedule.num_virtual_stages(); ++h) {
      const int a = schedule.StageOf(VirtualStage(h)).value();
      const int b = schedule.StageOf(VirtualStage(h + 1)).value();
      if ((a == from && b == to) || (a == to && b == from)) {
        hops.push_back({h, seconds});
      }
    }
    if (hops.size() == before) {
      return absl::InvalidArgumentError(
          absl::StrCat("hop_latencies[", i, "].to_stage: stage ", to,
                       " is not a pipeline neighbour of stage ", from));
    }
  }
  return hops;
}

namespace {

// A time a worker measured: finite and >= 0 (seconds).
absl::Status CheckTime(double seconds, const std::string& field) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be a finite time >= 0, got ", seconds));
  }
  return absl::OkStatus();
}

// CheckTime, and at most kMaxReportedSeconds: for the times that bound the
// others (step_seconds bounds every time inside the step).
absl::Status CheckBoundedTime(double seconds, const std::string& field) {
  if (absl::Status st = CheckTime(seconds, field); !st.ok()) return st;
  if (seconds > kMaxReportedSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be at most ",
                                                   kMaxReportedSeconds, " s, got ", seconds));
  }
  return absl::OkStatus();
}

// A cross-entropy in nats: >= 0, or NaN / +inf when training diverged (a
// fact to record, not a malformed report).
absl::Status CheckLoss(double loss, const std::string& field) {
  if (loss < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be >= 0, got ", loss));
  }
  return absl::OkStatus();
}

// The ranges of one validation result (worker.proto ValidationResult);
// `at` prefixes the field names.
absl::Status CheckValidationRanges(const zbpp::v1::ValidationResult& v,
                                   const std::string& at) {
  if (v.mode() != zbpp::v1::VALIDATION_MODE_SYNCHRONOUS &&
      v.mode() != zbpp::v1::VALIDATION_MODE_POST) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "mode: must be SYNCHRONOUS or POST, got ", v.mode()));
  }
  if (!zbpp::v1::ValidationDecision_IsValid(v.decision())) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "decision: unknown decision ", v.decision()));
  }
  if (!(v.clip_coefficient() >= 0 && v.clip_coefficient() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "clip_coefficient: must be in [0, 1], got ", v.clip_coefficient()));
  }
  if (!(v.global_grad_norm_sq() >= 0) && !v.found_inf_nan()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "global_grad_norm_sq: must be >= 0 unless found_inf_nan, got ",
                     v.global_grad_norm_sq()));
  }
  if (absl::Status st = CheckBoundedTime(v.rollback_seconds(), at + "rollback_seconds");
      !st.ok()) {
    return st;
  }
  if (v.replayed_forwards() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "replayed_forwards: must be >= 0, got ", v.replayed_forwards()));
  }
  return absl::OkStatus();
}

// The report's passes timed and averaged (MeasureStepReport) into `stage`:
// timings, F/B/W/reduce means, busy and exposed-reduce seconds.
absl::Status MeasurePasses(const zbpp::v1::ReportStepRequest& report,
                           const sched::Schedule& schedule, const sched::Problem& base,
                           StageReport& stage) {
  const std::vector<sched::Action>& actions = schedule.actions[report.stage()];
  std::vector<MeasuredPass> passes;
  passes.reserve(actions.size());
  // F, B (or BW), W, REDUCE_GRAD.
  double sums[4] = {0, 0, 0, 0};
  int counts[4] = {0, 0, 0, 0};
  double last_pass_end = 0;
  double last_reduce_end = 0;
  double vocabulary_sums[2] = {0, 0};  // S, T.
  int vocabulary_counts[2] = {0, 0};
  // A partial W or reduction (one gradient bucket of K) stands for 1/K of
  // the whole one the cost model and the report speak of.
  const std::vector<int> buckets = sched::BucketsPerVirtualStage(schedule);
  for (size_t i = 0; i < actions.size(); ++i) {
    const double seconds =
        report.action_end_seconds(i) - report.action_start_seconds(i);
    if (!(seconds >= 0) || !std::isfinite(seconds)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "action_end_seconds[", i, "]: action ",
          sched::ActionToString(actions[i]), " has duration ", seconds));
    }
    if (sched::IsVocabularyPass(actions[i].kind)) {
      // The stage's own passes on its shard of the head (cost_model.h,
      // AddVocabularyTiming), not the last virtual stage's.
      const int k = actions[i].kind == sched::PassKind::kS ? 0 : 1;
      vocabulary_sums[k] += seconds;
      ++vocabulary_counts[k];
      stage.busy_seconds += seconds;
      last_pass_end = std::max(last_pass_end, report.action_end_seconds(i));
      continue;
    }
    const double whole =
        seconds * (actions[i].bucket == sched::kAllBuckets ? 1 : buckets[actions[i].virtual_stage.value()]);
    passes.push_back({actions[i].kind, actions[i].virtual_stage.value(), whole});
    // A merged pair (sched::MergesWithNext) also stands for one BW pass,
    // from its B's start to its W's end: the cost model's T_BW.
    if (sched::MergesWithNext(actions, i)) {
      const double fused = report.action_end_seconds(i + 1) - report.action_start_seconds(i);
      if (fused >= 0 && std::isfinite(fused)) {
        passes.push_back({sched::PassKind::kBW, actions[i].virtual_stage.value(), fused});
      }
    }
    const sched::PassKind kind = actions[i].kind;
    const int slot = kind == sched::PassKind::kF        ? 0
                     : kind == sched::PassKind::kW      ? 2
                     : kind == sched::PassKind::kReduce ? 3
                                                        : 1;
    sums[slot] += whole;
    ++counts[slot];
    // A reduction runs beside the passes on the communication timeline:
    // not busy time, and exposed only where it ends after the last pass.
    if (kind == sched::PassKind::kReduce) {
      last_reduce_end = std::max(last_reduce_end, report.action_end_seconds(i));
    } else {
      stage.busy_seconds += seconds;
      last_pass_end = std::max(last_pass_end, report.action_end_seconds(i));
    }
  }
  absl::StatusOr<std::vector<VirtualStageTiming>> timings = AverageStepPasses(passes, base);
  if (!timings.ok()) return timings.status();
  stage.timings = *std::move(timings);
  stage.f_seconds = counts[0] ? sums[0] / counts[0] : 0;
  stage.b_seconds = counts[1] ? sums[1] / counts[1] : 0;
  stage.w_seconds = counts[2] ? sums[2] / counts[2] : 0;
  stage.reduce_seconds = counts[3] ? sums[3] / counts[3] : 0;
  if (vocabulary_counts[0] > 0 && vocabulary_counts[1] > 0) {
    sched::VocabularyCost vocabulary;
    vocabulary.s_seconds = vocabulary_sums[0] / vocabulary_counts[0];
    vocabulary.t_seconds = vocabulary_sums[1] / vocabulary_counts[1];
    stage.vocabulary = vocabulary;
  }
  if (counts[3] > 0) {
    stage.exposed_reduce_seconds = std::max(0.0, last_reduce_end - last_pass_end);
  }
  return absl::OkStatus();
}

// What the report says besides its passes' timings, into `stage`.
void CopyReportFacts(const zbpp::v1::ReportStepRequest& report, StageReport& stage) {
  stage.worker_id = report.worker_id();
  stage.step_seconds = report.step_seconds();
  if (report.action_start_seconds_size() > 0) {
    const auto& starts = report.action_start_seconds();
    const auto& ends = report.action_end_seconds();
    stage.span_seconds = *std::max_element(ends.begin(), ends.end()) -
                         *std::min_element(starts.begin(), starts.end());
  }
  stage.idle_seconds = report.idle_seconds();
  stage.comm_seconds = report.comm_seconds();
  if (report.has_loss()) stage.loss = report.loss();
  if (report.has_eval_loss()) stage.eval_loss = report.eval_loss();
  stage.checkpoint_written = report.checkpoint_written();
  if (report.has_parameter_sum()) stage.parameter_sum = report.parameter_sum();
  *stage.timeline.mutable_action_start_seconds() = report.action_start_seconds();
  *stage.timeline.mutable_action_end_seconds() = report.action_end_seconds();
  *stage.timeline.mutable_breakdown() = report.breakdown();
  stage.peak_activation_bytes = static_cast<double>(report.peak_activation_bytes());
}

// The breakdown's parts (job.proto StepBreakdown): times, the span's each
// within `step_seconds` (with the rounding slack), the gap's
// each within gap_seconds, which is bounded like step_seconds.
absl::Status CheckBreakdownRanges(const zbpp::v1::StepBreakdown& b, double step_seconds) {
  const double step_limit = step_seconds * (1 + 1e-9) + 1e-6;
  for (const BreakdownPart& part : SpanParts()) {
    const std::string field = "breakdown." + part.field;
    if (absl::Status st = CheckTime(part.Of(b), field); !st.ok()) return st;
    if (part.Of(b) > step_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", part.Of(b), " is longer than step_seconds (", step_seconds, ")"));
    }
  }
  if (absl::Status st = CheckBoundedTime(b.gap_seconds(), "breakdown.gap_seconds"); !st.ok()) {
    return st;
  }
  const double gap_limit = b.gap_seconds() * (1 + 1e-9) + 1e-6;
  for (const BreakdownPart& part : GapParts()) {
    const std::string field = "breakdown." + part.field;
    if (absl::Status st = CheckTime(part.Of(b), field); !st.ok()) return st;
    if (part.Of(b) > gap_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", part.Of(b), " is longer than breakdown.gap_seconds (", b.gap_seconds(),
          ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckReportRanges(const zbpp::v1::ReportStepRequest& r) {
  if (absl::Status st = CheckBoundedTime(r.step_seconds(), "step_seconds"); !st.ok()) return st;
  const double limit = r.step_seconds() * (1 + 1e-9) + 1e-6;
  for (auto [value, field] : {std::pair{r.idle_seconds(), "idle_seconds"},
                              std::pair{r.comm_seconds(), "comm_seconds"}}) {
    if (absl::Status st = CheckTime(value, field); !st.ok()) return st;
    if (value > limit) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", value,
                                                     " is longer than step_seconds (",
                                                     r.step_seconds(), ")"));
    }
  }
  if (absl::Status st = CheckBreakdownRanges(r.breakdown(), r.step_seconds()); !st.ok()) {
    return st;
  }
  for (int i = 0; i < r.action_start_seconds_size(); ++i) {
    const std::string field = absl::StrCat("action_start_seconds[", i, "]");
    if (absl::Status st = CheckTime(r.action_start_seconds(i), field); !st.ok()) return st;
  }
  for (int i = 0; i < r.action_end_seconds_size(); ++i) {
    if (r.action_end_seconds(i) > limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("action_end_seconds[", i, "]: ", r.action_end_seconds(i),
                       " is after the step's end (step_seconds ", r.step_seconds(), ")"));
    }
  }
  if (r.has_loss()) {
    if (absl::Status st = CheckLoss(r.loss(), "loss"); !st.ok()) return st;
  }
  if (r.has_eval_loss()) {
    if (absl::Status st = CheckLoss(r.eval_loss(), "eval_loss"); !st.ok()) return st;
  }
  if (!(r.local_grad_norm_sq() >= 0) && !r.found_inf_nan()) {
    return absl::InvalidArgumentError(
        absl::StrCat("local_grad_norm_sq: must be >= 0 unless found_inf_nan, got ",
                     r.local_grad_norm_sq()));
  }
  if (r.has_parameter_sum() && !std::isfinite(r.parameter_sum())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter_sum: must be finite, got ", r.parameter_sum()));
  }
  for (int i = 0; i < r.validations_size(); ++i) {
    const std::string at = absl::StrCat("validations[", i, "].");
    if (absl::Status st = CheckValidationRanges(r.validations(i), at); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status CheckReportFitsDevice(const zbpp::v1::ReportStepRequest& report,
                                   uint64_t device_memory_bytes) {
  if (report.peak_activation_bytes() > device_memory_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peak_activation_bytes: ", report.peak_activation_bytes(),
        " is more than the worker's device holds (memory_bytes ", device_memory_bytes,
        " as registered)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MeasuredReport> MeasureStepReport(
    const zbpp::v1::ReportStepRequest& report, const sched::Schedule& schedule,
    int64_t version, const sched::Problem& base, int64_t start_step) {
  const std::vector<sched::Action>& actions = schedule.actions[report.stage()];
  if (report.action_start_seconds_size() != static_cast<int>(actions.size()) ||
      report.action_end_seconds_size() != static_cast<int>(actions.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "action_start_seconds/action_end_seconds: ",
        report.action_start_seconds_size(), "/",
        report.action_end_seconds_size(), " timings for ", actions.size(),
        " actions of stage ", report.stage(), " in version ", version));
  }
  MeasuredReport measured;
  absl::StatusOr<std::vector<HopTiming>> hops = HopTimingsOf(report.stage(), report.hop_latencies(), schedule);
  if (!hops.ok()) return hops.status();
  measured.hops = *std::move(hops);
  for (int i = 0; i < report.validations_size(); ++i) {
    const int64_t step = report.validations(i).step();
    if (step < start_step || step > report.step()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "validations[", i, "].step: ", step, " is not a step of this attempt up to ",
          report.step()));
    }
  }
  if (absl::Status st = CheckReportRanges(report); !st.ok()) return st;
  if (absl::Status st = MeasurePasses(report, schedule, base, measured.stage); !st.ok()) {
    return st;
  }
  CopyReportFacts(report, measured.stage);
  return measured;
}

}  // namespace zbpp::coordinator
