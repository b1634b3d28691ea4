#include "common/sha256.h"

#include <openssl/sha.h>

#include "absl/strings/escaping.h"

namespace zbpp {

std::string Sha256(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::string Sha256Hex(std::string_view bytes) { return absl::BytesToHexString(Sha256(bytes)); }

}  // namespace zbpp
