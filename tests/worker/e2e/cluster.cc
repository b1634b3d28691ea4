#include "tests/worker/e2e/cluster.h"

#include <signal.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "api/job_state.h"
#include "common/call_auth.h"

namespace zbpp::worker::e2e {
namespace {

absl::Status FromGrpc(const grpc::Status& st, const std::string& what) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                      absl::StrCat(what, ": ", st.error_message()));
}

// One unary call with a 10 s deadline and `auth` (the bearer token, if
// any); the reply or the call's error.
template <typename Response, typename Stub, typename Request, typename Method>
absl::StatusOr<Response> Unary(Stub& stub, Method method,
                               const Request& request,
                               const std::string& what, const CallMetadata& auth) {
  Response response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  AddCallMetadata(auth, context);
  grpc::Status st = (stub.*method)(&context, request, &response);
  if (!st.ok()) return FromGrpc(st, what);
  return response;
}

std::string StateNames(const std::vector<v1::JobState>& states) {
  std::vector<std::string> names;
  for (v1::JobState s : states) names.push_back(v1::JobState_Name(s));
  return absl::StrJoin(names, " -> ");
}

}  // namespace

absl::StatusOr<RunningWorker> StartWorker(
    const std::string& coordinator, const std::string& cache_dir,
    absl::Duration timeout, const std::vector<std::string>& flags) {
  RunningWorker worker;
  std::vector<std::string> argv = {ZBPP_WORKER_BINARY, "--coordinator",
                                   coordinator, "--cache-dir", cache_dir};
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (std::find(flags.begin(), flags.end(), "--data-root") == flags.end()) {
    argv.insert(argv.end(),
                {"--data-root", std::filesystem::path(cache_dir).parent_path().string()});
  }
  worker.process = ctltest::BackgroundProcess::Start(argv);
  if (worker.process == nullptr) {
    return absl::UnavailableError("cannot start " ZBPP_WORKER_BINARY);
  }
  const std::optional<std::string> line = worker.process->ReadLine(timeout);
  if (!line.has_value()) {
    return absl::UnavailableError("zbpp-worker printed no registered line");
  }
  std::smatch match;
  if (!std::regex_match(*line, match,
                        std::regex("zbpp-worker registered worker_id=(\\S+) "
                                   "coordinator=\\S+ address=(\\S+)"))) {
    return absl::UnavailableError(
        absl::StrCat("zbpp-worker printed \"", *line, "\""));
  }
  worker.worker_id = match[1];
  worker.address = match[2];
  return worker;
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(
    ClusterOptions options) {
  std::unique_ptr<Cluster> cluster(new Cluster(std::move(options)));
  if (!cluster->options_.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(cluster->options_.token_file);
    if (!token.ok()) return token.status();
    cluster->auth_ = BearerTokenMetadata(*token);
    cluster->options_.worker_flags.push_back("--token-file");
    cluster->options_.worker_flags.push_back(cluster->options_.token_file);
  }
  if (absl::Status st = cluster->StartCoordinator({}); !st.ok()) return st;
  for (int i = 0; i < cluster->options_.workers; ++i) {
    absl::StatusOr<RunningWorker*> worker = cluster->AddWorker();
    if (!worker.ok()) return worker.status();
  }
  return cluster;
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(
    const std::string& directory, int workers) {
  ClusterOptions options;
  options.directory = directory;
  options.workers = workers;
  return Start(std::move(options));
}

Cluster::~Cluster() {
  // Workers first: a worker outliving its coordinator only retries. Then our
  // own channel: the coordinator's SIGTERM shutdown waits for every open
  // connection to close (up to its 5 s drain), an idle one included.
  workers_.clear();
  jobs_.reset();
  coordinator_.process.reset();
}

absl::Status Cluster::StartCoordinator(const std::vector<std::string>& flags) {
  std::vector<std::string> all = {"--db", options_.db};
  if (!options_.token_file.empty()) {
    all.push_back("--token-file");
    all.push_back(options_.token_file);
  }
  all.insert(all.end(), flags.begin(), flags.end());
  absl::StatusOr<ctltest::RunningCoordinator> coordinator =
      ctltest::StartCoordinator(ZBPP_COORDINATOR_BINARY, all);
  if (!coordinator.ok()) return coordinator.status();
  coordinator_ = *std::move(coordinator);
  // A new channel: the old one may be backing off from the killed process.
  jobs_ = v1::JobService::NewStub(grpc::CreateChannel(
      address(), grpc::InsecureChannelCredentials()));
  return absl::OkStatus();
}

absl::StatusOr<RunningWorker*> Cluster::AddWorker() {
  absl::StatusOr<RunningWorker> worker = StartWorker(
      address(),
      absl::StrCat(options_.directory, "/cache-", workers_.size()),
      absl::Seconds(30), options_.worker_flags);
  if (!worker.ok()) return worker.status();
  workers_.push_back(*std::move(worker));
  return &workers_.back();
}

void Cluster::KillWorker(size_t index) {
  RunningWorker& worker = workers_.at(index);
  if (worker.process == nullptr) return;
  kill(worker.process->pid(), SIGKILL);
  worker.process.reset();  // Reaps it.
}

void Cluster::KillCoordinator() {
  if (coordinator_.process == nullptr) return;
  kill(coordinator_.process->pid(), SIGKILL);
  coordinator_.process.reset();
}

absl::Status Cluster::RestartCoordinator() {
  // The same port: the workers know only this address. The last --listen
  // wins over StartCoordinator's 127.0.0.1:0.
  return StartCoordinator({"--listen", coordinator_.grpc_address});
}

absl::StatusOr<v1::Job> Cluster::WaitForSteps(const std::string& job_id,
                                              int64_t steps,
                                              absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<v1::Job> job = Get(job_id);
    if (!job.ok()) return job.status();
    if (job->steps_completed() >= steps || IsTerminal(job->state())) return job;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "job ", job_id, " completed ", job->steps_completed(), " steps of ",
          steps, " within ", absl::FormatDuration(timeout), "; now ",
          v1::JobState_Name(job->state()), " \"", job->state_message(),
          "\""));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<v1::Job> Cluster::Submit(const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  return Unary<v1::Job>(*jobs_, &v1::JobService::Stub::SubmitJob, request,
                        "SubmitJob", auth_);
}

absl::StatusOr<v1::Job> Cluster::Get(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  request.set_view(v1::JOB_VIEW_FULL);
  return Unary<v1::Job>(*jobs_, &v1::JobService::Stub::GetJob, request,
                        "GetJob", auth_);
}

absl::StatusOr<v1::ScheduleVersion> Cluster::Version(const std::string& job_id,
                                                    int64_t number) {
  v1::GetScheduleVersionRequest request;
  request.set_job_id(job_id);
  request.set_version(number);
  return Unary<v1::ScheduleVersion>(*jobs_, &v1::JobService::Stub::GetScheduleVersion, request,
                                    "GetScheduleVersion", auth_);
}

absl::StatusOr<JobOutcome> Cluster::WaitForEnd(const std::string& job_id,
                                               absl::Duration timeout) {
  JobOutcome outcome;
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  AddCallMetadata(auth_, context);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> stream =
      jobs_->WatchJob(&context, request);
  v1::JobEvent event;
  bool ended = false;
  while (!ended && stream->Read(&event)) {
    if (event.has_snapshot()) {
      outcome.states.push_back(event.snapshot().state());
      ended = IsTerminal(event.snapshot().state());
    } else if (event.has_state_change()) {
      outcome.states.push_back(event.state_change().new_state());
      ended = IsTerminal(event.state_change().new_state());
    }
  }
  if (ended) context.TryCancel();
  const grpc::Status st = stream->Finish();
  absl::StatusOr<v1::Job> job = Get(job_id);
  if (!job.ok()) return job.status();
  outcome.job = *std::move(job);
  if (!ended) {
    return absl::DeadlineExceededError(absl::StrCat(
        "job ", job_id, " did not end within ", absl::FormatDuration(timeout),
        " (watch: ", st.error_message(), "); states ",
        StateNames(outcome.states), "; now ",
        v1::JobState_Name(outcome.job.state()), " \"",
        outcome.job.state_message(), "\""));
  }
  return outcome;
}

absl::StatusOr<JobOutcome> Cluster::Run(const v1::JobSpec& spec) {
  absl::StatusOr<v1::Job> job = Submit(spec);
  if (!job.ok()) return job.status();
  return WaitForEnd(job->id());
}

v1::JobSpec SmallBibleJob(int64_t steps) {
  v1::JobSpec spec;
  spec.set_name("e2e-bible");
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(2);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_vocab(256);
  model->set_seq_len(64);
  spec.mutable_dataset()->set_builtin("bible-kjv");
  v1::PipelineSpec* pipeline = spec.mutable_pipeline();
  pipeline->set_stages(2);
  pipeline->set_microbatches(4);
  pipeline->set_microbatch_size(4);
  spec.mutable_schedule()->set_name("zb-h1");
  spec.mutable_optimizer()->set_learning_rate(3e-3);
  spec.set_steps(steps);
  spec.set_seed(7);
  return spec;
}

}  // namespace zbpp::worker::e2e
