#ifndef ZBPP_COORDINATOR_CORE_WORKER_CREDENTIAL_H_
#define ZBPP_COORDINATOR_CORE_WORKER_CREDENTIAL_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zbpp::coordinator {

/// A worker credential (RegisterWorkerResponse.credential): 32 lower-case
/// hex digits encoding 128 bits from OpenSSL's CSPRNG (RAND_bytes). Not
/// drawn from an injected generator on purpose: it is a secret, and a
/// seeded generator would make it guessable. Internal when the CSPRNG
/// fails. Thread-safe.
absl::StatusOr<std::string> NewWorkerCredential();

/// The SHA-256 digest of `credential` (32 raw bytes): what the coordinator
/// keeps instead of the secret. Thread-safe (pure).
std::string CredentialDigest(std::string_view credential);

/// True when `a` and `b` are equal; the time taken depends on their sizes
/// only, not on where they differ (CRYPTO_memcmp). Thread-safe (pure).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_WORKER_CREDENTIAL_H_
