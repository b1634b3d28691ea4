#ifndef ZBPP_WORKER_DAEMON_SESSION_CLIENT_H_
#define ZBPP_WORKER_DAEMON_SESSION_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/call_auth.h"
#include "worker/daemon/control_state.h"
#include "worker/daemon/step_reporter.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::worker {

/// Options of SessionClient.
struct SessionClientOptions {
  /// Channel to the coordinator's WorkerService.
  std::shared_ptr<grpc::Channel> channel;
  /// Address as the user gave it, for error messages.
  std::string coordinator_address;
  /// What this worker is (RegisterWorkerRequest.worker).
  v1::WorkerDescription description;
  /// Sent as "authorization: Bearer <token>" on every call when not empty
  /// (zbpp-worker --token-file; the coordinator's --token-file).
  std::string bearer_token;
  /// Where coordinator messages go and heartbeats come from; not owned.
  ControlState* state = nullptr;
  /// Deadline of RegisterWorker (and of the first connection).
  absl::Duration rpc_timeout = absl::Seconds(10);
  /// Wait before reopening a broken stream or retrying a failed
  /// registration, doubled after each failure up to the maximum (with
  /// jitter: each wait is drawn from [backoff/2, backoff]); reset once a
  /// stream stays open or a registration succeeds.
  absl::Duration min_reconnect_backoff = absl::Milliseconds(200);
  absl::Duration max_reconnect_backoff = absl::Seconds(5);
};

/// The worker's side of the WorkerService protocol (worker.proto): registers,
/// keeps the Session stream open (reopening it after a break with
/// exponential back-off, registering again when the coordinator forgot the
/// worker, e.g. after a coordinator restart), sends a heartbeat every
/// heartbeat_interval_seconds with ControlState's contents and applies every
/// SessionResponse to ControlState. Runs one background thread per open
/// stream pair (reader, heartbeat writer).
///
/// Every call carries the bearer token (when set) and, once registered, the
/// registration's credential (call_metadata()). A Session refused with
/// ALREADY_EXISTS (the coordinator has not yet seen the previous stream of
/// this worker end) is retried with the same back-off as a broken stream;
/// NOT_FOUND or UNAUTHENTICATED (the coordinator forgot this registration,
/// or restarted and gave the id to another worker) registers again.
///
/// Thread-safe.
class SessionClient : public StepReporter {
 public:
  /// Registers and opens the stream. Unavailable naming the address when the
  /// coordinator cannot be reached within rpc_timeout; the coordinator's
  /// error (e.g. InvalidArgument) when it refuses the registration.
  static absl::StatusOr<std::unique_ptr<SessionClient>> Create(SessionClientOptions options);
  ~SessionClient() override;

  /// The id of the current registration.
  std::string worker_id() const override;
  /// What every call naming worker_id() carries: the bearer token (when
  /// set) and the current registration's credential under
  /// kWorkerCredentialMetadataKey. Secrets: never log them.
  CallMetadata call_metadata() const;
  /// WorkerService.ReportStep with call_metadata(), within `timeout`: OK,
  /// or the call's error as an absl::Status (common/status_grpc.h).
  absl::Status ReportStep(const v1::ReportStepRequest& report, absl::Duration timeout) override;
  /// WorkerService.ReportProfile likewise.
  absl::Status ReportProfile(const v1::ReportProfileRequest& profile,
                             absl::Duration timeout) override;
  /// Closes the stream and stops the threads.
  void Shutdown();

 private:
  explicit SessionClient(SessionClientOptions options);
  absl::Status Register();
  void Loop();
  // One stream's life; returns its final status.
  grpc::Status RunStream();
  // The wait before the next reconnection attempt; doubles `*backoff`.
  absl::Duration NextBackoff(absl::Duration* backoff);
  // Sleeps `wait` or until Shutdown; false when shutting down.
  bool SleepUnlessShutdown(absl::Duration wait);
  // Calls `call` (one unary RPC into a fresh context) with call_metadata()
  // until `timeout`, again while the coordinator answers RESOURCE_EXHAUSTED
  // or UNAVAILABLE (neither is this attempt failing), with back-off.
  absl::Status CallWithRetries(const std::function<grpc::Status(grpc::ClientContext*)>& call,
                               absl::Duration timeout) const;

  SessionClientOptions options_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  mutable absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string credential_ ABSL_GUARDED_BY(mu_);  // Of worker_id_.
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::BitGen jitter_;  // Used by the loop thread only.
  std::thread loop_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_SESSION_CLIENT_H_
