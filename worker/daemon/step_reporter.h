#ifndef ZBPP_WORKER_DAEMON_STEP_REPORTER_H_
#define ZBPP_WORKER_DAEMON_STEP_REPORTER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::worker {

/// Where a worker's step reports and calibration profiles go: the
/// coordinator's WorkerService.ReportStep and ReportProfile (worker.proto)
/// in the daemon (SessionClient), a recording fake in tests. RunAttempt
/// (attempt_runner.h) reports every step it ran, and the profile of an
/// assignment that asks for one, through one.
///
/// Implementations are thread-safe.
class StepReporter {
 public:
  virtual ~StepReporter() = default;

  /// The id of the worker's current registration, which reports carry
  /// (ReportStepRequest.worker_id).
  virtual std::string worker_id() const = 0;

  /// Sends `report`, waiting at most `timeout` for the answer. OK once the
  /// coordinator accepted it, else the error (e.g. DeadlineExceeded,
  /// Unavailable, or the coordinator's refusal); RunAttempt fails the
  /// attempt on an error.
  virtual absl::Status ReportStep(const v1::ReportStepRequest& report,
                                  absl::Duration timeout) = 0;

  /// Sends a calibration profile (Assignment.profile), waiting at most
  /// `timeout` for the answer; OK once the coordinator accepted it, else
  /// the error as for ReportStep.
  virtual absl::Status ReportProfile(const v1::ReportProfileRequest& profile,
                                     absl::Duration timeout) = 0;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_STEP_REPORTER_H_
