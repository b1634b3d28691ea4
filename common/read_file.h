// Reading a whole file, for every module that takes a file from the user or
// its cache (flag files, token and PEM files, job specs, corpora).

#ifndef ZBPP_COMMON_READ_FILE_H_
#define ZBPP_COMMON_READ_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace zbpp {

/// The bytes of the file at `path`, as they are (no newline translation).
///
/// Errors: the errno's code (absl::ErrnoToStatus: NotFound when the file
/// does not exist, PermissionDenied when it may not be read,
/// FailedPrecondition for a directory, ...) with the message
/// "cannot read <what>: <the errno's text>", where `what` names the file for
/// the user (the path when empty). Thread-safe.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             const std::string& what = "");

}  // namespace zbpp

#endif  // ZBPP_COMMON_READ_FILE_H_
