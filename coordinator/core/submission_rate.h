#ifndef ZBPP_COORDINATOR_CORE_SUBMISSION_RATE_H_
#define ZBPP_COORDINATOR_CORE_SUBMISSION_RATE_H_

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace zbpp::coordinator {

/// A token bucket over job submissions (CoordinatorOptions
/// max_submissions_per_second, submission_burst): a submission takes one
/// token; tokens come back at `rate_per_second` up to `burst`. A flood of
/// submissions (1,001 submit-and-cancel pairs took 0.6 s) is refused past
/// the burst instead of filling the job table and the store.
///
/// Thread-compatible: the Coordinator uses it under its mutex.
class SubmissionRate {
 public:
  /// `rate_per_second` > 0 and `burst` >= 1 (CheckCoordinatorOptions);
  /// the bucket starts full.
  SubmissionRate(double rate_per_second, double burst)
      : rate_per_second_(rate_per_second), burst_(burst), tokens_(burst) {}

  /// Takes a token at `now`: OK, or ResourceExhausted saying the limit
  /// (naming the daemon's flag) and when a token comes back. A `now` before
  /// the last call adds nothing.
  absl::Status Take(absl::Time now);

 private:
  const double rate_per_second_;
  const double burst_;
  double tokens_;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_SUBMISSION_RATE_H_
