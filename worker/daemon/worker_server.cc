#include "worker/daemon/worker_server.h"

#include <unistd.h>

#include <optional>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "api/pipeline_shape.h"
#include "common/call_auth.h"
#include "common/log.h"
#include "worker/runtime/device.h"

namespace zbpp::worker {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

WorkerServer::WorkerServer(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Create(Options options) {
  std::unique_ptr<WorkerServer> worker(new WorkerServer(std::move(options)));
  const Options& o = worker->options_;

  // Health and reflection: a server needs at least one service of its own,
  // and these two are what operators probe and list.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(o.listen, grpc::InsecureServerCredentials(), &port);
  worker->server_ = builder.BuildAndStart();
  if (worker->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("--listen: cannot listen on ", o.listen));
  }
  std::string listen_host = o.listen.substr(0, o.listen.rfind(':'));
  if (listen_host == "0.0.0.0" || listen_host == "[::]") listen_host = HostName();
  worker->address_ = absl::StrCat(listen_host, ":", port);

  SessionClientOptions session_options;
  if (!o.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(o.token_file);
    if (!token.ok()) {
      return absl::Status(token.status().code(),
                          absl::StrCat("--token-file: ", token.status().message()));
    }
    session_options.bearer_token = *std::move(token);
  }
  // gRPC's own reconnection back-off grows to 120 s: a worker whose
  // coordinator was down for a minute would stay away that long after it is
  // back. SessionClient backs off itself, up to 5 s; the channel keeps up.
  grpc::ChannelArguments channel_args;
  channel_args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  channel_args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  channel_args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  worker->channel_ = grpc::CreateCustomChannel(o.coordinator, o.credentials, channel_args);
  session_options.channel = worker->channel_;
  session_options.coordinator_address = o.coordinator;
  session_options.state = &worker->state_;
  v1::WorkerDescription& d = session_options.description;
  d.set_address(worker->address_);
  d.set_host(HostName());
  if (o.device.is_cuda()) {
    d.set_device_kind(v1::DEVICE_KIND_CUDA);
    d.set_device_name(o.device.str());
    d.set_device_index(o.device.index());
  } else {
    d.set_device_kind(v1::DEVICE_KIND_CPU);
    d.set_device_name("cpu");
    d.set_device_index(sched_getcpu() >= 0 ? sched_getcpu() : 0);
  }
  d.set_memory_bytes(o.memory_bytes > 0 ? o.memory_bytes : DeviceMemoryBytes(o.device));
  d.set_name(o.name);
  if (o.device.is_cuda()) d.set_device_identity(o.device_identity);
  d.set_nccl_shared_gpu_test(o.nccl_shared_gpu_test);
  absl::StatusOr<std::unique_ptr<SessionClient>> session =
      SessionClient::Create(session_options);
  if (!session.ok()) return session.status();
  worker->session_ = *std::move(session);
  worker->server_->GetHealthCheckService()->SetServingStatus(true);

  AttemptEnvironment& env = worker->env_;
  env.reporter = worker->session_.get();
  env.state = &worker->state_;
  env.communicators = GlooCommunicatorFactory(worker->channel_, worker->session_.get(),
                                              o.gloo_hostname, o.comm_timeout);
  if (o.nccl_factory) {
    env.nccl_communicators =
        o.nccl_factory(worker->channel_, worker->session_.get(), o.device, o.comm_timeout);
  }
  env.cache_dir = o.cache_dir;
  env.data_roots = o.data_roots;
  env.comm_timeout = o.comm_timeout;
  env.faults = o.faults;
  env.synthetic = o.synthetic;
  env.device = o.device;
  return worker;
}

WorkerServer::~WorkerServer() { Shutdown(); }

std::string WorkerServer::worker_id() const { return session_->worker_id(); }

std::string WorkerServer::address() const { return address_; }

void WorkerServer::RunTrainingLoop() {
  while (!shutdown_) {
    if (state_.TakeHeldDrop()) DropHeld();
    std::optional<v1::Assignment> assignment = state_.WaitForAssignment(absl::Seconds(1));
    if (!assignment.has_value()) continue;
    Logf("job %s attempt %d: stage %d of %d, replica %d of %d, steps %d..%d, over %s%s",
         assignment->job_id(), assignment->attempt(), assignment->stage(),
         assignment->spec().pipeline().stages(), assignment->replica(),
         assignment->replicas() > 0 ? assignment->replicas()
                                    : DataParallelOf(assignment->spec().pipeline()),
         assignment->start_step(), assignment->spec().steps() - 1,
         TransportLabel(assignment->transport()),
         assignment->resume_from_memory() ? ", resuming from memory" : "");
    const AttemptOutcome result = RunAttempt(*assignment, env_, held_);
    if (!result.status.ok()) {
      Logf("job %s failed on this worker: %s", assignment->job_id(), result.status.ToString());
      state_.SetPhase(v1::WORKER_PHASE_FAILED, std::string(result.status.message()),
                      result.job_error);
      // The coordinator decides what follows (abort or restart).
      while (!state_.Aborted(assignment->job_id(), assignment->attempt()) && !shutdown_) {
        absl::SleepFor(absl::Milliseconds(100));
      }
    }
    if (held_.trainer != nullptr) {
      if (state_.KeepsState(assignment->job_id(), assignment->attempt())) {
        Logf("job %s: holding stage %d at step %d for the next attempt",
             assignment->job_id(), held_.state.stage(), held_.state.step());
      } else {
        DropHeld();
      }
    }
    state_.Finish(assignment->job_id(), assignment->attempt());
    state_.SetPhase(v1::WORKER_PHASE_IDLE);
  }
}

void WorkerServer::DropHeld() {
  held_ = HeldStage{};
  state_.SetHeld(std::nullopt);
}

void WorkerServer::Shutdown() {
  if (shutdown_.exchange(true)) return;
  // Either may be missing after a failed Create.
  if (session_ != nullptr) session_->Shutdown();
  if (server_ != nullptr) server_->Shutdown();
}

}  // namespace zbpp::worker
