#ifndef ZBPP_COMMON_SHA256_H_
#define ZBPP_COMMON_SHA256_H_

#include <string>
#include <string_view>

namespace zbpp {

/// SHA-256 (FIPS 180-4) of `bytes`, by OpenSSL's libcrypto: the 32-byte
/// digest. Thread-safe (pure).
std::string Sha256(std::string_view bytes);

/// Sha256(bytes) as 64 lowercase hexadecimal digits, e.g. the name under
/// which the coordinator stores a schedule file once per content.
/// Thread-safe (pure).
std::string Sha256Hex(std::string_view bytes);

}  // namespace zbpp

#endif  // ZBPP_COMMON_SHA256_H_
