#include "common/call_auth.h"

#include <grpcpp/client_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"

namespace zbpp {

void AddCallMetadata(const CallMetadata& metadata, grpc::ClientContext& context) {
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
}

CallMetadata BearerTokenMetadata(const std::string& token) {
  if (token.empty()) return {};
  return {{"authorization", "Bearer " + token}};
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
  return token;
}

}  // namespace zbpp
