// Running programs from tests: one to completion with its output captured,
// or one in the background (a daemon) whose stdout lines can be read.

#ifndef ZBPP_TESTING_SUBPROCESS_H_
#define ZBPP_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zbpp::ctltest {

/// What a finished program left behind.
struct ProcessResult {
  /// Exit status; -1 when it was killed by a signal (or timed out).
  int exit_code = -1;
  std::string out;  ///< All of stdout.
  std::string err;  ///< All of stderr.
};

/// Runs `argv` (argv[0] a path) with this process's environment plus
/// `env` ("NAME=value" entries, which win), stdin closed, and waits at most
/// `timeout` before killing it (exit_code -1 then).
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {},
                         absl::Duration timeout = absl::Seconds(60));

/// Runs `argv` with stdout and stderr on a new pseudo-terminal (so that
/// isatty(1) holds) and returns what it wrote there in `out` ("\n" arrives
/// as "\r\n"); `err` stays empty.
ProcessResult RunInTerminal(const std::vector<std::string>& argv,
                            absl::Duration timeout = absl::Seconds(60));

/// A program running in the background with its stdout piped to us (stderr
/// is inherited). The destructor sends SIGTERM, waits up to 10 s, then
/// SIGKILLs.
class BackgroundProcess {
 public:
  /// Starts `argv`; nullptr when fork/exec setup fails.
  static std::unique_ptr<BackgroundProcess> Start(
      const std::vector<std::string>& argv);
  ~BackgroundProcess();

  /// The next line of stdout without its newline; nullopt at EOF or after
  /// `timeout`.
  std::optional<std::string> ReadLine(absl::Duration timeout);

  pid_t pid() const { return pid_; }

 private:
  BackgroundProcess(pid_t pid, int out_fd) : pid_(pid), out_fd_(out_fd) {}
  pid_t pid_;
  int out_fd_;
  std::string buffer_;
};

/// A TCP port on 127.0.0.1 that nothing listens on: bound, read back and
/// closed again (another process could take it meanwhile, but that is rare
/// enough for tests). 0 when no socket could be bound.
int ClosedLocalPort();

/// A `zbpp-coordinator` running in the background and the addresses its
/// "listening" line reported.
struct RunningCoordinator {
  std::unique_ptr<BackgroundProcess> process;
  std::string grpc_address;     ///< HOST:PORT of the gRPC services.
  std::string metrics_address;  ///< HOST:PORT of /metrics.
};

/// Starts `binary --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0` with
/// `flags` appended (they must include --db) and waits up to `timeout` for
/// its `zbpp-coordinator listening grpc=... metrics=...` line. Errors:
/// Unavailable when it cannot start, prints no line in time, or prints
/// another line (quoted).
absl::StatusOr<RunningCoordinator> StartCoordinator(
    const std::string& binary, const std::vector<std::string>& flags,
    absl::Duration timeout = absl::Seconds(30));

}  // namespace zbpp::ctltest

#endif  // ZBPP_TESTING_SUBPROCESS_H_
