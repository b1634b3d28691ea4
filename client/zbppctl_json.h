// `zbppctl status JOB --format json`: the job as JSON with the fields that
// scripts want most lifted to the top.

#ifndef ZBPP_CLIENT_ZBPPCTL_JSON_H_
#define ZBPP_CLIENT_ZBPPCTL_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/zbppctl_report.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::ctl {

/// `job` as one pretty-printed JSON object, ending in a newline.
///
/// The object is the Job's proto3 JSON mapping (proto field names such as
/// `steps_completed`, enums by name such as "JOB_STATE_RUNNING", every
/// field printed, 64-bit integers as strings) with the bulky schedule body
/// left out (`schedule.schedule` and `schedule.cost_model`: see `zbppctl
/// schedule`), plus these derived fields, all plain JSON numbers:
///   `step`                   steps completed (= steps_completed);
///   `steps`                  steps asked for (= spec.steps);
///   `schedule_version`       as a number (the mapping would quote it);
///   `loss`, `tokens_per_second`, `measured_bubble_rate`,
///   `predicted_bubble_rate`  of the last step, null before the first step
///                            (the predicted rate then comes from the
///                            current schedule version) and for nan;
///   `stages`                 per stage: {stage, worker_id,
///                            measured_bubble_rate, predicted_bubble_rate};
///                            from the last step, else from the schedule's
///                            prediction (measured null), else empty.
/// The result still parses as a Job (JsonStringToMessage with
/// ignore_unknown_fields). Errors: Internal if protobuf cannot print it.
absl::StatusOr<std::string> JobStatusJson(const v1::Job& job);

/// `zbppctl report --format json` (the demo's last line): the report as one
/// JSON object on one line, keys as TrainingReport's field names (validation
/// modes by short name, "POST"; first_step_version and last_step_version as
/// objects keyed by VersionRan's fields); missing eval losses, an unset
/// validation_mode, param_checksum or version ran and non-finite numbers
/// are null.
/// `activation_memory` is null when the steps carry no peak, else
/// {measured, stages: [{stage, peak_bytes, predicted_peak_bytes, peak_mib,
/// predicted_peak_mib, ratio}], over_prediction: {stage, ratio} or null};
/// an unmeasured stage's peak and ratio are null. `transitions` is a list,
/// oldest first, of {previous_state, state (Job.transitions' from and to,
/// by short name: "DEGRADED"; not "from", a Python keyword, so that the
/// Python client's dataclass has these keys), time (whole seconds, RFC 3339
/// UTC: "2001-09-09T01:46:40Z"; null when unset), steps_completed, message}.
std::string ReportJson(const TrainingReport& report);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_JSON_H_
