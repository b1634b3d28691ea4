#include "client/zbppctl_memory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/zbppctl_tables.h"
#include "common/text_table.h"

namespace zbpp::ctl {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string MiB(double bytes) { return Number("%.2f", bytes / kMiB); }

}  // namespace

ActivationMemory BuildActivationMemory(const std::vector<v1::StepSummary>& window, int stages) {
  ActivationMemory out;
  out.peak_bytes.assign(stages, 0);
  out.predicted_peak_bytes.assign(stages, 0);
  out.ratio.assign(stages, std::nullopt);
  for (const v1::StepSummary& step : window) {
    for (const v1::StageStepStats& stage : step.stages()) {
      const int s = stage.stage();
      if (s < 0 || s >= stages) continue;
      out.predicted = out.predicted || stage.predicted_peak_activation_bytes() > 0;
      // Until a stage's first measurement its prediction follows the
      // window; after it, the prediction of its largest measured step.
      if (out.peak_bytes[s] == 0 || stage.peak_activation_bytes() > out.peak_bytes[s]) {
        out.peak_bytes[s] = stage.peak_activation_bytes();
        out.predicted_peak_bytes[s] = stage.predicted_peak_activation_bytes();
      }
    }
  }
  double largest = 0;
  for (int s = 0; s < stages; ++s) {
    if (out.peak_bytes[s] > 0) out.measured = true;
    if (out.peak_bytes[s] > 0 && out.predicted_peak_bytes[s] > 0) {
      out.ratio[s] = out.peak_bytes[s] / out.predicted_peak_bytes[s];
      if (*out.ratio[s] > kMemoryOverPredictionRatio && *out.ratio[s] > largest) {
        largest = *out.ratio[s];
        out.over_prediction_stage = s;
      }
    }
  }
  return out;
}

std::string ActivationMemoryText(const ActivationMemory& m) {
  if (!m.measured && !m.predicted) return "";
  std::string text = "activation memory per stage (peak over the window's steps):\n";
  std::vector<std::vector<std::string>> rows = {
      {"STAGE", "MEASURED_MIB", "PREDICTED_MIB", "RATIO"}};
  for (size_t s = 0; s < m.peak_bytes.size(); ++s) {
    rows.push_back({absl::StrCat(s), m.peak_bytes[s] > 0 ? MiB(m.peak_bytes[s]) : "-",
                    m.predicted_peak_bytes[s] > 0 ? MiB(m.predicted_peak_bytes[s]) : "-",
                    m.ratio[s].has_value() ? Number("%.2f", *m.ratio[s]) : "-"});
  }
  absl::StrAppend(&text, FormatTable(rows));
  if (m.over_prediction_stage.has_value()) {
    const int s = *m.over_prediction_stage;
    absl::StrAppendFormat(&text,
                          "memory: stage %d held %.2fx its predicted activation memory "
                          "(%s MiB measured, %s MiB predicted)\n",
                          s, *m.ratio[s], MiB(m.peak_bytes[s]), MiB(m.predicted_peak_bytes[s]));
  } else if (m.measured) {
    absl::StrAppendFormat(&text,
                          "memory: every measured stage within %.1fx of its predicted "
                          "activation memory\n",
                          kMemoryOverPredictionRatio);
  } else {
    absl::StrAppend(&text, "memory: the workers did not measure their activation memory\n");
  }
  return text;
}

}  // namespace zbpp::ctl
