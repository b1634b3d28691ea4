#ifndef ZBPP_WORKER_DATA_TOKEN_CACHE_H_
#define ZBPP_WORKER_DATA_TOKEN_CACHE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::worker {

/// Reads a token cache file written by WriteTokenCache: the byte tokens
/// (one token per byte, vocabulary 256), as a string of the same length.
///
/// File format: the 8 magic bytes "ZBPPTOK1", the token count as a
/// little-endian uint64, then the tokens.
///
/// Errors: NotFound when the file does not exist; DataLoss (naming the
/// path) when its magic or length is wrong; the errno's code for other read
/// failures. Thread-safe.
absl::StatusOr<std::string> ReadTokenCache(const std::string& path);

/// Writes `tokens` to `path` atomically (AtomicFileWriter): a reader sees no
/// file or a complete one, never a partial one. Creates the parent
/// directories. Errors name the path and the errno text. Thread-safe for
/// different paths; concurrent processes may race on one path (the last
/// complete file wins).
absl::Status WriteTokenCache(const std::string& path,
                             const std::string& tokens);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_TOKEN_CACHE_H_
