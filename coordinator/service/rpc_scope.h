#ifndef ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_
#define ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_

#include <string>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_grpc.h"
#include "metrics/coordinator_metrics.h"

namespace zbpp::coordinator {

/// The edge of one RPC: converts the core's Status (STYLE.md 2) and records
/// the call's latency and code (zbpp_rpc_duration_seconds). Not
/// thread-safe; one per call.
class RpcScope {
 public:
  /// `metrics` may be null (no metric); `method` is the full gRPC name.
  RpcScope(metrics::CoordinatorMetrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {}

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

/// OK when `token` is empty (no authentication configured) or the call
/// carries metadata "authorization: Bearer <token>"; Unauthenticated
/// otherwise.
absl::Status CheckBearerToken(const grpc::ServerContext& context,
                              const std::string& token);

/// The earlier of `now + timeout_seconds` and the call's deadline.
absl::Time WaitDeadline(const grpc::ServerContext& context,
                        double timeout_seconds);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_RPC_SCOPE_H_
