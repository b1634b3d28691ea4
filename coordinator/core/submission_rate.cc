#include "coordinator/core/submission_rate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

absl::Status SubmissionRate::Take(absl::Time now) {
  if (last_ != absl::InfinitePast() && now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * rate_per_second_);
  }
  if (last_ == absl::InfinitePast() || now > last_) last_ = now;
  if (tokens_ < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "max_submissions_per_second: more than ", burst_, " jobs submitted at ",
        rate_per_second_, " per second (zbpp-coordinator --max-submissions-per-second, "
        "--submission-burst); try again in ",
        absl::FormatDuration(absl::Seconds((1 - tokens_) / rate_per_second_))));
  }
  tokens_ -= 1;
  return absl::OkStatus();
}

}  // namespace zbpp::coordinator
