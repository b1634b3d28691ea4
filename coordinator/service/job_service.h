#ifndef ZBPP_COORDINATOR_SERVICE_JOB_SERVICE_H_
#define ZBPP_COORDINATOR_SERVICE_JOB_SERVICE_H_

#include <string>

#include "coordinator/core/coordinator.h"
#include "metrics/coordinator_metrics.h"
#include "zbpp/v1/job.grpc.pb.h"

namespace zbpp::coordinator {

/// zbpp.v1.JobService over the Coordinator, a thin layer: check the request,
/// call the core, convert the Status, record the RPC. Every RPC requires
/// "authorization: Bearer <token>" when a token is set (UNAUTHENTICATED
/// otherwise, counted in zbpp_rpc_refusals_total): jobs name their workers.
/// Thread-safe.
class JobServiceImpl final : public zbpp::v1::JobService::Service {
 public:
  struct Options {
    /// The core; not owned, required.
    Coordinator* coordinator = nullptr;
    /// RPC metrics; not owned; null for none.
    metrics::CoordinatorMetrics* metrics = nullptr;
    /// Bearer token required on every RPC; empty: no authentication.
    std::string bearer_token;
    /// How often a WatchJob stream checks for a cancelled client, seconds.
    double watch_poll_seconds = 0.2;
  };

  explicit JobServiceImpl(Options options) : options_(std::move(options)) {}

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
  grpc::Status WatchJob(grpc::ServerContext* context,
                        const zbpp::v1::WatchJobRequest* request,
                        grpc::ServerWriter<zbpp::v1::JobEvent>* writer) override;

 private:
  const Options options_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_JOB_SERVICE_H_
