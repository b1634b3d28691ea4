#include "coordinator/service/rendezvous_service.h"

#include <string>
#include <vector>

#include "coordinator/service/rpc_scope.h"

namespace zbpp::coordinator {

absl::Status RendezvousServiceImpl::Check(
    RpcScope& rpc, const zbpp::v1::RendezvousContext& request) const {
  if (!rpc.admitted().ok()) return rpc.admitted();
  if (request.worker_id().empty() || request.scope().empty()) {
    return absl::InvalidArgumentError(
        "context.worker_id and context.scope: required");
  }
  if (absl::Status auth = rpc.AdmitWorker(*options_.coordinator, request.worker_id());
      !auth.ok()) {
    return auth;
  }
  return options_.coordinator->CheckRendezvousAccess(request.worker_id(),
                                                     request.scope());
}

grpc::Status RendezvousServiceImpl::Set(grpc::ServerContext* context,
                                        const zbpp::v1::SetRequest* request,
                                        zbpp::v1::SetResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.RendezvousService/Set");
  if (absl::Status s = Check(rpc, request->context()); !s.ok()) {
    return rpc.Finish(s);
  }
  return rpc.Finish(options_.coordinator->rendezvous().Set(
      request->context().scope(), request->key(), request->value()));
}

grpc::Status RendezvousServiceImpl::Get(grpc::ServerContext* context,
                                        const zbpp::v1::GetRequest* request,
                                        zbpp::v1::GetResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.RendezvousService/Get");
  if (absl::Status s = Check(rpc, request->context()); !s.ok()) {
    return rpc.Finish(s);
  }
  absl::StatusOr<std::string> value = options_.coordinator->rendezvous().Get(
      request->context().scope(), request->key(),
      WaitDeadline(*context, request->timeout_seconds()),
      [context] { return context->IsCancelled(); });
  if (value.ok()) response->set_value(*std::move(value));
  return rpc.Finish(value.status());
}

grpc::Status RendezvousServiceImpl::Wait(grpc::ServerContext* context,
                                         const zbpp::v1::WaitRequest* request,
                                         zbpp::v1::WaitResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.RendezvousService/Wait");
  if (absl::Status s = Check(rpc, request->context()); !s.ok()) {
    return rpc.Finish(s);
  }
  std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  return rpc.Finish(options_.coordinator->rendezvous().Wait(
      request->context().scope(), keys,
      WaitDeadline(*context, request->timeout_seconds()),
      [context] { return context->IsCancelled(); }));
}

grpc::Status RendezvousServiceImpl::Add(grpc::ServerContext* context,
                                        const zbpp::v1::AddRequest* request,
                                        zbpp::v1::AddResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.RendezvousService/Add");
  if (absl::Status s = Check(rpc, request->context()); !s.ok()) {
    return rpc.Finish(s);
  }
  absl::StatusOr<int64_t> value = options_.coordinator->rendezvous().Add(
      request->context().scope(), request->key(), request->delta());
  if (value.ok()) response->set_value(*value);
  return rpc.Finish(value.status());
}

grpc::Status RendezvousServiceImpl::CompareSet(
    grpc::ServerContext* context, const zbpp::v1::CompareSetRequest* request,
    zbpp::v1::CompareSetResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.RendezvousService/CompareSet");
  if (absl::Status s = Check(rpc, request->context()); !s.ok()) {
    return rpc.Finish(s);
  }
  absl::StatusOr<std::string> value =
      options_.coordinator->rendezvous().CompareSet(
          request->context().scope(), request->key(), request->expected(),
          request->desired());
  if (value.ok()) response->set_value(*std::move(value));
  return rpc.Finish(value.status());
}

grpc::Status RendezvousServiceImpl::Delete(grpc::ServerContext* context,
                                           const zbpp::v1::DeleteRequest* request,
                                           zbpp::v1::DeleteResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.RendezvousService/Delete");
  if (absl::Status s = Check(rpc, request->context()); !s.ok()) {
    return rpc.Finish(s);
  }
  response->set_deleted(options_.coordinator->rendezvous().Delete(
      request->context().scope(), request->key()));
  return rpc.Finish(absl::OkStatus());
}

}  // namespace zbpp::coordinator
