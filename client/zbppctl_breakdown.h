// `zbppctl report`'s breakdown: where each stage's time went in its steps
// and between them (job.proto StepBreakdown, averaged over the report's
// window), and which part makes the measured bubble exceed the predicted
// one. Pure functions of the step summaries.

#ifndef ZBPP_CLIENT_ZBPPCTL_BREAKDOWN_H_
#define ZBPP_CLIENT_ZBPPCTL_BREAKDOWN_H_

#include <optional>
#include <string>
#include <vector>

#include "zbpp/v1/job.pb.h"

namespace zbpp::ctl {

/// One part of the breakdown on one stage and its size.
struct BreakdownShare {
  /// The part in words (api/step_breakdown.h: "input waits", "grant
  /// latency", ...).
  std::string part;
  int stage = 0;
  /// Mean seconds per step over the window.
  double seconds = 0;
  /// The mean over the window of its fraction of the step
  /// (StepSummary.step_seconds); for the bubble excess, less the stage's
  /// predicted bubble rate where the part is input waits.
  double share = 0;
};

/// The report's breakdown over `window` (steps, ascending) of a job of
/// `stages` pipeline stages.
struct ReportBreakdown {
  /// Whether any step of the window carried a breakdown (a coordinator that
  /// predates it sends none); when false the rest is empty.
  bool measured = false;
  /// Per stage: StageStepStats.breakdown, the mean over the window's steps
  /// that carry one, seconds per step.
  std::vector<v1::StepBreakdown> stages;
  /// Per stage, the mean measured minus predicted bubble rate over the same
  /// steps.
  std::vector<double> bubble_difference;
  /// The largest contributor to the measured bubble's excess over the
  /// prediction: over the stages whose measured bubble exceeds the
  /// predicted one and the span's parts but compute, the mean fraction of
  /// the step the part took, less, for input waits, the stage's predicted
  /// bubble rate (the simulator's idle time is all waiting for inputs: what
  /// the runtime adds is the rest). Unset when no stage's measured bubble
  /// exceeds the prediction, or no part does.
  std::optional<BreakdownShare> bubble_excess;
  /// Between steps: the mean gap before a step over the stages, seconds,
  /// its share of the wall clock per step (gap / (step + gap)), and the
  /// largest part of it over the stages (share: of the step). The window's
  /// steps after the attempt's first carry a gap.
  double gap_seconds = 0;
  double gap_share = 0;
  std::optional<BreakdownShare> largest_gap_part;
};

/// Builds the breakdown of `window`. Thread-safe (pure).
ReportBreakdown BuildBreakdown(const std::vector<v1::StepSummary>& window, int stages);

/// Two aligned tables (the step's parts, then the gap's, per stage; the
/// reduction-wait column only when `replicas` > 1) and two lines: the
/// bubble's largest excess ("bubble excess: input waits on stage 1 (+0.0410
/// of the step, ...") or "bubble excess: none ..." and the gap ("between
/// steps: ..."). Empty when nothing was measured.
std::string BreakdownText(const ReportBreakdown& breakdown, int replicas);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_BREAKDOWN_H_
