#ifndef ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_
#define ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_grpc.h"
#include "coordinator/core/coordinator.h"
#include "metrics/coordinator_metrics.h"

namespace zbpp::coordinator {

/// The service part of a full gRPC method name:
/// "/zbpp.v1.JobService/SubmitJob" -> "zbpp.v1.JobService"; "" when `method`
/// is not of that form. The result views `method`.
std::string_view ServiceOf(std::string_view method);

/// The edge of one RPC: converts the core's absl::Status to grpc::Status
/// (common/status_grpc.h), records the call's latency and code
/// (zbpp_rpc_duration_seconds) and counts the calls it refuses
/// (zbpp_rpc_refusals_total). Not thread-safe; one per call.
class RpcScope {
 public:
  /// `metrics` may be null (no metric); `method` is the full gRPC name, a
  /// string that outlives the scope (a literal).
  RpcScope(metrics::CoordinatorMetrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {}

  /// OK when `token` is empty (no authentication configured) or the call
  /// carries metadata "authorization: Bearer <token>" (compared in time
  /// independent of where it differs); otherwise Unauthenticated, and the
  /// refusal is counted under the method's service with reason
  /// missing_token or wrong_token.
  absl::Status CheckBearerToken(const grpc::ServerContextBase& context,
                                const std::string& token);

  /// OK when the call carries metadata kWorkerCredentialMetadataKey
  /// ("zbpp-worker-credential") holding the credential `worker_id`
  /// registered with (Coordinator::AuthenticateWorker). NotFound for an
  /// unknown worker (it must register again); otherwise Unauthenticated
  /// naming the worker and the key, never the value, and the refusal is
  /// counted with reason wrong_worker_credential.
  absl::Status CheckWorkerCredential(const grpc::ServerContextBase& context,
                                     const Coordinator& coordinator,
                                     const std::string& worker_id);

  /// Records the call and returns `status` as a grpc::Status.
  grpc::Status Finish(const absl::Status& status) {
    if (metrics_ != nullptr) {
      metrics_->ObserveRpc(method_, status.code(),
                           absl::ToDoubleSeconds(absl::Now() - start_));
    }
    return ToGrpcStatus(status);
  }

 private:
  metrics::CoordinatorMetrics* const metrics_;
  const char* const method_;
  const absl::Time start_;
};

/// Refuses every call whose TLS connection presented no client
/// certificate, before any handler (or the health and reflection services)
/// runs: UNAUTHENTICATED "client certificate required", counted in
/// zbpp_rpc_refusals_total with reason missing_client_certificate.
///
/// Install it with grpc::ServerCredentials::SetAuthMetadataProcessor on SSL
/// credentials that request and verify a client certificate without
/// requiring one at the handshake
/// (GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY): a certificate the CA
/// did not sign still fails the handshake, so a certificate in the
/// connection's auth context is a verified one, and a client without one
/// gets a status it can read instead of a failed connection, which no
/// handler could count. Runs inline on gRPC's thread (IsBlocking() is
/// false: a property lookup and a counter). Thread-safe.
class ClientCertificateCheck final : public grpc::AuthMetadataProcessor {
 public:
  struct Options {
    /// Where refusals are counted; not owned, outlives the server; null for
    /// none.
    metrics::CoordinatorMetrics* metrics = nullptr;
    /// Full names of the services whose refusals are labelled with their
    /// own name ("zbpp.v1.WorkerService", ...); a call to any other
    /// (health, reflection, an unknown name) is labelled "other", so a
    /// client cannot grow the label set.
    std::vector<std::string> services;
  };

  explicit ClientCertificateCheck(Options options)
      : options_(std::move(options)) {}

  bool IsBlocking() const override { return false; }

  /// OK when `context` holds the peer's certificate
  /// (GRPC_X509_PEM_CERT_PROPERTY_NAME); Unauthenticated otherwise. Reads
  /// ":path" from `auth_metadata` for the label; consumes nothing.
  grpc::Status Process(const InputMetadata& auth_metadata,
                       grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const Options options_;
};

/// Longest job id a request may name, bytes (the coordinator's are
/// "job-<n>").
inline constexpr size_t kMaxJobIdBytes = 64;

/// OK for a request's job id; InvalidArgument naming job_id when it is
/// empty or longer than kMaxJobIdBytes (it would be echoed in errors).
absl::Status CheckJobId(const std::string& job_id);

/// The earlier of `now + timeout_seconds` and the call's deadline.
absl::Time WaitDeadline(const grpc::ServerContext& context,
                        double timeout_seconds);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_
