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

/// The least entropy a bearer token may have, in bits (NIST SP 800-63B's
/// bound for a secret that guards a service: 112 bits, rounded up to the
/// strength of a 128-bit key).
inline constexpr double kMinTokenEntropyBits = 128;

/// The placeholder token that deploy/k8s/base shipped before it stopped
/// shipping one; refused wherever it is found.
inline constexpr char kPlaceholderToken[] = "replace-me-with-a-long-random-token";

/// An upper estimate of the entropy of `token`, in bits: its length times
/// log2 of the alphabet its characters come from (the sum of the classes
/// present: 26 lower-case letters, 26 upper-case, 10 digits, 33 other
/// printable ASCII characters, 128 for any other byte). 32 hex digits
/// (`openssl rand -hex 16`) give 165 bits; 8 lower-case letters 38.
double TokenEntropyBits(const std::string& token);

/// The bearer token in `path` (the --token-file of zbppctl, zbpp-worker and
/// zbpp-coordinator: every reader of a token goes through here), surrounding
/// whitespace removed. Errors: FailedPrecondition "cannot read token file F:
/// <errno text>" when it cannot be opened; InvalidArgument naming the file
/// when it holds only whitespace, the placeholder kPlaceholderToken, or a
/// token below kMinTokenEntropyBits (TokenEntropyBits; the message gives the
/// estimate and how to make a strong token, never the token). Reads the
/// file; thread-safe.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace zbpp

#endif  // ZBPP_COMMON_CALL_AUTH_H_
