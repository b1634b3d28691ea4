#include "coordinator/service/rpc_scope.h"

#include <grpc/grpc_security_constants.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/call_auth.h"

namespace zbpp::coordinator {

std::string_view ServiceOf(std::string_view method) {
  if (method.size() < 2 || method[0] != '/') return "";
  const size_t slash = method.find('/', 1);
  if (slash == std::string_view::npos) return "";
  return method.substr(1, slash - 1);
}

absl::Status RpcScope::CheckBearerToken(const grpc::ServerContextBase& context,
                                        const std::string& token) {
  if (token.empty()) return absl::OkStatus();
  const auto refuse = [this](metrics::RefusalReason reason,
                             const char* message) {
    if (metrics_ != nullptr) metrics_->CountRefusal(ServiceOf(method_), reason);
    return absl::UnauthenticatedError(message);
  };
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return refuse(metrics::RefusalReason::kMissingToken,
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
    return refuse(metrics::RefusalReason::kWrongToken, "wrong bearer token");
  }
  return absl::OkStatus();
}

absl::Status RpcScope::CheckWorkerCredential(const grpc::ServerContextBase& context,
                                             const Coordinator& coordinator,
                                             const std::string& worker_id) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kWorkerCredentialMetadataKey);
  const std::string_view credential =
      it == metadata.end() ? std::string_view()
                           : std::string_view(it->second.data(), it->second.size());
  absl::Status status = coordinator.AuthenticateWorker(worker_id, credential);
  if (!absl::IsUnauthenticated(status)) return status;
  if (metrics_ != nullptr) {
    metrics_->CountRefusal(ServiceOf(method_),
                           metrics::RefusalReason::kWrongWorkerCredential);
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "worker ", worker_id, ": missing or wrong \"",
      kWorkerCredentialMetadataKey,
      "\" metadata (the credential RegisterWorker returned)"));
}

grpc::Status ClientCertificateCheck::Process(
    const InputMetadata& auth_metadata, grpc::AuthContext* context,
    OutputMetadata* /*consumed_auth_metadata*/,
    OutputMetadata* /*response_metadata*/) {
  // With REQUEST_..._AND_VERIFY a certificate that failed verification
  // ended the handshake, so any certificate here is a verified one.
  if (!context->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME).empty()) {
    return grpc::Status::OK;
  }
  if (options_.metrics != nullptr) {
    std::string_view service = "other";
    if (auto path = auth_metadata.find(":path"); path != auth_metadata.end()) {
      const std::string_view named =
          ServiceOf(std::string_view(path->second.data(), path->second.size()));
      if (std::find(options_.services.begin(), options_.services.end(),
                    named) != options_.services.end()) {
        service = named;
      }
    }
    options_.metrics->CountRefusal(
        service, metrics::RefusalReason::kMissingClientCertificate);
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "client certificate required");
}

absl::Status CheckJobId(const std::string& job_id) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: required");
  if (job_id.size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("job_id: at most ", kMaxJobIdBytes,
                                                   " bytes, got ", job_id.size()));
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
