#include "coordinator/service/job_service.h"

#include <utility>

#include "coordinator/service/rpc_scope.h"

namespace zbpp::coordinator {

JobServiceImpl::JobServiceImpl(Options options)
    : options_(std::move(options)),
      watch_(std::make_unique<WatchStreams>(WatchStreams::Options{
          options_.coordinator, options_.rpc, options_.watch_limits})) {}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const zbpp::v1::SubmitJobRequest* request,
                                       zbpp::v1::Job* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.JobService/SubmitJob");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  if (!request->has_spec()) {
    return rpc.Finish(absl::InvalidArgumentError("spec: required"));
  }
  absl::StatusOr<zbpp::v1::Job> job =
      options_.coordinator->SubmitJob(request->spec());
  if (job.ok()) *response = *std::move(job);
  return rpc.Finish(job.status());
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context,
                                    const zbpp::v1::GetJobRequest* request,
                                    zbpp::v1::Job* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.JobService/GetJob");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  if (absl::Status id = CheckJobId(request->job_id()); !id.ok()) return rpc.Finish(id);
  absl::StatusOr<zbpp::v1::Job> job =
      options_.coordinator->GetJob(request->job_id(), request->view());
  if (job.ok()) *response = *std::move(job);
  return rpc.Finish(job.status());
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const zbpp::v1::ListJobsRequest* request,
                                      zbpp::v1::ListJobsResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.JobService/ListJobs");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  if (request->page_size() < 0) {
    return rpc.Finish(absl::InvalidArgumentError("page_size: must be >= 0"));
  }
  absl::StatusOr<zbpp::v1::ListJobsResponse> jobs =
      options_.coordinator->ListJobs(*request);
  if (jobs.ok()) *response = *std::move(jobs);
  return rpc.Finish(jobs.status());
}

grpc::Status JobServiceImpl::ListSteps(grpc::ServerContext* context,
                                       const zbpp::v1::ListStepsRequest* request,
                                       zbpp::v1::ListStepsResponse* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.JobService/ListSteps");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  if (absl::Status id = CheckJobId(request->job_id()); !id.ok()) return rpc.Finish(id);
  absl::StatusOr<zbpp::v1::ListStepsResponse> steps =
      options_.coordinator->ListSteps(*request);
  if (steps.ok()) *response = *std::move(steps);
  return rpc.Finish(steps.status());
}

grpc::Status JobServiceImpl::GetScheduleVersion(
    grpc::ServerContext* context, const zbpp::v1::GetScheduleVersionRequest* request,
    zbpp::v1::ScheduleVersion* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.JobService/GetScheduleVersion");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  if (absl::Status id = CheckJobId(request->job_id()); !id.ok()) return rpc.Finish(id);
  absl::StatusOr<zbpp::v1::ScheduleVersion> version =
      options_.coordinator->GetScheduleVersion(request->job_id(), request->version());
  if (version.ok()) *response = *std::move(version);
  return rpc.Finish(version.status());
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const zbpp::v1::CancelJobRequest* request,
                                       zbpp::v1::Job* response) {
  RpcScope rpc(options_.rpc, *context, "/zbpp.v1.JobService/CancelJob");
  if (!rpc.admitted().ok()) return rpc.Finish(rpc.admitted());
  if (absl::Status id = CheckJobId(request->job_id()); !id.ok()) return rpc.Finish(id);
  absl::StatusOr<zbpp::v1::Job> job =
      options_.coordinator->CancelJob(request->job_id(), request->reason());
  if (job.ok()) *response = *std::move(job);
  return rpc.Finish(job.status());
}

grpc::ServerWriteReactor<zbpp::v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const zbpp::v1::WatchJobRequest* request) {
  return watch_->Start(context, *request);
}

}  // namespace zbpp::coordinator
