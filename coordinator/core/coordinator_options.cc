#include "coordinator/core/coordinator_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

absl::Status CheckCoordinatorOptions(const CoordinatorOptions& options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("Coordinator::Options.clock is null");
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("Coordinator::Options.store is null");
  }
  if (!(options.heartbeat_interval_seconds > 0) ||
      !(options.heartbeat_timeout_seconds >
        options.heartbeat_interval_seconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 0 < heartbeat_interval_seconds < heartbeat_timeout_seconds, got ",
        options.heartbeat_interval_seconds, " and ",
        options.heartbeat_timeout_seconds));
  }
  if (options.max_recoveries_without_progress < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_recoveries_without_progress must be >= 1, got ",
                     options.max_recoveries_without_progress));
  }
  if (!(options.calibration_timeout_seconds > 0) ||
      !std::isfinite(options.calibration_timeout_seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration_timeout_seconds must be finite and > 0, got ",
                     options.calibration_timeout_seconds));
  }
  if (!(options.max_submissions_per_second > 0) || !(options.submission_burst >= 1) ||
      !std::isfinite(options.max_submissions_per_second) ||
      !std::isfinite(options.submission_burst)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_submissions_per_second must be > 0 and submission_burst >= 1, got ",
        options.max_submissions_per_second, " and ", options.submission_burst));
  }
  if (options.grant_lookahead_steps < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("grant_lookahead_steps must be >= 2 (1 would hold every worker at "
                     "each step boundary), got ",
                     options.grant_lookahead_steps));
  }
  if (options.max_active_jobs < 1 || options.retained_finished_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_active_jobs and retained_finished_jobs must be >= 1, got ",
        options.max_active_jobs, " and ", options.retained_finished_jobs));
  }
  return absl::OkStatus();
}

}  // namespace zbpp::coordinator
