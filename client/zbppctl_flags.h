// zbppctl's command line: global flags, one command, its argument and
// --format, parsed into a plain value (no I/O).

#ifndef ZBPP_CLIENT_ZBPPCTL_FLAGS_H_
#define ZBPP_CLIENT_ZBPPCTL_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/channel_credentials.h"

namespace zbpp::ctl {

/// zbppctl's commands (docs/control-plane.md, "The control plane"), plus the help request.
enum class Command {
  kHelp,      ///< --help / -h / help: print the usage, exit 0.
  kSubmit,    ///< submit FILE: convert the YAML spec, SubmitJob, print the id.
  kList,      ///< list: ListJobs, one row per job.
  kStatus,    ///< status JOB [--format table|json]: GetJob (FULL).
  kWatch,     ///< watch JOB: WatchJob until the job ends.
  kCancel,    ///< cancel JOB: CancelJob.
  kSchedule,  ///< schedule JOB [--format table|svg|chrome-trace|measured-trace]
              ///< [--schedule-version N | --step S].
  kWorkers,   ///< workers: ListWorkers, one row per worker.
  kReport,    ///< report JOB [--format table|json]: GetJob + ListSteps.
  kCosts,     ///< costs JOB [--schedule-version N | --step S]: a version's
              ///< cost model as a cost file.
  kExport,    ///< export JOB --out DIR [--format safetensors]: the job's last
              ///< checkpoint as a Hugging Face model directory.
};

/// Address used when neither --coordinator nor $ZBPP_COORDINATOR is given.
inline constexpr char kDefaultCoordinator[] = "127.0.0.1:50051";

/// Deadline of every unary call (and watch's connect), seconds.
inline constexpr double kDefaultTimeoutSeconds = 10.0;

/// One parsed invocation.
struct CtlOptions {
  /// Coordinator gRPC address, host:port.
  std::string coordinator = kDefaultCoordinator;
  /// File holding the bearer token (surrounding whitespace ignored); empty
  /// when no token is sent.
  std::string token_file;
  /// TLS files (--tls-ca, --tls-cert, --tls-key); all empty: plaintext.
  ClientTlsFiles tls;
  /// Deadline of each unary RPC and of watch's connection, seconds; > 0.
  double timeout_seconds = kDefaultTimeoutSeconds;
  Command command = Command::kHelp;
  /// FILE for submit, JOB for status, watch, cancel and schedule; empty for
  /// the others.
  std::string argument;
  /// Output format: "table" (default), "json" (status), "svg" or
  /// "chrome-trace" (schedule).
  std::string format = "table";
  /// --schedule-version N (schedule, costs): that schedule version of the
  /// job, >= 1; 0 when absent (the command's default version).
  int64_t schedule_version = 0;
  /// --step S (schedule, costs): the version in force at optimizer step S
  /// (0-based, >= 0; api/schedule_version.h VersionInForce); unset when
  /// absent. Never set together with schedule_version.
  std::optional<int64_t> step;
  /// --out DIR (export, required): the model directory to write.
  std::string out_dir;
  /// --force (export only, takes no value): write into a non-empty --out,
  /// replacing the export's own files there (scripts/hf/export.py).
  bool force = false;
};

/// The command's name as typed ("submit", ...).
const char* CommandName(Command command);

/// The usage text printed by --help and named by usage errors.
const char* UsageText();

/// Parses `args` (argv without the program name). Global flags
/// (--coordinator, --token-file, --timeout) may appear before or after the
/// command; --format only with status, schedule and report; --schedule-version
/// and --step (one of them) only with schedule (not --format measured-trace:
/// the last step's version draws it) and costs. Flags take their value
/// as `--flag value` or `--flag=value`. `default_coordinator` (from
/// $ZBPP_COORDINATOR; empty means kDefaultCoordinator) applies when
/// --coordinator is absent.
///
/// Errors: InvalidArgument (the caller exits 2) for a missing or unknown
/// command, a missing or extra positional argument, an unknown or repeated
/// flag, a flag without a value, a JOB that is not UTF-8 ("JOB: not valid
/// UTF-8 (byte 0xE9 at offset 4)"; protobuf cannot carry it), a --timeout that is not a positive finite
/// number, a --format the command does not offer, a --schedule-version
/// that is not an integer >= 1, a --step that is not an integer >= 0, either
/// where the command (format) does not take it, or both together.
/// Thread-safe (pure).
absl::StatusOr<CtlOptions> ParseCommandLine(
    const std::vector<std::string>& args,
    const std::string& default_coordinator);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_FLAGS_H_
