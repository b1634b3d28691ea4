#include "common/call_auth.h"

#include <grpcpp/client_context.h>

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/read_file.h"

namespace zbpp {

void AddCallMetadata(const CallMetadata& metadata, grpc::ClientContext& context) {
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
}

CallMetadata BearerTokenMetadata(const std::string& token) {
  if (token.empty()) return {};
  return {{"authorization", "Bearer " + token}};
}

double TokenEntropyBits(const std::string& token) {
  bool lower = false, upper = false, digit = false, symbol = false, other = false;
  for (const char c : token) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 'a' && byte <= 'z') {
      lower = true;
    } else if (byte >= 'A' && byte <= 'Z') {
      upper = true;
    } else if (byte >= '0' && byte <= '9') {
      digit = true;
    } else if (byte >= 0x20 && byte < 0x7f) {
      symbol = true;
    } else {
      other = true;
    }
  }
  const int alphabet = 26 * lower + 26 * upper + 10 * digit + 33 * symbol + 128 * other;
  return alphabet <= 1 ? 0 : static_cast<double>(token.size()) * std::log2(alphabet);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadFileToString(path, absl::StrCat("token file ", path));
  if (!text.ok()) return absl::FailedPreconditionError(text.status().message());
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, " is empty"));
  }
  constexpr char kHowTo[] = "make one with: openssl rand -hex 32 > FILE";
  if (token == kPlaceholderToken) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path, " holds the placeholder token of the Kubernetes example; ", kHowTo));
  }
  if (const double bits = TokenEntropyBits(token); bits < kMinTokenEntropyBits) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token file %s: the token is too weak to guard the coordinator (about %.0f bits of "
        "entropy from %d characters, at least %.0f needed); %s",
        path, bits, token.size(), kMinTokenEntropyBits, kHowTo));
  }
  return token;
}

}  // namespace zbpp
