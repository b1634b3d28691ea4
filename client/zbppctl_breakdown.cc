#include "client/zbppctl_breakdown.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "api/step_breakdown.h"
#include "client/zbppctl_tables.h"
#include "common/text_table.h"

namespace zbpp::ctl {
namespace {

// A part's column: its field without the unit, in capitals.
std::string Column(const BreakdownPart& part) {
  return absl::AsciiStrToUpper(absl::StripSuffix(part.field, "_seconds"));
}

// A table of `parts` per stage, after a first column `total` (its sum).
std::string PartsTable(const ReportBreakdown& b, const std::vector<BreakdownPart>& parts,
                       const std::string& total, bool (*shown)(const BreakdownPart&, int),
                       int replicas) {
  std::vector<std::vector<std::string>> rows = {{"STAGE", total}};
  for (const BreakdownPart& part : parts) {
    if (shown(part, replicas)) rows[0].push_back(Column(part));
  }
  for (size_t s = 0; s < b.stages.size(); ++s) {
    double sum = 0;
    std::vector<std::string> row = {absl::StrCat(s), ""};
    for (const BreakdownPart& part : parts) {
      sum += part.Of(b.stages[s]);
      if (shown(part, replicas)) row.push_back(Number("%.4f", part.Of(b.stages[s])));
    }
    row[1] = Number("%.4f", sum);
    rows.push_back(std::move(row));
  }
  return FormatTable(rows);
}

bool Always(const BreakdownPart&, int) { return true; }
// Reduction waits exist only with data parallelism.
bool SpanColumn(const BreakdownPart& part, int replicas) {
  return replicas > 1 || part.field != "reduction_wait_seconds";
}

}  // namespace

ReportBreakdown BuildBreakdown(const std::vector<v1::StepSummary>& window, int stages) {
  ReportBreakdown out;
  const std::vector<BreakdownPart>& span = SpanParts();
  const std::vector<BreakdownPart>& gap = GapParts();
  std::vector<v1::StepBreakdown> sums(stages);
  // Per stage: each span part's and gap part's summed fraction of the step,
  // and the summed predicted bubble rate.
  std::vector<std::vector<double>> span_share(stages, std::vector<double>(span.size(), 0));
  std::vector<std::vector<double>> gap_share(stages, std::vector<double>(gap.size(), 0));
  std::vector<double> predicted(stages, 0), measured(stages, 0);
  std::vector<int> counts(stages, 0);
  for (const v1::StepSummary& step : window) {
    if (!(step.step_seconds() > 0)) continue;
    for (const v1::StageStepStats& stage : step.stages()) {
      const int s = stage.stage();
      if (s < 0 || s >= stages || !stage.has_breakdown()) continue;
      const v1::StepBreakdown& b = stage.breakdown();
      AddBreakdown(b, 1, sums[s]);
      for (size_t i = 0; i < span.size(); ++i) span_share[s][i] += span[i].Of(b) / step.step_seconds();
      for (size_t i = 0; i < gap.size(); ++i) gap_share[s][i] += gap[i].Of(b) / step.step_seconds();
      predicted[s] += stage.predicted_bubble_rate();
      measured[s] += stage.measured_bubble_rate();
      ++counts[s];
    }
  }
  out.stages.assign(stages, v1::StepBreakdown());
  out.bubble_difference.assign(stages, 0);
  double gap_sum = 0, cycle_sum = 0;
  int measured_stages = 0;
  for (int s = 0; s < stages; ++s) {
    if (counts[s] == 0) continue;
    out.measured = true;
    ++measured_stages;
    const double n = counts[s];
    AddBreakdown(sums[s], 1 / n, out.stages[s]);
    const v1::StepBreakdown& mean = out.stages[s];
    out.bubble_difference[s] = (measured[s] - predicted[s]) / n;
    for (size_t i = 0; i < span.size(); ++i) {
      cycle_sum += span[i].Of(mean);
      // Compute is predicted as it is; a stage within its prediction has no
      // excess to explain.
      if (span[i].field == "compute_seconds" || !(out.bubble_difference[s] > 0)) continue;
      const double share = span_share[s][i] / n -
                           (span[i].field == "input_wait_seconds" ? predicted[s] / n : 0);
      if (share > 0 && (!out.bubble_excess.has_value() || share > out.bubble_excess->share)) {
        out.bubble_excess = BreakdownShare{span[i].label, s, span[i].Of(mean), share};
      }
    }
    cycle_sum += mean.gap_seconds();
    gap_sum += mean.gap_seconds();
    for (size_t i = 0; i < gap.size(); ++i) {
      const double seconds = gap[i].Of(mean);
      if (seconds > 0 &&
          (!out.largest_gap_part.has_value() || seconds > out.largest_gap_part->seconds)) {
        out.largest_gap_part = BreakdownShare{gap[i].label, s, seconds, gap_share[s][i] / n};
      }
    }
  }
  if (measured_stages > 0) {
    out.gap_seconds = gap_sum / measured_stages;
    out.gap_share = cycle_sum > 0 ? gap_sum / cycle_sum : 0;
  }
  return out;
}

std::string BreakdownText(const ReportBreakdown& b, int replicas) {
  if (!b.measured) return "";
  std::string text = "where the time went, per stage (seconds per step, mean):\n";
  absl::StrAppend(&text, PartsTable(b, SpanParts(), "STEP", SpanColumn, replicas));
  absl::StrAppend(&text, PartsTable(b, GapParts(), "GAP_BEFORE", Always, replicas));
  if (b.bubble_excess.has_value()) {
    const BreakdownShare& e = *b.bubble_excess;
    absl::StrAppendFormat(&text,
                          "bubble excess: %s on stage %d (%+.4f of the step, %.4f s), the "
                          "largest part of the measured bubble beyond the predicted one "
                          "(stage %d: %+.4f)\n",
                          e.part, e.stage, e.share, e.seconds, e.stage,
                          b.bubble_difference[e.stage]);
  } else {
    absl::StrAppend(&text,
                    "bubble excess: none: the runtime adds nothing to the predicted bubble on "
                    "a stage whose measured bubble exceeds it\n");
  }
  absl::StrAppendFormat(&text, "between steps: %.4f s per step (%.1f%% of the wall clock)",
                        b.gap_seconds, 100 * b.gap_share);
  if (b.largest_gap_part.has_value()) {
    const BreakdownShare& g = *b.largest_gap_part;
    absl::StrAppendFormat(&text, ", most of it %s on stage %d (%.4f s, %.4f of the step)",
                          g.part, g.stage, g.seconds, g.share);
  }
  return text + "\n";
}

}  // namespace zbpp::ctl
