#ifndef ZBPP_COMMON_FLAGS_H_
#define ZBPP_COMMON_FLAGS_H_

#include <signal.h>

#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace zbpp {

/// Parses a daemon's command line of `--name value` / `--name=value` pairs
/// (argv[1..]) into name -> value, names with their dashes. Every flag takes
/// a value; a later repeat wins.
///
/// InvalidArgument "unknown flag --x" for a name not in `known`, "--x needs a
/// value" for a trailing flag without one, and "unexpected argument \"y\""
/// for a word that is not a flag. Pure; thread-safe.
absl::StatusOr<std::map<std::string, std::string>> ParseLongFlags(
    int argc, char** argv, const std::set<std::string>& known);

/// Blocks SIGTERM and SIGINT in the calling thread and returns that set, for
/// a daemon's sigwait. Call first in main, before any thread starts, so that
/// every thread (gRPC's, LibTorch's) inherits the mask and only the sigwait
/// caller receives the signals.
sigset_t BlockTerminationSignals();

}  // namespace zbpp

#endif  // ZBPP_COMMON_FLAGS_H_
