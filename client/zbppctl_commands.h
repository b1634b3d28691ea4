// zbppctl's commands: each calls the coordinator once (or streams), prints
// its result and returns the process exit code.

#ifndef ZBPP_CLIENT_ZBPPCTL_COMMANDS_H_
#define ZBPP_CLIENT_ZBPPCTL_COMMANDS_H_

#include <ostream>

#include "absl/time/time.h"
#include "client/zbppctl_client.h"
#include "client/zbppctl_flags.h"

namespace zbpp::ctl {

/// Exit codes of zbppctl.
inline constexpr int kExitOk = 0;
/// Any error: unreachable coordinator, rejected spec, unknown job, ...
inline constexpr int kExitError = 1;
/// Bad command line.
inline constexpr int kExitUsage = 2;
/// `watch`: the job ended FAILED.
inline constexpr int kExitJobFailed = 3;
/// `watch`: the job ended CANCELLED.
inline constexpr int kExitJobCancelled = 4;

/// Where a command writes, and what it needs from the process.
struct CommandIo {
  std::ostream& out;  ///< Results (ids, tables, JSON, SVG, watch lines).
  std::ostream& err;  ///< One line "zbppctl: ..." per error.
  /// stdout is a terminal: `watch` draws a progress bar.
  bool out_is_terminal = false;
  /// For ages in tables.
  absl::Time now = absl::UnixEpoch();
};

/// Runs `options.command` (not kHelp) against `client`. Results go to
/// `io.out`; an error prints exactly one line "zbppctl: <why>" to `io.err`
/// and returns kExitError; `watch` returns kExitOk, kExitJobFailed or
/// kExitJobCancelled by the job's final state.
int RunCommand(const CtlOptions& options, CoordinatorClient& client,
               const CommandIo& io);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_COMMANDS_H_
