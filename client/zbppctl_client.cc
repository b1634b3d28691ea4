#include "client/zbppctl_client.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/call_auth.h"
#include "common/status_grpc.h"
#include "common/tls_hint.h"

namespace zbpp::ctl {
namespace {

// The largest page of ListJobs and ListWorkers (the server caps page_size
// at 1000).
constexpr int kPageSize = 1000;

// Sends `request` with page_size kPageSize, then again with each
// next_page_token until the server hands back none. `fetch` makes one call
// (with its own deadline) and keeps the page's items.
template <typename Request, typename Response>
absl::Status FetchAllPages(
    Request request,
    const std::function<absl::Status(const Request&, Response*)>& fetch) {
  request.set_page_size(kPageSize);
  do {
    Response response;
    if (absl::Status fetched = fetch(request, &response); !fetched.ok()) {
      return fetched;
    }
    // A server handing back the token it was given would loop forever.
    if (response.next_page_token() == request.page_token()) break;
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return absl::OkStatus();
}

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%gs", absl::ToDoubleSeconds(d));
}

}  // namespace

std::unique_ptr<CoordinatorClient> CoordinatorClient::Create(Options options) {
  return std::unique_ptr<CoordinatorClient>(
      new CoordinatorClient(std::move(options)));
}

CoordinatorClient::CoordinatorClient(Options options)
    : options_(std::move(options)),
      channel_(grpc::CreateChannel(options_.address,
                                   options_.credentials != nullptr
                                       ? options_.credentials
                                       : grpc::InsecureChannelCredentials())),
      jobs_(v1::JobService::NewStub(channel_)),
      workers_(v1::WorkerService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::NewContext(
    bool with_deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (with_deadline) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
  AddCallMetadata(BearerTokenMetadata(options_.bearer_token), *context);
  return context;
}

absl::Status CoordinatorClient::Convert(const grpc::Status& status) const {
  // On a connected channel an UNAVAILABLE is the coordinator's own answer
  // (e.g. its store is failing: "storing job job-3: SQLite database ..."),
  // which says more than "cannot reach".
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      channel_->GetState(false) != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach coordinator at ", options_.address, ": ", status.error_message(),
        TlsMismatchHint(options_.address, options_.tls, status.error_message())));
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // A call to an address that never answers TCP sits in CONNECTING until
    // its deadline: that is still "cannot reach", not a slow server.
    if (channel_->GetState(false) != GRPC_CHANNEL_READY) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach coordinator at ", options_.address,
                       ": no connection within ", Seconds(options_.timeout),
                       TlsMismatchHint(options_.address, options_.tls, "")));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("no answer from coordinator at ", options_.address,
                     " within ", Seconds(options_.timeout)));
  }
  return FromGrpcStatus(status);
}

absl::StatusOr<v1::Job> CoordinatorClient::SubmitJob(const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::Job job;
  auto context = NewContext(true);
  grpc::Status status = jobs_->SubmitJob(context.get(), request, &job);
  if (!status.ok()) return Convert(status);
  return job;
}

absl::StatusOr<v1::Job> CoordinatorClient::GetJob(const std::string& job_id,
                                                  v1::JobView view) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  request.set_view(view);
  v1::Job job;
  auto context = NewContext(true);
  grpc::Status status = jobs_->GetJob(context.get(), request, &job);
  if (!status.ok()) return Convert(status);
  return job;
}

absl::StatusOr<v1::ScheduleVersion> CoordinatorClient::GetScheduleVersion(
    const std::string& job_id, int64_t version) {
  v1::GetScheduleVersionRequest request;
  request.set_job_id(job_id);
  request.set_version(version);
  v1::ScheduleVersion response;
  auto context = NewContext(true);
  grpc::Status status = jobs_->GetScheduleVersion(context.get(), request, &response);
  if (!status.ok()) return Convert(status);
  return response;
}

absl::StatusOr<std::vector<v1::Job>> CoordinatorClient::ListJobs() {
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest request;
  request.set_view(v1::JOB_VIEW_BASIC);
  absl::Status listed = FetchAllPages<v1::ListJobsRequest, v1::ListJobsResponse>(
      request, [&](const v1::ListJobsRequest& page, v1::ListJobsResponse* response) {
        auto context = NewContext(true);
        grpc::Status status = jobs_->ListJobs(context.get(), page, response);
        if (!status.ok()) return Convert(status);
        for (v1::Job& job : *response->mutable_jobs()) jobs.push_back(std::move(job));
        return absl::OkStatus();
      });
  if (!listed.ok()) return listed;
  return jobs;
}

absl::StatusOr<v1::Job> CoordinatorClient::CancelJob(
    const std::string& job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason("cancelled with zbppctl");
  v1::Job job;
  auto context = NewContext(true);
  grpc::Status status = jobs_->CancelJob(context.get(), request, &job);
  if (!status.ok()) return Convert(status);
  return job;
}

absl::StatusOr<std::vector<v1::Worker>> CoordinatorClient::ListWorkers() {
  std::vector<v1::Worker> workers;
  absl::Status listed =
      FetchAllPages<v1::ListWorkersRequest, v1::ListWorkersResponse>(
          {}, [&](const v1::ListWorkersRequest& page,
                  v1::ListWorkersResponse* response) {
            auto context = NewContext(true);
            grpc::Status status =
                workers_->ListWorkers(context.get(), page, response);
            if (!status.ok()) return Convert(status);
            for (v1::Worker& worker : *response->mutable_workers()) {
              workers.push_back(std::move(worker));
            }
            return absl::OkStatus();
          });
  if (!listed.ok()) return listed;
  return workers;
}

absl::StatusOr<std::vector<v1::StepSummary>> CoordinatorClient::ListSteps(
    const std::string& job_id) {
  std::vector<v1::StepSummary> steps;
  v1::ListStepsRequest request;
  request.set_job_id(job_id);
  do {
    v1::ListStepsResponse response;
    auto context = NewContext(true);
    grpc::Status status = jobs_->ListSteps(context.get(), request, &response);
    if (!status.ok()) return Convert(status);
    steps.insert(steps.end(), response.steps().begin(), response.steps().end());
    // A server handing back the same page would loop forever.
    if (response.next_from_step() >= 0 && response.next_from_step() <= request.from_step()) break;
    request.set_from_step(response.next_from_step());
  } while (request.from_step() >= 0);
  return steps;
}

absl::Status CoordinatorClient::WatchJob(
    const std::string& job_id,
    const std::function<bool(const v1::JobEvent&)>& on_event) {
  // The stream has no deadline, so bound the connection instead: wait until
  // the channel is READY, or fails (the call below then says why).
  const auto deadline = absl::ToChronoTime(absl::Now() + options_.timeout);
  for (grpc_connectivity_state state = channel_->GetState(true);
       state != GRPC_CHANNEL_READY && state != GRPC_CHANNEL_TRANSIENT_FAILURE;
       state = channel_->GetState(true)) {
    if (!channel_->WaitForStateChange(state, deadline)) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach coordinator at ", options_.address,
                       ": no connection within ", Seconds(options_.timeout),
                       TlsMismatchHint(options_.address, options_.tls, "")));
    }
  }
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  auto context = NewContext(false);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      jobs_->WatchJob(context.get(), request);
  v1::JobEvent event;
  bool any_event = false;
  while (reader->Read(&event)) {
    any_event = true;
    if (!on_event(event)) {
      context->TryCancel();
      reader->Finish();  // CANCELLED, as asked.
      return absl::OkStatus();
    }
  }
  grpc::Status status = reader->Finish();
  if (any_event && status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("lost connection to coordinator at ", options_.address,
                     ": ", status.error_message()));
  }
  return status.ok() ? absl::OkStatus() : Convert(status);
}

}  // namespace zbpp::ctl
