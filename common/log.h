#ifndef ZBPP_COMMON_LOG_H_
#define ZBPP_COMMON_LOG_H_

// The daemons' one logging style: one line per event on stderr, prefixed
// with the program's name ("zbpp-coordinator: ...", "zbpp-worker: ..."), as
// err(3) and warnx(3) write theirs. Debian's Abseil (20220623) predates
// absl/log and the daemons need no levels or files: an operator reads
// stderr (`kubectl logs`), and tests match lines by their prefix.

#include <errno.h>  // program_invocation_short_name (glibc)

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace zbpp {

/// Writes "<program>: <message>\n" to stderr, where <program> is the
/// executable's file name (zbpp-coordinator, zbpp-worker; a test binary's
/// own name in-process). `message` should be one line. Thread-safe: the
/// line is one stdio call, so lines of concurrent threads do not mix.
inline void LogLine(absl::string_view message) {
  const std::string line = absl::StrCat(program_invocation_short_name, ": ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

/// LogLine of absl::StrFormat(format, args...). Thread-safe.
template <typename... Args>
void Logf(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(absl::StrFormat(format, args...));
}

/// Logs "<context>: <status>" unless `status` is OK: for errors no caller
/// can be given (a background tick, a cost model sample refused).
/// Thread-safe.
inline void LogError(const absl::Status& status, absl::string_view context) {
  if (!status.ok()) LogLine(absl::StrCat(context, ": ", status.ToString()));
}

}  // namespace zbpp

#endif  // ZBPP_COMMON_LOG_H_
