#ifndef ZBPP_COORDINATOR_SERVICE_WATCH_STREAMS_H_
#define ZBPP_COORDINATOR_SERVICE_WATCH_STREAMS_H_

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/service/rpc_scope.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

/// Caps on JobService.WatchJob streams (the daemon's --max-watch-streams
/// and --max-watch-streams-per-client).
struct WatchStreamLimits {
  /// Streams open at once, every client's; >= 1.
  int max_streams = 1024;
  /// Streams open at once from one client host (the peer's address without
  /// its port: every connection of a host counts); >= 1.
  int max_streams_per_client = 64;
};

/// The WatchJob streams of a JobService, on gRPC's callback API: a stream
/// holds no server thread while it waits for events (a held synchronous
/// stream would take one from the pool the workers' calls need; the server's
/// --max-threads). Each stream is a ServerWriteReactor; its job's outbox
/// (Coordinator::WatchJob) tells the one pump thread when events are
/// queued, and the pump starts the writes and finishes the streams. Every
/// gRPC call of a stream is made from the pump thread holding no lock, since
/// gRPC may run a reaction (OnWriteDone, OnDone) inline in it.
///
/// A stream past a cap is refused with RESOURCE_EXHAUSTED naming the cap and
/// its flag; an unknown job with NOT_FOUND; a missing or wrong token with
/// UNAUTHENTICATED. A stream ends OK after its job's terminal state change,
/// CANCELLED when the client goes away (or the server shuts down).
///
/// Thread-safe. Destroy it after the gRPC server has shut down (every
/// stream finished): the destructor stops the pump.
class WatchStreams {
 public:
  struct Options {
    /// The core; not owned, required.
    Coordinator* coordinator = nullptr;
    /// The caller's check and the call's record (RpcScope).
    RpcPolicy rpc;
    WatchStreamLimits limits;
  };

  explicit WatchStreams(Options options);
  ~WatchStreams();
  WatchStreams(const WatchStreams&) = delete;
  WatchStreams& operator=(const WatchStreams&) = delete;

  /// JobService.WatchJob: the reactor of a new stream (already finished
  /// when refused). gRPC owns it; it deletes itself in OnDone.
  grpc::ServerWriteReactor<zbpp::v1::JobEvent>* Start(
      grpc::CallbackServerContext* context, const zbpp::v1::WatchJobRequest& request);

  /// Streams open now (tests, logs).
  int open() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Stream;
  struct State;

  /// The host part of a gRPC peer ("ipv4:10.0.0.1:5000" -> "ipv4:10.0.0.1").
  static std::string ClientOf(std::string_view peer);
  /// Counts a stream of `client` in: OK, or ResourceExhausted naming the
  /// cap it would pass.
  absl::Status Admit(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);
  /// Queues `state` for the pump (at most once until the pump takes it).
  void Wake(const std::shared_ptr<State>& state) ABSL_LOCKS_EXCLUDED(mu_);
  void PumpLoop() ABSL_LOCKS_EXCLUDED(mu_);
  /// Starts the next write of `state`'s stream or finishes it.
  void Pump(const std::shared_ptr<State>& state);

  const Options options_;
  mutable absl::Mutex mu_;
  /// Streams with something to do, each at most once (State::queued).
  std::deque<std::shared_ptr<State>> ready_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> open_by_client_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread pump_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_WATCH_STREAMS_H_
