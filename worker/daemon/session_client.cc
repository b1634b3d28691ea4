#include "worker/daemon/session_client.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_grpc.h"

namespace zbpp::worker {
namespace {

// Resident memory of this process now, bytes (CPU workers: their RAM use).
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

SessionClient::SessionClient(SessionClientOptions options)
    : options_(std::move(options)), stub_(v1::WorkerService::NewStub(options_.channel)) {}

absl::StatusOr<std::unique_ptr<SessionClient>> SessionClient::Create(
    SessionClientOptions options) {
  std::unique_ptr<SessionClient> client(new SessionClient(std::move(options)));
  const auto deadline =
      std::chrono::system_clock::now() + absl::ToChronoSeconds(client->options_.rpc_timeout);
  if (!client->options_.channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat("cannot reach the coordinator at ",
                                               client->options_.coordinator_address, " within ",
                                               absl::FormatDuration(client->options_.rpc_timeout)));
  }
  if (absl::Status st = client->Register(); !st.ok()) return st;
  client->loop_ = std::thread([c = client.get()] { c->Loop(); });
  return client;
}

SessionClient::~SessionClient() { Shutdown(); }

absl::Status SessionClient::Register() {
  v1::RegisterWorkerRequest request;
  *request.mutable_worker() = options_.description;
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoSeconds(options_.rpc_timeout));
  grpc::Status st = stub_->RegisterWorker(&context, request, &response);
  if (!st.ok()) {
    absl::Status status = FromGrpcStatus(st);
    // The code matters: UNIMPLEMENTED (not a coordinator) has no message.
    return absl::Status(status.code(),
                        absl::StrCat("registering with the coordinator at ",
                                     options_.coordinator_address, ": ",
                                     absl::StatusCodeToString(status.code()),
                                     status.message().empty() ? "" : ": ",
                                     std::string(status.message())));
  }
  absl::MutexLock lock(&mu_);
  worker_id_ = response.worker_id();
  heartbeat_interval_ = absl::Seconds(response.heartbeat_interval_seconds());
  return absl::OkStatus();
}

std::string SessionClient::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

grpc::Status SessionClient::RunStream() {
  grpc::ClientContext context;
  std::string id;
  absl::Duration interval;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return grpc::Status::CANCELLED;
    stream_context_ = &context;
    id = worker_id_;
    interval = heartbeat_interval_;
  }
  auto stream = stub_->Session(&context);
  v1::SessionRequest open;
  open.mutable_open()->set_worker_id(id);
  stream->Write(open);

  // The heartbeat writer: one Write at a time from this thread only; the
  // reader below runs concurrently, which gRPC allows. It writes every
  // interval, and at once when the state changes (an attempt finished, a
  // phase changed), so that the coordinator learns it without waiting.
  absl::Notification reader_done;
  std::thread writer([&] {
    int64_t revision = -1;
    while (true) {
      options_.state->WaitForChange(&revision, interval);
      if (reader_done.HasBeenNotified()) break;
      v1::SessionRequest beat;
      *beat.mutable_heartbeat() = options_.state->Heartbeat();
      beat.mutable_heartbeat()->set_memory_used_bytes(ResidentBytes());
      if (!stream->Write(beat)) break;
    }
  });
  v1::SessionResponse response;
  while (stream->Read(&response)) options_.state->Apply(response);
  reader_done.Notify();
  options_.state->Poke();
  context.TryCancel();
  writer.join();
  grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu_);
  stream_context_ = nullptr;
  return status;
}

void SessionClient::Loop() {
  while (true) {
    grpc::Status st = RunStream();
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return;
    }
    if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
      // The coordinator forgot us (lease expired, or it lost its state):
      // whatever we ran is void; become a new worker.
      std::cerr << "zbpp-worker: session ended (" << st.error_message()
                << "); registering again\n";
      options_.state->Reset();
      while (!Register().ok()) {
        absl::SleepFor(absl::Seconds(1));
        absl::MutexLock lock(&mu_);
        if (shutdown_) return;
      }
    } else {
      // A broken stream: reconnect within the lease.
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
}

void SessionClient::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    if (stream_context_ != nullptr) stream_context_->TryCancel();
  }
  if (loop_.joinable()) loop_.join();
}

}  // namespace zbpp::worker
