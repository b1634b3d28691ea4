#include "coordinator/core/worker_credential.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "common/sha256.h"

namespace zbpp::coordinator {

absl::StatusOr<std::string> NewWorkerCredential() {
  unsigned char bits[16];
  if (RAND_bytes(bits, sizeof(bits)) != 1) {
    return absl::InternalError("the CSPRNG (RAND_bytes) failed");
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bits), sizeof(bits)));
}

std::string CredentialDigest(std::string_view credential) { return Sha256(credential); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace zbpp::coordinator
