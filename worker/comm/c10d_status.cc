#include "worker/comm/c10d_status.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>
#include <mutex>

#include <c10/util/Exception.h>
#include <gloo/common/error.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace zbpp::worker {

absl::Status CurrentExceptionToStatus(const std::string& context) {
  std::string what;
  absl::StatusCode code = absl::StatusCode::kInternal;
  try {
    throw;
  } catch (const c10d::TimeoutError& e) {
    what = e.what_without_backtrace();
    code = absl::StatusCode::kDeadlineExceeded;
  } catch (const c10::Error& e) {
    // what() appends a stack trace; the message alone is what helps.
    what = e.what_without_backtrace();
  } catch (const gloo::IoException& e) {
    what = e.what();
    code = absl::StatusCode::kUnavailable;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  std::string lower = what;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "wait timeout") ||
      absl::StrContains(lower, "deadline_exceeded")) {
    code = absl::StatusCode::kDeadlineExceeded;
  }
  return absl::Status(code, absl::StrCat(context, ": ", what));
}

std::chrono::milliseconds ToMilliseconds(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return kNoTimeout;
  return std::chrono::milliseconds(std::max<int64_t>(
      1, absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)))));
}

absl::Status WaitForWork(c10d::Work& work, absl::Duration timeout, const std::string& what) {
  try {
    if (!work.wait(ToMilliseconds(timeout))) {
      return absl::AbortedError(absl::StrCat(what, ": aborted"));
    }
    return absl::OkStatus();
  } catch (...) {
    return CurrentExceptionToStatus(what);
  }
}

void DisableFlightRecorderUnlessSet() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0); });
}

}  // namespace zbpp::worker
