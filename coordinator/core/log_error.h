#ifndef ZBPP_COORDINATOR_CORE_LOG_ERROR_H_
#define ZBPP_COORDINATOR_CORE_LOG_ERROR_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"

namespace zbpp::coordinator {

/// Writes "zbpp-coordinator: <context>: <status>" to stderr unless `status`
/// is OK. The daemon has no logging library (Debian's Abseil predates
/// absl/log); errors the core cannot return to a caller (a background
/// Tick, the cost model's refusal of a sample) are reported here.
/// Thread-safe.
inline void LogError(const absl::Status& status, const std::string& context) {
  if (!status.ok()) {
    std::fprintf(stderr, "zbpp-coordinator: %s: %s\n", context.c_str(),
                 status.ToString().c_str());
  }
}

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_LOG_ERROR_H_
