#ifndef ZBPP_COORDINATOR_SERVICE_JOB_SERVICE_H_
#define ZBPP_COORDINATOR_SERVICE_JOB_SERVICE_H_

#include <memory>
#include <string>

#include "coordinator/core/coordinator.h"
#include "coordinator/service/watch_streams.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::coordinator {

/// zbpp.v1.JobService over the Coordinator, a thin layer: check the request,
/// call the core, convert the Status, record the RPC (RpcScope). Every RPC
/// requires "authorization: Bearer <token>" when a token is set
/// (kCallerChecks; UNAUTHENTICATED otherwise, counted in
/// zbpp_rpc_refusals_total): jobs name their workers.
/// WatchJob runs on gRPC's callback API (WatchStreams: a waiting stream
/// holds no server thread), capped per client and in total; the other
/// methods are synchronous. Thread-safe; destroy it after the server has
/// shut down.
class JobServiceImpl final
    : public zbpp::v1::JobService::WithCallbackMethod_WatchJob<zbpp::v1::JobService::Service> {
 public:
  struct Options {
    /// The core; not owned, required.
    Coordinator* coordinator = nullptr;
    /// The caller's checks and the calls' record (RpcScope, kCallerChecks).
    RpcPolicy rpc;
    /// Caps on WatchJob streams.
    WatchStreamLimits watch_limits;
  };

  explicit JobServiceImpl(Options options);

  grpc::Status SubmitJob(grpc::ServerContext* context,
                         const zbpp::v1::SubmitJobRequest* request,
                         zbpp::v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context,
                      const zbpp::v1::GetJobRequest* request,
                      zbpp::v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context,
                        const zbpp::v1::ListJobsRequest* request,
                        zbpp::v1::ListJobsResponse* response) override;
  grpc::Status ListSteps(grpc::ServerContext* context,
                         const zbpp::v1::ListStepsRequest* request,
                         zbpp::v1::ListStepsResponse* response) override;
  grpc::Status GetScheduleVersion(grpc::ServerContext* context,
                                  const zbpp::v1::GetScheduleVersionRequest* request,
                                  zbpp::v1::ScheduleVersion* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context,
                         const zbpp::v1::CancelJobRequest* request,
                         zbpp::v1::Job* response) override;
  grpc::ServerWriteReactor<zbpp::v1::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context,
      const zbpp::v1::WatchJobRequest* request) override;

  /// WatchJob streams open now.
  int watch_streams() const { return watch_->open(); }

 private:
  const Options options_;
  std::unique_ptr<WatchStreams> watch_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_JOB_SERVICE_H_
