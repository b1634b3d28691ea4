#include "coordinator/service/rpc_scope.h"

#include <algorithm>
#include <chrono>

namespace zbpp::coordinator {

absl::Status CheckBearerToken(const grpc::ServerContext& context,
                              const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing \"authorization: Bearer <token>\" metadata");
  }
  const std::string expected = "Bearer " + token;
  const std::string given(it->second.data(), it->second.size());
  // Compare every byte so the time taken does not reveal the prefix.
  bool same = given.size() == expected.size();
  unsigned char diff = 0;
  for (size_t i = 0; i < std::min(given.size(), expected.size()); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  if (!same || diff != 0) {
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

absl::Time WaitDeadline(const grpc::ServerContext& context,
                        double timeout_seconds) {
  absl::Time deadline = absl::Now() + absl::Seconds(std::max(0.0, timeout_seconds));
  const auto call_deadline = context.deadline();
  if (call_deadline != std::chrono::system_clock::time_point::max()) {
    deadline = std::min(deadline, absl::FromChrono(call_deadline));
  }
  return deadline;
}

}  // namespace zbpp::coordinator
