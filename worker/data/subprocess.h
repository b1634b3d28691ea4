#ifndef ZBPP_WORKER_DATA_SUBPROCESS_H_
#define ZBPP_WORKER_DATA_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zbpp::worker {

/// Runs `argv[0]` (an absolute path; no shell, no PATH search) with the
/// arguments `argv[1..]`, stdin from /dev/null, and returns everything it
/// wrote to stdout.
///
/// Errors: InvalidArgument for an empty argv; NotFound when the program does
/// not exist or is not executable; Internal when it exits non-zero or dies
/// of a signal (the message holds the exit status and the end of its
/// stderr); the errno of a failed pipe/spawn/read otherwise.
///
/// Thread-safe: uses posix_spawn and close-on-exec pipes, so concurrent
/// calls from several threads do not leak descriptors into each other's
/// children.
absl::StatusOr<std::string> RunAndCaptureStdout(
    const std::vector<std::string>& argv);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_SUBPROCESS_H_
