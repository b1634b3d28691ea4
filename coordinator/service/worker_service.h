#ifndef ZBPP_COORDINATOR_SERVICE_WORKER_SERVICE_H_
#define ZBPP_COORDINATOR_SERVICE_WORKER_SERVICE_H_

#include <string>
#include <utility>

#include "coordinator/core/coordinator.h"
#include "coordinator/service/rpc_scope.h"
#include "coordinator/service/session_gate.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator {

/// zbpp.v1.WorkerService over the Coordinator. The Session stream uses the
/// sync API: this handler's thread reads (SessionOpen, then heartbeats into
/// Coordinator::Heartbeat) while a writer thread drains the worker's
/// SessionOutbox into the stream, numbering the shared messages
/// (SessionResponse.sequence from 1) as it writes them. When the core
/// closes the outbox (lease
/// expired, worker forgotten) the call is cancelled so the worker
/// reconnects and learns why from OpenSession.
///
/// Authentication: as kCallerChecks declares (rpc_scope.cc) — the bearer
/// token on every RPC when one is set; Session, ReportStep and
/// ReportProfile also the worker's credential (RpcScope::AdmitWorker);
/// UNAUTHENTICATED otherwise. A Session for a worker that has one open is
/// refused (ALREADY_EXISTS). Thread-safe.
class WorkerServiceImpl final : public zbpp::v1::WorkerService::Service {
 public:
  struct Options {
    /// The core; not owned, required.
    Coordinator* coordinator = nullptr;
    /// The caller's checks and the calls' record (RpcScope, kCallerChecks).
    RpcPolicy rpc;
    /// How often the Session writer checks for a cancelled call, seconds.
    double session_poll_seconds = 0.2;
    /// Bounds the Session streams that have not sent SessionOpen yet (how
    /// many, how long: session_gate.h); not owned; null for no bound.
    SessionGate* session_gate = nullptr;
  };

  explicit WorkerServiceImpl(Options options) : options_(std::move(options)) {}

  grpc::Status RegisterWorker(
      grpc::ServerContext* context,
      const zbpp::v1::RegisterWorkerRequest* request,
      zbpp::v1::RegisterWorkerResponse* response) override;
  grpc::Status Session(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<zbpp::v1::SessionResponse,
                               zbpp::v1::SessionRequest>* stream) override;
  grpc::Status ReportStep(grpc::ServerContext* context,
                          const zbpp::v1::ReportStepRequest* request,
                          zbpp::v1::ReportStepResponse* response) override;
  /// A worker's calibration profile: Coordinator::ReportProfile (its
  /// worker credential required, as for ReportStep).
  grpc::Status ReportProfile(grpc::ServerContext* context,
                             const zbpp::v1::ReportProfileRequest* request,
                             zbpp::v1::ReportProfileResponse* response) override;
  grpc::Status ListWorkers(grpc::ServerContext* context,
                           const zbpp::v1::ListWorkersRequest* request,
                           zbpp::v1::ListWorkersResponse* response) override;

 private:
  /// What a worker's report about its job (ReportStep, ReportProfile)
  /// passes before the core sees it: the bearer token (UNAUTHENTICATED),
  /// worker_id and job_id present (INVALID_ARGUMENT), the worker's
  /// credential (UNAUTHENTICATED).
  absl::Status CheckWorkerReport(RpcScope& rpc, const std::string& worker_id,
                                 const std::string& job_id) const;

  const Options options_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_WORKER_SERVICE_H_
