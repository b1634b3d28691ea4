#include "coordinator/service/server_policies.h"

#include <memory>
#include <utility>
#include <vector>

#include <grpcpp/resource_quota.h>
#include <grpcpp/support/server_interceptor.h>

namespace zbpp::coordinator {
namespace {

using grpc::experimental::InterceptionHookPoints;

// gRPC's answer to a request that does not parse is INTERNAL with protobuf's
// InitializationErrorString, which is empty for proto3 messages.
class UnparsableRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::INTERNAL &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            "the request does not parse as its zbpp.v1 message (every "
            "string field must be UTF-8)"));
      }
    }
    methods->Proceed();
  }
};

class UnparsableRequestInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo*) override {
    return new UnparsableRequestInterceptor();
  }
};

}  // namespace

void ApplyServerPolicies(const ServerPolicies& policies,
                         grpc::ServerBuilder& builder) {
  if (policies.max_threads > 0) {
    grpc::ResourceQuota quota("zbpp-coordinator");
    quota.SetMaxThreads(policies.max_threads);
    builder.SetResourceQuota(quota);
  }
  std::vector<std::unique_ptr<
      grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<UnparsableRequestInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
}

}  // namespace zbpp::coordinator
