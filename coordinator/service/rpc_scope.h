#ifndef ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_
#define ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_

#include <optional>
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
#include "coordinator/core/coordinator.h"
#include "metrics/coordinator_metrics.h"

namespace zbpp::coordinator {

/// The service part of a full gRPC method name:
/// "/zbpp.v1.JobService/SubmitJob" -> "zbpp.v1.JobService"; "" when `method`
/// is not of that form. The result views `method`.
std::string_view ServiceOf(std::string_view method);

/// What a zbpp.v1 method asks of its caller. Declared once per method, in
/// the table kCallerChecks (rpc_scope.cc); RpcScope applies it to every call.
/// grpc.health.v1 and reflection are not zbpp.v1 methods: health asks
/// nothing, reflection is not served when a token is set
/// (CoordinatorServer).
enum class CallerCheck {
  /// "authorization: Bearer <token>" when the server has a token.
  kBearerToken,
  /// The bearer token, and metadata kWorkerCredentialMetadataKey holding the
  /// credential RegisterWorker returned to the worker the request names
  /// (worker.proto, "Authentication"), required with or without a token.
  kWorkerCredential,
};

/// The check `method` (a full gRPC name, "/zbpp.v1.WorkerService/ReportStep")
/// declares; nullopt for a name the table does not hold, which RpcScope
/// refuses.
std::optional<CallerCheck> CallerCheckOf(std::string_view method);

/// Every method kCallerChecks declares, in the table's order (for the test
/// that compares it with the protos' services).
std::vector<std::string_view> DeclaredMethods();

/// What every call is checked against and recorded in: one per server,
/// copied into each service's options. Read-only once serving.
struct RpcPolicy {
  /// Where calls (zbpp_rpc_duration_seconds) and refusals
  /// (zbpp_rpc_refusals_total) are recorded; not owned, outlives the
  /// server; null for none.
  metrics::CoordinatorMetrics* metrics = nullptr;
  /// Required as "authorization: Bearer <token>" by every zbpp.v1 method;
  /// empty: none (a worker's credential is required regardless).
  std::string bearer_token;
};

/// The edge of one zbpp.v1 call, the one place its caller is checked and
/// the call recorded: every handler starts one and returns through
/// Finish. On construction it checks the bearer token of the method's
/// CallerCheck; AdmitWorker checks a worker's credential once the request
/// has named the worker; Finish converts the core's absl::Status to
/// grpc::Status (common/status_grpc.h) and records the call's latency and
/// code (zbpp_rpc_duration_seconds). Refusals are UNAUTHENTICATED and
/// counted under the method's service and reason (zbpp_rpc_refusals_total).
///
/// It is a scope in the handler rather than a gRPC server interceptor
/// because gRPC C++ server interceptors cannot end a call before its
/// handler runs (grpc/grpc#24017); a refused SubmitJob must not reach the
/// core. Not thread-safe; one per call, used on the call's thread (the
/// WatchJob reactor's, for streams).
class RpcScope {
 public:
  /// Starts the call of `method` (a full gRPC name; a string that outlives
  /// the scope, a literal) carrying `context`'s metadata; `context` outlives
  /// the scope. admitted() is the verdict on the bearer token.
  RpcScope(const RpcPolicy& policy, const grpc::ServerContextBase& context,
           const char* method);

  /// OK when the caller passed its method's checks so far; otherwise why
  /// not: UNAUTHENTICATED "missing \"authorization: Bearer <token>\"
  /// metadata" or "wrong bearer token" (compared in time independent of
  /// where it differs), or INTERNAL for a method kCallerChecks does not
  /// declare. A handler returns Finish(admitted()) unless it is OK.
  const absl::Status& admitted() const { return admitted_; }

  /// For a kWorkerCredential method, once the request names `worker_id`:
  /// OK when the call carries the credential `worker_id` registered with
  /// (Coordinator::AuthenticateWorker). NotFound for an unknown worker (it
  /// must register again); otherwise UNAUTHENTICATED naming the worker and
  /// the metadata key, never the value, counted with reason
  /// wrong_worker_credential. INTERNAL for a method of kBearerToken (a
  /// handler out of step with the table).
  absl::Status AdmitWorker(const Coordinator& coordinator,
                           const std::string& worker_id);

  /// Records the call and returns `status` as a grpc::Status. A
  /// kWorkerCredential call about to end OK without AdmitWorker having
  /// passed ends INTERNAL instead: the table, not the handler, says which
  /// calls a worker's credential guards.
  grpc::Status Finish(const absl::Status& status);

 private:
  absl::Status Refuse(metrics::RefusalReason reason, std::string message);

  metrics::CoordinatorMetrics* const metrics_;
  const grpc::ServerContextBase& context_;
  const char* const method_;
  const std::optional<CallerCheck> check_;
  const absl::Time start_;
  absl::Status admitted_;
  bool worker_admitted_ = false;
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
