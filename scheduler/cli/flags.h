// Command-line flags of zbpp-sched: `--name value` pairs and their readers.

#ifndef ZBPP_SCHEDULER_CLI_FLAGS_H_
#define ZBPP_SCHEDULER_CLI_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::sched::cli {

/// Flag values by name, without the leading "--" (e.g. "stages" -> "8").
using FlagMap = std::map<std::string, std::string>;

/// Whether `status` blames the user (bad flags, a problem the schedule cannot
/// serve: InvalidArgument, NotFound, ResourceExhausted, OutOfRange), so that
/// the tool exits 2 rather than 1.
bool IsUsageError(const absl::Status& status);

/// Splits `--name value` and `--name=value` pairs for `command` (named in
/// the messages) and checks that every flag in `required` is there.
/// Errors: InvalidArgument for a positional argument, a flag outside
/// `allowed`, a flag without a value, a repeated flag, or (after all of
/// those) the first missing required flag.
absl::StatusOr<FlagMap> ParseFlags(const std::vector<std::string>& args,
                                   const std::set<std::string>& allowed,
                                   const std::vector<std::string>& required,
                                   const std::string& command);

/// The integer >= 1 in --`name`, or `fallback` when the flag is absent.
/// Errors: InvalidArgument when the value is not such an integer.
absl::StatusOr<int> IntFlag(const FlagMap& flags, const std::string& name,
                            int fallback);

/// The finite number in --`name` that `ok` accepts, or `fallback` when the
/// flag is absent. `range` words the rule for the error (e.g. ">= 0").
/// Errors: InvalidArgument when the value is not such a number.
absl::StatusOr<double> NumberFlag(const FlagMap& flags, const std::string& name,
                                  double fallback, bool (*ok)(double),
                                  const char* range);

/// The value of --`name` if it is one of `choices` (not empty), or the first
/// choice when the flag is absent. Errors: InvalidArgument listing `choices`.
absl::StatusOr<std::string> ChoiceFlag(const FlagMap& flags,
                                       const std::string& name,
                                       const std::vector<std::string>& choices);

/// The whole text of the file that --`flag` names at `path`. Errors:
/// NotFound `cannot read --FLAG "PATH": REASON`.
absl::StatusOr<std::string> ReadFlagFile(const std::string& flag,
                                         const std::string& path);

}  // namespace zbpp::sched::cli

#endif  // ZBPP_SCHEDULER_CLI_FLAGS_H_
