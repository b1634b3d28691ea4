#include "coordinator/service/rpc_scope.h"

#include <grpc/grpc_security_constants.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/call_auth.h"
#include "common/status_grpc.h"

namespace zbpp::coordinator {

std::string_view ServiceOf(std::string_view method) {
  if (method.size() < 2 || method[0] != '/') return "";
  const size_t slash = method.find('/', 1);
  if (slash == std::string_view::npos) return "";
  return method.substr(1, slash - 1);
}

namespace {

struct MethodCheck {
  const char* method;
  CallerCheck check;
};

// What each zbpp.v1 method asks of its caller, the one declaration of it.
// Jobs name their workers, so reading them needs the token too; a worker's
// own calls (its Session, its reports, its rendezvous scope) need its
// credential, so that one worker cannot speak for another (worker.proto,
// "Authentication"). rpc_auth_test walks every method of the protos against
// this table.
constexpr MethodCheck kCallerChecks[] = {
    {"/zbpp.v1.JobService/SubmitJob", CallerCheck::kBearerToken},
    {"/zbpp.v1.JobService/GetJob", CallerCheck::kBearerToken},
    {"/zbpp.v1.JobService/ListJobs", CallerCheck::kBearerToken},
    {"/zbpp.v1.JobService/CancelJob", CallerCheck::kBearerToken},
    {"/zbpp.v1.JobService/ListSteps", CallerCheck::kBearerToken},
    {"/zbpp.v1.JobService/GetScheduleVersion", CallerCheck::kBearerToken},
    {"/zbpp.v1.JobService/WatchJob", CallerCheck::kBearerToken},
    {"/zbpp.v1.WorkerService/RegisterWorker", CallerCheck::kBearerToken},
    {"/zbpp.v1.WorkerService/Session", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.WorkerService/ReportStep", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.WorkerService/ReportProfile", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.WorkerService/ListWorkers", CallerCheck::kBearerToken},
    {"/zbpp.v1.RendezvousService/Set", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.RendezvousService/Get", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.RendezvousService/Wait", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.RendezvousService/Add", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.RendezvousService/CompareSet", CallerCheck::kWorkerCredential},
    {"/zbpp.v1.RendezvousService/Delete", CallerCheck::kWorkerCredential},
};

// The value of metadata `key` of the call; empty when it has none.
std::string_view MetadataValue(const grpc::ServerContextBase& context, const char* key) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(key);
  return it == metadata.end() ? std::string_view()
                              : std::string_view(it->second.data(), it->second.size());
}

}  // namespace

std::optional<CallerCheck> CallerCheckOf(std::string_view method) {
  for (const MethodCheck& entry : kCallerChecks) {
    if (method == entry.method) return entry.check;
  }
  return std::nullopt;
}

std::vector<std::string_view> DeclaredMethods() {
  std::vector<std::string_view> methods;
  for (const MethodCheck& entry : kCallerChecks) methods.push_back(entry.method);
  return methods;
}

RpcScope::RpcScope(const RpcPolicy& policy, const grpc::ServerContextBase& context,
                   const char* method)
    : metrics_(policy.metrics),
      context_(context),
      method_(method),
      check_(CallerCheckOf(method)),
      start_(absl::Now()) {
  if (!check_.has_value()) {
    admitted_ = absl::InternalError(
        absl::StrCat(method, ": no caller check declared (rpc_scope.cc, kCallerChecks)"));
    return;
  }
  const std::string& token = policy.bearer_token;
  if (token.empty()) return;
  const auto& metadata = context.client_metadata();
  if (metadata.find("authorization") == metadata.end()) {
    admitted_ = Refuse(metrics::RefusalReason::kMissingToken,
                       "missing \"authorization: Bearer <token>\" metadata");
    return;
  }
  const std::string expected = "Bearer " + token;
  const std::string_view given = MetadataValue(context, "authorization");
  // Compare every byte so the time taken does not reveal the prefix.
  bool same = given.size() == expected.size();
  unsigned char diff = 0;
  for (size_t i = 0; i < std::min(given.size(), expected.size()); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  if (!same || diff != 0) {
    admitted_ = Refuse(metrics::RefusalReason::kWrongToken, "wrong bearer token");
  }
}

absl::Status RpcScope::Refuse(metrics::RefusalReason reason, std::string message) {
  if (metrics_ != nullptr) metrics_->CountRefusal(ServiceOf(method_), reason);
  return absl::UnauthenticatedError(std::move(message));
}

absl::Status RpcScope::AdmitWorker(const Coordinator& coordinator,
                                   const std::string& worker_id) {
  if (!admitted_.ok()) return admitted_;
  if (check_ != CallerCheck::kWorkerCredential) {
    return absl::InternalError(absl::StrCat(
        method_, ": checks a worker credential its declaration (kCallerChecks) does not ask for"));
  }
  absl::Status status = coordinator.AuthenticateWorker(
      worker_id, MetadataValue(context_, kWorkerCredentialMetadataKey));
  if (absl::IsUnauthenticated(status)) {
    status = Refuse(metrics::RefusalReason::kWrongWorkerCredential,
                    absl::StrCat("worker ", worker_id, ": missing or wrong \"",
                                 kWorkerCredentialMetadataKey,
                                 "\" metadata (the credential RegisterWorker returned)"));
  }
  worker_admitted_ = status.ok();
  return status;
}

grpc::Status RpcScope::Finish(const absl::Status& status) {
  absl::Status result = status;
  if (result.ok() && check_ == CallerCheck::kWorkerCredential && !worker_admitted_) {
    result = absl::InternalError(absl::StrCat(
        method_, ": ended without checking the worker credential it declares"));
  }
  if (metrics_ != nullptr) {
    metrics_->ObserveRpc(method_, result.code(), absl::ToDoubleSeconds(absl::Now() - start_));
  }
  return ToGrpcStatus(result);
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
