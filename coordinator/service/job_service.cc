#include "coordinator/service/job_service.h"

#include <vector>

#include "absl/time/clock.h"
#include "coordinator/service/rpc_scope.h"

namespace zbpp::coordinator {

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context,
                                       const zbpp::v1::SubmitJobRequest* request,
                                       zbpp::v1::Job* response) {
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/SubmitJob");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
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
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/GetJob");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
  if (request->job_id().empty()) {
    return rpc.Finish(absl::InvalidArgumentError("job_id: required"));
  }
  absl::StatusOr<zbpp::v1::Job> job =
      options_.coordinator->GetJob(request->job_id(), request->view());
  if (job.ok()) *response = *std::move(job);
  return rpc.Finish(job.status());
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const zbpp::v1::ListJobsRequest* request,
                                      zbpp::v1::ListJobsResponse* response) {
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/ListJobs");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
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
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/ListSteps");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
  if (request->job_id().empty()) {
    return rpc.Finish(absl::InvalidArgumentError("job_id: required"));
  }
  absl::StatusOr<zbpp::v1::ListStepsResponse> steps =
      options_.coordinator->ListSteps(*request);
  if (steps.ok()) *response = *std::move(steps);
  return rpc.Finish(steps.status());
}

grpc::Status JobServiceImpl::GetScheduleVersion(
    grpc::ServerContext* context, const zbpp::v1::GetScheduleVersionRequest* request,
    zbpp::v1::ScheduleVersion* response) {
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/GetScheduleVersion");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
  if (request->job_id().empty()) {
    return rpc.Finish(absl::InvalidArgumentError("job_id: required"));
  }
  absl::StatusOr<zbpp::v1::ScheduleVersion> version =
      options_.coordinator->GetScheduleVersion(request->job_id(), request->version());
  if (version.ok()) *response = *std::move(version);
  return rpc.Finish(version.status());
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const zbpp::v1::CancelJobRequest* request,
                                       zbpp::v1::Job* response) {
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/CancelJob");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
  if (request->job_id().empty()) {
    return rpc.Finish(absl::InvalidArgumentError("job_id: required"));
  }
  absl::StatusOr<zbpp::v1::Job> job =
      options_.coordinator->CancelJob(request->job_id(), request->reason());
  if (job.ok()) *response = *std::move(job);
  return rpc.Finish(job.status());
}

grpc::Status JobServiceImpl::WatchJob(
    grpc::ServerContext* context, const zbpp::v1::WatchJobRequest* request,
    grpc::ServerWriter<zbpp::v1::JobEvent>* writer) {
  RpcScope rpc(options_.metrics, "/zbpp.v1.JobService/WatchJob");
  if (absl::Status auth = rpc.CheckBearerToken(*context, options_.bearer_token);
      !auth.ok()) {
    return rpc.Finish(auth);
  }
  absl::StatusOr<std::shared_ptr<WatchOutbox>> outbox =
      options_.coordinator->WatchJob(request->job_id());
  if (!outbox.ok()) return rpc.Finish(outbox.status());
  absl::Status ended;
  while (true) {
    std::vector<zbpp::v1::JobEvent> events;
    absl::Status popped = (*outbox)->Pop(
        absl::Now() + absl::Seconds(options_.watch_poll_seconds), &events);
    bool written = true;
    for (const auto& event : events) {
      if (!writer->Write(event)) {
        written = false;
        break;
      }
    }
    if (absl::IsOutOfRange(popped)) break;  // The job ended: stream ends OK.
    if (!popped.ok()) {
      ended = popped;
      break;
    }
    if (!written || context->IsCancelled()) {
      ended = absl::CancelledError("client went away");
      break;
    }
  }
  options_.coordinator->Unwatch(request->job_id(), *outbox);
  return rpc.Finish(ended);
}

}  // namespace zbpp::coordinator
