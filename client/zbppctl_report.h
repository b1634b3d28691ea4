#ifndef ZBPP_CLIENT_ZBPPCTL_REPORT_H_
#define ZBPP_CLIENT_ZBPPCTL_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::ctl {

/// What a finished (or running) training job achieved, from its Job and its
/// step summaries (`zbppctl report`).
struct TrainingReport {
  std::string job_id;
  std::string state;       ///< e.g. "SUCCEEDED".
  std::string schedule;    ///< JobSpec schedule name, e.g. "zb-h1".
  int workers = 0;         ///< p.
  int microbatches = 0;    ///< m.
  int64_t steps = 0;       ///< Steps completed.
  /// Training loss (nats per token) of the first and last listed steps.
  double loss_start = 0;
  double loss_end = 0;
  /// Held-out loss at the first and last evaluations; unset without any.
  std::optional<double> eval_loss_start;
  std::optional<double> eval_loss;
  /// Steps averaged below: all but the first tenth (warm-up), at least one.
  int64_t window_steps = 0;
  /// Trained tokens per wall-clock second over the window: step completion
  /// times, so it includes the optimizer, validation and reporting.
  double tokens_per_second = 0;
  /// Median of StepSummary.step_seconds over the window, seconds.
  double step_seconds = 0;
  /// Per pipeline rank, means over the window of the measured bubble rate and
  /// of the simulator's prediction from the measured pass costs; in [0, 1].
  std::vector<double> bubble_rate_measured;
  std::vector<double> bubble_rate_predicted;
  /// Times the job went RECOVERING (a worker lost, the coordinator
  /// restarted): Job.recoveries_total.
  int64_t recoveries = 0;
};

/// Builds the report. FailedPrecondition when the job has no completed step
/// yet. `steps` ascending (CoordinatorClient::ListSteps).
absl::StatusOr<TrainingReport> BuildReport(const v1::Job& job,
                                           const std::vector<v1::StepSummary>& steps);

/// Human-readable form: a summary and a per-stage bubble table.
std::string ReportTable(const TrainingReport& report);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_REPORT_H_
