#ifndef ZBPP_COORDINATOR_SERVICE_RENDEZVOUS_SERVICE_H_
#define ZBPP_COORDINATOR_SERVICE_RENDEZVOUS_SERVICE_H_

#include <string>
#include <utility>

#include "coordinator/core/coordinator.h"
#include "coordinator/service/rpc_scope.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"

namespace zbpp::coordinator {

/// zbpp.v1.RendezvousService over the Coordinator's RendezvousStore. Every
/// call first checks the bearer token (when set) and the credential of the
/// worker it names (kCallerChecks; UNAUTHENTICATED otherwise), then that the worker holds
/// the attempt of the scope (PERMISSION_DENIED otherwise); Get and Wait
/// block until their timeout or the call's deadline, whichever is first.
/// Thread-safe.
class RendezvousServiceImpl final
    : public zbpp::v1::RendezvousService::Service {
 public:
  struct Options {
    /// The core; not owned, required.
    Coordinator* coordinator = nullptr;
    /// The caller's checks and the calls' record (RpcScope, kCallerChecks).
    RpcPolicy rpc;
  };

  explicit RendezvousServiceImpl(Options options)
      : options_(std::move(options)) {}

  grpc::Status Set(grpc::ServerContext* context,
                   const zbpp::v1::SetRequest* request,
                   zbpp::v1::SetResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context,
                   const zbpp::v1::GetRequest* request,
                   zbpp::v1::GetResponse* response) override;
  grpc::Status Wait(grpc::ServerContext* context,
                    const zbpp::v1::WaitRequest* request,
                    zbpp::v1::WaitResponse* response) override;
  grpc::Status Add(grpc::ServerContext* context,
                   const zbpp::v1::AddRequest* request,
                   zbpp::v1::AddResponse* response) override;
  grpc::Status CompareSet(grpc::ServerContext* context,
                          const zbpp::v1::CompareSetRequest* request,
                          zbpp::v1::CompareSetResponse* response) override;
  grpc::Status Delete(grpc::ServerContext* context,
                      const zbpp::v1::DeleteRequest* request,
                      zbpp::v1::DeleteResponse* response) override;

 private:
  /// The checks every RPC makes first, in that order: token, request,
  /// credential (kCallerChecks, through `rpc`), access to the scope.
  absl::Status Check(RpcScope& rpc, const zbpp::v1::RendezvousContext& request) const;

  const Options options_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_RENDEZVOUS_SERVICE_H_
