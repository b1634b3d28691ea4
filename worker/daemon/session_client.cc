#include "worker/daemon/session_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
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
  AddCallMetadata(BearerTokenMetadata(options_.bearer_token), context);
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
  credential_ = response.credential();
  heartbeat_interval_ = absl::Seconds(response.heartbeat_interval_seconds());
  return absl::OkStatus();
}

absl::Status SessionClient::ReportStep(const v1::ReportStepRequest& report,
                                       absl::Duration timeout) {
  // A repeat of a report the coordinator already recorded (its reply lost)
  // is acknowledged without effect.
  return CallWithRetries(
      [&](grpc::ClientContext* context) {
        v1::ReportStepResponse response;
        return stub_->ReportStep(context, report, &response);
      },
      timeout);
}

absl::Status SessionClient::ReportProfile(const v1::ReportProfileRequest& profile,
                                          absl::Duration timeout) {
  // A repeat replaces the first profile (worker.proto): harmless.
  return CallWithRetries(
      [&](grpc::ClientContext* context) {
        v1::ReportProfileResponse response;
        return stub_->ReportProfile(context, profile, &response);
      },
      timeout);
}

absl::Status SessionClient::CallWithRetries(
    const std::function<grpc::Status(grpc::ClientContext*)>& call, absl::Duration timeout) const {
  // A coordinator out of handler threads answers RESOURCE_EXHAUSTED, one
  // not reached UNAVAILABLE: neither is this attempt failing, so the call
  // is made again until `timeout`.
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoSeconds(timeout);
  absl::Duration backoff = absl::Milliseconds(10);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(deadline);
    AddCallMetadata(call_metadata(), context);
    const grpc::Status status = call(&context);
    const bool retry = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                       status.error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!retry || std::chrono::system_clock::now() + absl::ToChronoMilliseconds(backoff) >=
                      deadline) {
      return FromGrpcStatus(status);
    }
    absl::SleepFor(backoff);
    backoff = std::min(2 * backoff, absl::Milliseconds(500));
  }
}

std::string SessionClient::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

CallMetadata SessionClient::call_metadata() const {
  CallMetadata metadata = BearerTokenMetadata(options_.bearer_token);
  absl::MutexLock lock(&mu_);
  metadata.emplace_back(kWorkerCredentialMetadataKey, credential_);
  return metadata;
}

grpc::Status SessionClient::RunStream() {
  grpc::ClientContext context;
  AddCallMetadata(call_metadata(), context);
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
  // A coordinator that restarted numbers workers from 1 again and may have
  // given our old id to another worker: the address lets it tell us apart.
  open.mutable_open()->set_address(options_.description.address());
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
  // No TryCancel here: the call is over once Read fails (a Write fails at
  // once too), and cancelling would replace the coordinator's status with
  // CANCELLED, hiding the NOT_FOUND that says "register again".
  writer.join();
  grpc::Status status = stream->Finish();
  absl::MutexLock lock(&mu_);
  stream_context_ = nullptr;
  return status;
}

absl::Duration SessionClient::NextBackoff(absl::Duration* backoff) {
  // "Equal jitter", a wait in [backoff/2, backoff]: workers that lost the same
  // coordinator do not all come back in the same instant.
  const absl::Duration wait =
      *backoff / 2 + absl::Uniform(jitter_, 0.0, 0.5) * *backoff;
  *backoff = std::min(*backoff * 2, options_.max_reconnect_backoff);
  return wait;
}

bool SessionClient::SleepUnlessShutdown(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return shutdown_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), wait);
  return !shutdown_;
}

void SessionClient::Loop() {
  absl::Duration backoff = options_.min_reconnect_backoff;
  while (true) {
    const absl::Time opened = absl::Now();
    grpc::Status st = RunStream();
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_) return;
    }
    // A stream that lasted was a working connection (one to a coordinator
    // that is down fails at once): the next break starts the back-off
    // afresh.
    if (absl::Now() - opened >= absl::Seconds(1)) {
      backoff = options_.min_reconnect_backoff;
    }
    if (st.error_code() == grpc::StatusCode::NOT_FOUND ||
        st.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      // The coordinator forgot us (lease expired, or it restarted and lost
      // its workers, or gave our old id to another worker, whose credential
      // ours is not): whatever we ran is void; become a new worker.
      Logf("session ended (%s); registering again", st.error_message());
      options_.state->Reset();
      while (true) {
        absl::Status registered = Register();
        if (registered.ok()) break;
        const absl::Duration wait = NextBackoff(&backoff);
        Logf("%s; retrying in %s", registered.message(), absl::FormatDuration(wait));
        if (!SleepUnlessShutdown(wait)) return;
      }
      Logf("registered again as %s", worker_id());
      backoff = options_.min_reconnect_backoff;
    } else {
      // A broken stream (the coordinator is down or restarting, the
      // network failed), or a reopen refused with ALREADY_EXISTS because the
      // coordinator has not yet seen our previous stream end: reconnect
      // with back-off, within the lease if the coordinator is still there.
      const absl::Duration wait = NextBackoff(&backoff);
      Logf("session stream ended (%d: %s); reconnecting in %s", st.error_code(),
           st.error_message(), absl::FormatDuration(wait));
      if (!SleepUnlessShutdown(wait)) return;
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
