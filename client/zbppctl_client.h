// zbppctl's side of the gRPC API: one channel to the coordinator, a deadline
// and the bearer token on every call, and errors phrased for the user.

#ifndef ZBPP_CLIENT_ZBPPCTL_CLIENT_H_
#define ZBPP_CLIENT_ZBPPCTL_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::ctl {

/// A JobService and WorkerService client for one coordinator.
///
/// Errors: the server's status (FromGrpcStatus) for errors the coordinator
/// returns (an UNAVAILABLE on a connected channel included, e.g. a failing
/// store), except that a failure to connect is Unavailable with the message
/// "cannot reach coordinator at ADDR: <why>" (with TlsMismatchHint's
/// clause when a TLS mismatch is the likely cause) and a call that found the
/// channel connected but got no answer in time is DeadlineExceeded with
/// "no answer from coordinator at ADDR within Ns". Not thread-safe.
class CoordinatorClient {
 public:
  struct Options {
    /// host:port of the coordinator's gRPC server.
    std::string address;
    /// Sent as `authorization: Bearer <token>` on every call when not empty.
    std::string bearer_token;
    /// TLS (common/channel_credentials.h); null means plaintext.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    /// Whether `credentials` are TLS (--tls-ca given): a failure to connect
    /// then names a TLS mismatch as its likely cause (common/tls_hint.h).
    bool tls = false;
    /// Deadline of each unary call, and of the connection before WatchJob's
    /// stream (which itself has none).
    absl::Duration timeout = absl::Seconds(10);
  };

  /// Creates the channel; connecting is lazy (the first call connects).
  static std::unique_ptr<CoordinatorClient> Create(Options options);

  absl::StatusOr<v1::Job> SubmitJob(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id, v1::JobView view);
  /// Schedule version `version` (>= 1) of a job, whatever was published
  /// after it.
  absl::StatusOr<v1::ScheduleVersion> GetScheduleVersion(const std::string& job_id,
                                                         int64_t version);
  /// Every job, newest first, following next_page_token (each page its own
  /// deadline).
  absl::StatusOr<std::vector<v1::Job>> ListJobs();
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id);
  /// Workers in any state but LOST, in registration order, following
  /// next_page_token (each page its own deadline).
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers();
  /// Every completed step of a job, oldest first (all ListSteps pages).
  absl::StatusOr<std::vector<v1::StepSummary>> ListSteps(const std::string& job_id);

  /// Streams WatchJob, calling `on_event` for each event in order, until the
  /// server ends the stream (OK) or `on_event` returns false (the call is
  /// cancelled; OK). Waits at most `timeout` for the connection; the stream
  /// has no deadline. A stream broken after its first event is Unavailable
  /// "lost connection to coordinator at ADDR: <why>".
  absl::Status WatchJob(
      const std::string& job_id,
      const std::function<bool(const v1::JobEvent&)>& on_event);

 private:
  explicit CoordinatorClient(Options options);
  /// A context with the deadline and the token.
  std::unique_ptr<grpc::ClientContext> NewContext(bool with_deadline) const;
  /// `status` as an absl::Status, connection failures phrased for the user.
  absl::Status Convert(const grpc::Status& status) const;

  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_CLIENT_H_
