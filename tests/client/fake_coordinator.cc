#include "tests/client/fake_coordinator.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/job_state.h"

namespace zbpp::ctltest {
namespace {

class FakeJobService final : public v1::JobService::Service {
 public:
  explicit FakeJobService(FakeState* state) : state_(state) {}
  grpc::Status SubmitJob(grpc::ServerContext* context,
                         const v1::SubmitJobRequest* request,
                         v1::Job* job) override {
    return state_->Submit(context, request->spec(), job);
  }
  grpc::Status GetJob(grpc::ServerContext* context,
                      const v1::GetJobRequest* request, v1::Job* job) override {
    return state_->Get(context, request->job_id(), job);
  }
  grpc::Status ListJobs(grpc::ServerContext* context,
                        const v1::ListJobsRequest*,
                        v1::ListJobsResponse* response) override {
    return state_->List(context, response);
  }
  grpc::Status GetScheduleVersion(grpc::ServerContext* context,
                                  const v1::GetScheduleVersionRequest* request,
                                  v1::ScheduleVersion* version) override {
    return state_->Version(context, *request, version);
  }
  grpc::Status ListSteps(grpc::ServerContext* context, const v1::ListStepsRequest* request,
                         v1::ListStepsResponse* response) override {
    return state_->Steps(context, *request, response);
  }
  grpc::Status CancelJob(grpc::ServerContext* context,
                         const v1::CancelJobRequest* request,
                         v1::Job* job) override {
    return state_->Cancel(context, request->job_id(), job);
  }
  grpc::Status WatchJob(grpc::ServerContext* context,
                        const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    return state_->Watch(context, request->job_id(), writer);
  }

 private:
  FakeState* state_;
};

class FakeWorkerService final : public v1::WorkerService::Service {
 public:
  explicit FakeWorkerService(FakeState* state) : state_(state) {}
  grpc::Status ListWorkers(grpc::ServerContext* context,
                           const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override {
    return state_->Workers(context, *request, response);
  }

 private:
  FakeState* state_;
};

grpc::Status NotFound(const std::string& id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("job \"", id, "\" not found"));
}

}  // namespace

void FakeState::PutJob(const v1::Job& job) {
  absl::MutexLock lock(&mu_);
  if (!jobs_.count(job.id())) order_.push_back(job.id());
  jobs_[job.id()] = job;
}

void FakeState::PutVersion(const v1::ScheduleVersion& version) {
  absl::MutexLock lock(&mu_);
  versions_[{version.job_id(), version.version()}] = version;
}

void FakeState::PutSteps(const std::string& job_id, std::vector<v1::StepSummary> steps) {
  absl::MutexLock lock(&mu_);
  steps_[job_id] = std::move(steps);
}

v1::Job FakeState::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? v1::Job() : it->second;
}

void FakeState::ScriptWatch(const std::string& job_id,
                            std::vector<v1::JobEvent> events) {
  absl::MutexLock lock(&mu_);
  scripts_[job_id] = std::move(events);
}

void FakeState::SetWorkers(std::vector<v1::Worker> workers) {
  absl::MutexLock lock(&mu_);
  workers_ = std::move(workers);
}

void FakeState::SetWorkersPageLimit(int limit) {
  absl::MutexLock lock(&mu_);
  workers_page_limit_ = limit;
}

void FakeState::RequireToken(const std::string& token) {
  absl::MutexLock lock(&mu_);
  token_ = token;
}

std::string FakeState::last_authorization() {
  absl::MutexLock lock(&mu_);
  return last_authorization_;
}

bool FakeState::last_call_had_deadline() {
  absl::MutexLock lock(&mu_);
  return last_deadline_;
}

grpc::Status FakeState::Authorize(grpc::ServerContext* context, bool required) {
  last_authorization_.clear();
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    last_authorization_.assign(it->second.data(), it->second.size());
  }
  last_deadline_ =
      context->deadline() != std::chrono::system_clock::time_point::max();
  if (required && !token_.empty() &&
      last_authorization_ != "Bearer " + token_) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing or wrong bearer token");
  }
  return grpc::Status::OK;
}

void FakeState::FailSubmits(grpc::Status status) {
  absl::MutexLock lock(&mu_);
  submit_status_ = std::move(status);
}

grpc::Status FakeState::Submit(grpc::ServerContext* context,
                               const v1::JobSpec& spec, v1::Job* job) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, true); !auth.ok()) return auth;
  if (!submit_status_.ok()) return submit_status_;
  if (spec.pipeline().microbatches() < 1) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("pipeline.microbatches must be >= 1, got ",
                                     spec.pipeline().microbatches()));
  }
  job->set_id(absl::StrCat("sub-", next_id_++));
  *job->mutable_spec() = spec;
  job->set_state(v1::JOB_STATE_PENDING);
  job->set_last_checkpoint_step(-1);
  job->mutable_create_time()->set_seconds(absl::ToUnixSeconds(absl::Now()));
  jobs_[job->id()] = *job;
  order_.push_back(job->id());
  return grpc::Status::OK;
}

grpc::Status FakeState::Get(grpc::ServerContext* context, const std::string& id,
                            v1::Job* job) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, false); !auth.ok()) return auth;
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(id);
  *job = it->second;
  return grpc::Status::OK;
}

grpc::Status FakeState::Version(grpc::ServerContext* context,
                                const v1::GetScheduleVersionRequest& request,
                                v1::ScheduleVersion* version) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, false); !auth.ok()) return auth;
  auto job = jobs_.find(request.job_id());
  if (job == jobs_.end()) return NotFound(request.job_id());
  if (job->second.schedule().version() == request.version()) {
    *version = job->second.schedule();
    return grpc::Status::OK;
  }
  auto it = versions_.find({request.job_id(), request.version()});
  if (it == versions_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("version: job ", request.job_id(),
                                     " has no schedule version ", request.version()));
  }
  *version = it->second;
  return grpc::Status::OK;
}

grpc::Status FakeState::Steps(grpc::ServerContext* context, const v1::ListStepsRequest& request,
                              v1::ListStepsResponse* response) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, false); !auth.ok()) return auth;
  if (!jobs_.count(request.job_id())) return NotFound(request.job_id());
  for (const v1::StepSummary& step : steps_[request.job_id()]) {
    if (step.step() >= request.from_step()) *response->add_steps() = step;
  }
  response->set_next_from_step(-1);
  return grpc::Status::OK;
}

grpc::Status FakeState::List(grpc::ServerContext* context,
                             v1::ListJobsResponse* response) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, false); !auth.ok()) return auth;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    v1::Job* job = response->add_jobs();
    *job = jobs_[*it];
    job->clear_schedule();
  }
  return grpc::Status::OK;
}

grpc::Status FakeState::Cancel(grpc::ServerContext* context,
                               const std::string& id, v1::Job* job) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, true); !auth.ok()) return auth;
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound(id);
  const v1::JobState state = it->second.state();
  if (IsTerminal(state)) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("job \"", id, "\" is already ", v1::JobState_Name(state)));
  }
  it->second.set_state(v1::JOB_STATE_CANCELLED);
  *job = it->second;
  return grpc::Status::OK;
}

grpc::Status FakeState::Watch(grpc::ServerContext* context,
                              const std::string& id,
                              grpc::ServerWriter<v1::JobEvent>* writer) {
  std::vector<v1::JobEvent> events;
  {
    absl::MutexLock lock(&mu_);
    if (grpc::Status auth = Authorize(context, false); !auth.ok()) return auth;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NotFound(id);
    v1::JobEvent snapshot;
    *snapshot.mutable_snapshot() = it->second;
    snapshot.mutable_snapshot()->clear_schedule();
    events.push_back(snapshot);
    for (const v1::JobEvent& e : scripts_[id]) events.push_back(e);
  }
  int64_t sequence = 1;
  for (v1::JobEvent& event : events) {
    event.set_job_id(id);
    event.set_sequence(sequence++);
    if (!writer->Write(event)) break;
  }
  return grpc::Status::OK;
}

grpc::Status FakeState::Workers(grpc::ServerContext* context,
                                const v1::ListWorkersRequest& request,
                                v1::ListWorkersResponse* response) {
  absl::MutexLock lock(&mu_);
  if (grpc::Status auth = Authorize(context, false); !auth.ok()) return auth;
  // The token is the index of the page's first worker.
  size_t first = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &first) ||
       first > workers_.size())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "page_token: malformed");
  }
  const size_t limit =
      request.page_size() <= 0
          ? workers_page_limit_
          : std::min(request.page_size(), workers_page_limit_);
  const size_t end = std::min(workers_.size(), first + limit);
  for (size_t i = first; i < end; ++i) *response->add_workers() = workers_[i];
  if (end < workers_.size()) response->set_next_page_token(absl::StrCat(end));
  return grpc::Status::OK;
}

std::unique_ptr<FakeCoordinator> FakeCoordinator::Start() {
  std::unique_ptr<FakeCoordinator> fake(new FakeCoordinator());
  fake->state_ = std::make_unique<FakeState>();
  fake->jobs_ = std::make_unique<FakeJobService>(fake->state_.get());
  fake->workers_ = std::make_unique<FakeWorkerService>(fake->state_.get());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(fake->jobs_.get());
  builder.RegisterService(fake->workers_.get());
  fake->server_ = builder.BuildAndStart();
  if (fake->server_ == nullptr || port == 0) return nullptr;
  fake->address_ = absl::StrCat("127.0.0.1:", port);
  return fake;
}

FakeCoordinator::~FakeCoordinator() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
  }
}

}  // namespace zbpp::ctltest
