#include "coordinator/service/worker_service.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "coordinator/service/rpc_scope.h"

namespace zbpp::coordinator {

grpc::Status WorkerServiceImpl::RegisterWorker(
    grpc::ServerContext* context, const zbpp::v1::RegisterWorkerRequest* request,
    zbpp::v1::RegisterWorkerResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.WorkerService/RegisterWorker");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  absl::StatusOr<zbpp::v1::RegisterWorkerResponse> registered =
      options_.coordinator->RegisterWorker(request->worker());
  if (registered.ok()) *response = *std::move(registered);
  return rpc.Finish(registered.status());
}

grpc::Status WorkerServiceImpl::Session(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<zbpp::v1::SessionResponse,
                             zbpp::v1::SessionRequest>* stream) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.WorkerService/Session");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  // Until its first message the stream is nobody's: bounded in number and
  // time apart from the workers' open Sessions (session_gate.h).
  uint64_t ticket = 0;
  if (options_.session_gate != nullptr) {
    absl::StatusOr<uint64_t> admitted =
        options_.session_gate->Admit([context] { context->TryCancel(); });
    if (!admitted.ok()) return rpc.Finish(admitted.status());
    ticket = *admitted;
  }
  zbpp::v1::SessionRequest first;
  const bool read = stream->Read(&first);
  if (options_.session_gate != nullptr) options_.session_gate->Opened(ticket);
  if (!read) {
    return rpc.Finish(absl::CancelledError(
        "stream closed (or cancelled for sending nothing in time) before SessionOpen"));
  }
  if (!first.has_open() || first.open().worker_id().empty() ||
      first.open().address().empty()) {
    return rpc.Finish(absl::InvalidArgumentError(
        "the first Session message must be SessionOpen with a worker_id and "
        "an address"));
  }
  const std::string worker_id = first.open().worker_id();
  if (absl::Status auth = rpc.AdmitWorker(*options_.coordinator, worker_id); !auth.ok()) {
    return rpc.Finish(auth);
  }
  absl::StatusOr<std::shared_ptr<SessionOutbox>> opened =
      options_.coordinator->OpenSession(worker_id, first.open().address());
  if (!opened.ok()) return rpc.Finish(opened.status());
  std::shared_ptr<SessionOutbox> outbox = *std::move(opened);

  // The writer: the only thread that writes to the stream.
  absl::Mutex mu;
  absl::Status ended;  // Why the core closed the outbox (guarded by mu).
  std::thread writer([&] {
    int64_t sequence = 0;  // SessionResponse.sequence, from 1 per stream.
    while (true) {
      std::vector<SessionMessage> messages;
      absl::Status popped = outbox->Pop(
          absl::Now() + absl::Seconds(options_.session_poll_seconds),
          &messages);
      bool written = true;
      for (const SessionMessage& shared : messages) {
        // The core's message is shared by every worker of the job; the
        // copy that carries this stream's sequence is made here, on this
        // stream's thread, not under the core's mutex.
        zbpp::v1::SessionResponse message = *shared;
        message.set_sequence(++sequence);
        if (!stream->Write(message)) {
          written = false;
          break;
        }
      }
      if (!popped.ok()) {
        absl::MutexLock lock(&mu);
        ended = popped;
        if (!absl::IsCancelled(popped)) context->TryCancel();
        return;
      }
      if (!written || context->IsCancelled()) return;
    }
  });
  zbpp::v1::SessionRequest request;
  while (stream->Read(&request)) {
    if (request.has_heartbeat()) {
      // NotFound here means the lease expired: the outbox is closed and
      // the writer cancels the call.
      options_.coordinator->Heartbeat(worker_id, request.heartbeat())
          .IgnoreError();
    }
  }
  options_.coordinator->CloseSession(worker_id, outbox);
  writer.join();
  absl::MutexLock lock(&mu);
  if (!ended.ok() && !absl::IsCancelled(ended)) return rpc.Finish(ended);
  return rpc.Finish(absl::OkStatus());
}

absl::Status WorkerServiceImpl::CheckWorkerReport(RpcScope& rpc,
                                                const std::string& worker_id,
                                                const std::string& job_id) const {
  if (!rpc.admitted().ok()) return rpc.admitted();
  if (worker_id.empty() || job_id.empty()) {
    return absl::InvalidArgumentError("worker_id and job_id: required");
  }
  return rpc.AdmitWorker(*options_.coordinator, worker_id);
}

grpc::Status WorkerServiceImpl::ReportStep(
    grpc::ServerContext* context, const zbpp::v1::ReportStepRequest* request,
    zbpp::v1::ReportStepResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.WorkerService/ReportStep");
  if (absl::Status checked =
          CheckWorkerReport(rpc, request->worker_id(), request->job_id());
      !checked.ok()) {
    return rpc.Finish(checked);
  }
  return rpc.Finish(options_.coordinator->ReportStep(*request));
}

grpc::Status WorkerServiceImpl::ReportProfile(
    grpc::ServerContext* context, const zbpp::v1::ReportProfileRequest* request,
    zbpp::v1::ReportProfileResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.WorkerService/ReportProfile");
  if (absl::Status checked =
          CheckWorkerReport(rpc, request->worker_id(), request->job_id());
      !checked.ok()) {
    return rpc.Finish(checked);
  }
  return rpc.Finish(options_.coordinator->ReportProfile(*request));
}

grpc::Status WorkerServiceImpl::ListWorkers(
    grpc::ServerContext* context, const zbpp::v1::ListWorkersRequest* request,
    zbpp::v1::ListWorkersResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.WorkerService/ListWorkers");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  absl::StatusOr<zbpp::v1::ListWorkersResponse> listed =
      options_.coordinator->ListWorkers(*request);
  if (listed.ok()) *response = *std::move(listed);
  return rpc.Finish(listed.status());
}

}  // namespace zbpp::coordinator
