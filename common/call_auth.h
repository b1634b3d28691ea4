#ifndef ZBPP_COMMON_CALL_AUTH_H_
#define ZBPP_COMMON_CALL_AUTH_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace zbpp {

/// Metadata key of the worker credential (RegisterWorkerResponse.credential)
/// on every call that names a worker_id (worker.proto, "Authentication").
inline constexpr char kWorkerCredentialMetadataKey[] = "zbpp-worker-credential";

/// Metadata a client adds to each call: (key, value) pairs, keys lower-case.
using CallMetadata = std::vector<std::pair<std::string, std::string>>;

/// Adds every pair of `metadata` to `context` (before the call starts).
void AddCallMetadata(const CallMetadata& metadata, grpc::ClientContext& context);

/// The metadata carrying bearer token `token`: "authorization: Bearer
/// <token>", or none when `token` is empty.
CallMetadata BearerTokenMetadata(const std::string& token);

/// The bearer token in `path` (the --token-file of zbppctl, zbpp-worker and
/// zbpp-coordinator), surrounding whitespace removed. Errors:
/// FailedPrecondition "cannot read token file F: <errno text>" when it
/// cannot be opened; InvalidArgument when it holds only whitespace. Reads
/// the file; thread-safe.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace zbpp

#endif  // ZBPP_COMMON_CALL_AUTH_H_
