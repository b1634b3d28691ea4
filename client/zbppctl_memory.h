// `zbppctl report`'s activation memory: each stage's measured peak next to
// the simulator's (job.proto StageStepStats.peak_activation_bytes and
// predicted_peak_activation_bytes), and the stage that held most beyond its
// prediction. Pure functions of the step summaries.

#ifndef ZBPP_CLIENT_ZBPPCTL_MEMORY_H_
#define ZBPP_CLIENT_ZBPPCTL_MEMORY_H_

#include <optional>
#include <string>
#include <vector>

#include "zbpp/v1/job.pb.h"

namespace zbpp::ctl {

/// A stage over its prediction by more than this factor (measured /
/// predicted peak) is named in the report.
inline constexpr double kMemoryOverPredictionRatio = 1.1;

/// Peak activation memory per stage over the report's window.
struct ActivationMemory {
  /// Whether any step of the window carries a measured peak (workers that
  /// predate the measurement send 0).
  bool measured = false;
  /// Whether any step of the window carries a predicted peak (a
  /// coordinator that predates it sends 0). With neither, nothing is shown.
  bool predicted = false;
  /// Per stage, bytes: the largest measured peak over the window's steps
  /// (0 where none was measured) and the predicted peak of that same step
  /// (of the window's last step where none was measured): a re-solve or a
  /// new cost model may change the prediction between steps.
  std::vector<double> peak_bytes;
  std::vector<double> predicted_peak_bytes;
  /// Per stage, peak_bytes / predicted_peak_bytes; unset where either is 0.
  std::vector<std::optional<double>> ratio;
  /// The stage with the largest ratio, when that ratio exceeds
  /// kMemoryOverPredictionRatio.
  std::optional<int> over_prediction_stage;
};

/// Builds the memory of `window` (steps, ascending) of a job of `stages`
/// pipeline stages. Thread-safe (pure).
ActivationMemory BuildActivationMemory(const std::vector<v1::StepSummary>& window, int stages);

/// A table (STAGE, MEASURED_MIB, PREDICTED_MIB, RATIO; "-" where not
/// measured) and one line: "memory: stage 1 held 1.42x its predicted
/// activation memory (...)", or that every stage stayed within 1.1x, or that
/// the workers did not measure it. Empty when neither measured nor
/// predicted. MiB = 2^20 bytes.
std::string ActivationMemoryText(const ActivationMemory& memory);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_MEMORY_H_
