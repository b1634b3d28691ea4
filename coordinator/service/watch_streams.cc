#include "coordinator/service/watch_streams.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/service/rpc_scope.h"

namespace zbpp::coordinator {

// What the pump and the reactor's reactions share. The reactions only set
// flags here and wake the pump; the pump alone calls the reactor's gRPC
// methods (StartWrite, Finish).
struct WatchStreams::State {
  absl::Mutex mu;
  /// Null once the reactor is done (deleted).
  Stream* stream ABSL_GUARDED_BY(mu) = nullptr;
  bool write_in_flight ABSL_GUARDED_BY(mu) = false;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  /// Finish was called: nothing more may be.
  bool finishing ABSL_GUARDED_BY(mu) = false;
  /// Popped from the outbox, not yet written.
  std::deque<zbpp::v1::JobEvent> pending ABSL_GUARDED_BY(mu);
  /// Set before the state is first woken; const after.
  std::shared_ptr<WatchOutbox> outbox;
  /// In WatchStreams::ready_; guarded by WatchStreams::mu_.
  bool queued = false;
};

class WatchStreams::Stream final : public grpc::ServerWriteReactor<zbpp::v1::JobEvent> {
 public:
  Stream(WatchStreams* owner, const grpc::CallbackServerContext& context, std::string job_id,
         std::string client)
      : owner_(owner),
        rpc_(owner->options_.rpc, context, "/zbpp.v1.JobService/WatchJob"),
        job_id_(std::move(job_id)),
        client_(std::move(client)),
        state_(std::make_shared<State>()) {}

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&state_->mu);
      state_->write_in_flight = false;
      if (!ok) state_->cancelled = true;
    }
    owner_->Wake(state_);
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&state_->mu);
      state_->cancelled = true;
    }
    owner_->Wake(state_);
  }

  void OnDone() override {
    if (state_->outbox != nullptr) {
      owner_->options_.coordinator->Unwatch(job_id_, state_->outbox);
    }
    if (admitted_) owner_->Release(client_);
    {
      absl::MutexLock lock(&state_->mu);
      state_->stream = nullptr;
    }
    delete this;
  }

  /// Ends a stream refused before it was handed to the pump.
  void Refuse(const absl::Status& status) { Finish(rpc_.Finish(status)); }

  WatchStreams* const owner_;
  RpcScope rpc_;
  const std::string job_id_;
  const std::string client_;
  const std::shared_ptr<State> state_;
  bool admitted_ = false;
  /// The event being written (the pump's, while a write is in flight).
  zbpp::v1::JobEvent current_;
};

WatchStreams::WatchStreams(Options options) : options_(std::move(options)) {
  pump_ = std::thread([this] { PumpLoop(); });
}

WatchStreams::~WatchStreams() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  pump_.join();
}

int WatchStreams::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

std::string WatchStreams::ClientOf(std::string_view peer) {
  // "ipv4:1.2.3.4:5", "ipv6:[::1]:5": drop the port; "unix:/path" has none.
  if (peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) peer = peer.substr(0, colon);
  }
  return std::string(peer);
}

absl::Status WatchStreams::Admit(const std::string& client) {
  absl::MutexLock lock(&mu_);
  if (open_ >= options_.limits.max_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "WatchJob: ", open_, " streams are open, the cap of --max-watch-streams (",
        options_.limits.max_streams, "); retry later"));
  }
  int& mine = open_by_client_[client];
  if (mine >= options_.limits.max_streams_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "WatchJob: this client holds ", mine,
        " streams, the cap of --max-watch-streams-per-client (",
        options_.limits.max_streams_per_client, "); close one first"));
  }
  ++mine;
  ++open_;
  return absl::OkStatus();
}

void WatchStreams::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  --open_;
  auto it = open_by_client_.find(client);
  if (it != open_by_client_.end() && --it->second <= 0) open_by_client_.erase(it);
}

grpc::ServerWriteReactor<zbpp::v1::JobEvent>* WatchStreams::Start(
    grpc::CallbackServerContext* context, const zbpp::v1::WatchJobRequest& request) {
  auto* stream = new Stream(this, *context, request.job_id(), ClientOf(context->peer()));
  if (!stream->rpc_.admitted().ok()) {
    stream->Refuse(stream->rpc_.admitted());
    return stream;
  }
  if (absl::Status id = CheckJobId(request.job_id()); !id.ok()) {
    stream->Refuse(id);
    return stream;
  }
  absl::StatusOr<std::shared_ptr<WatchOutbox>> outbox =
      options_.coordinator->WatchJob(request.job_id());
  if (!outbox.ok()) {
    stream->Refuse(outbox.status());
    return stream;
  }
  // Counted only once the job is known, so a refused stream holds no place
  // (OnDone releases it only after the client has seen the refusal).
  if (absl::Status admitted = Admit(stream->client_); !admitted.ok()) {
    options_.coordinator->Unwatch(request.job_id(), *outbox);
    stream->Refuse(admitted);
    return stream;
  }
  stream->admitted_ = true;
  const std::shared_ptr<State>& state = stream->state_;
  state->outbox = *std::move(outbox);
  {
    absl::MutexLock lock(&state->mu);
    state->stream = stream;
  }
  state->outbox->SetListener([this, weak = std::weak_ptr<State>(state)] {
    if (std::shared_ptr<State> woken = weak.lock()) Wake(woken);
  });
  Wake(state);  // The snapshot is queued already.
  return stream;
}

void WatchStreams::Wake(const std::shared_ptr<State>& state) {
  absl::MutexLock lock(&mu_);
  if (state->queued || stop_) return;
  state->queued = true;
  ready_.push_back(state);
}

void WatchStreams::PumpLoop() {
  while (true) {
    std::shared_ptr<State> state;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !ready_.empty();
      };
      mu_.Await(absl::Condition(&woken));
      if (stop_) return;
      state = std::move(ready_.front());
      ready_.pop_front();
      state->queued = false;
    }
    Pump(state);
  }
}

void WatchStreams::Pump(const std::shared_ptr<State>& state) {
  Stream* stream = nullptr;
  std::optional<absl::Status> finish;
  bool write = false;
  {
    absl::MutexLock lock(&state->mu);
    stream = state->stream;
    if (stream == nullptr || state->finishing || state->write_in_flight) return;
    if (state->cancelled) {
      finish = absl::CancelledError("client went away");
    } else {
      if (state->pending.empty()) {
        std::vector<zbpp::v1::JobEvent> events;
        const absl::Status popped = state->outbox->Pop(absl::InfinitePast(), &events);
        for (auto& event : events) state->pending.push_back(std::move(event));
        // OutOfRange: the job ended and every event was written.
        if (absl::IsOutOfRange(popped)) {
          finish = absl::OkStatus();
        } else if (!popped.ok()) {
          finish = popped;
        }
      }
      if (!finish.has_value() && !state->pending.empty()) {
        stream->current_ = std::move(state->pending.front());
        state->pending.pop_front();
        state->write_in_flight = true;
        write = true;
      }
    }
    if (finish.has_value()) state->finishing = true;
  }
  // No lock held: gRPC may run OnWriteDone or OnDone inline here.
  if (write) {
    stream->StartWrite(&stream->current_);
  } else if (finish.has_value()) {
    stream->Finish(stream->rpc_.Finish(*finish));
  }
}

}  // namespace zbpp::coordinator
