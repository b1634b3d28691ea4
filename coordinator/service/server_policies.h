#ifndef ZBPP_COORDINATOR_SERVICE_SERVER_POLICIES_H_
#define ZBPP_COORDINATOR_SERVICE_SERVER_POLICIES_H_

#include <grpcpp/server_builder.h>

namespace zbpp::coordinator {

/// What the coordinator's gRPC server applies to every call, whoever calls.
struct ServerPolicies {
  /// Cap on the threads the gRPC server runs handlers on (grpc::ResourceQuota
  /// SetMaxThreads); >= 2. A call that finds none free is refused with
  /// RESOURCE_EXHAUSTED by gRPC. A worker's Session stream holds one of them
  /// for its life plus one writer thread of its own, so with the default
  /// of the daemon's --max-threads (2 · --max-workers + 256) a full cluster's
  /// sessions never starve the unary calls.
  int max_threads = 0;
};

/// Installs `policies` on `builder`, and an interceptor that gives a request
/// gRPC could not parse (protobuf refuses a string field that is not UTF-8;
/// gRPC then answers INTERNAL with an empty message) INVALID_ARGUMENT with a
/// message saying so. The coordinator's own handlers never return INTERNAL
/// without a message. Call before BuildAndStart. Thread-compatible.
void ApplyServerPolicies(const ServerPolicies& policies,
                         grpc::ServerBuilder& builder);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_SERVER_POLICIES_H_
