#include "common/call_auth.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpcpp/client_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace zbpp {

void AddCallMetadata(const CallMetadata& metadata, grpc::ClientContext& context) {
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read token file ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, " is empty"));
  }
  return token;
}

}  // namespace zbpp
