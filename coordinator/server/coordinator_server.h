#ifndef ZBPP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
#define ZBPP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "coordinator/core/coordinator.h"

namespace zbpp::metrics {
class CoordinatorMetrics;
class MetricsServer;
}  // namespace zbpp::metrics

namespace zbpp::coordinator {

class JobServiceImpl;
class MetricsObserver;
class RendezvousServiceImpl;
class SqliteStore;
class WorkerServiceImpl;

/// The coordinator daemon as an object: the store, the core recovered from
/// it, the metrics and schedule page over HTTP, the gRPC services (JobService,
/// WorkerService, RendezvousService, health, and reflection unless a token
/// is set) and the ticker that drives leases and health. zbpp-coordinator
/// (coordinator/coordinator_main.cc) is its flags around Create; tests run
/// it in-process.
///
/// Thread-safe: the accessors from any thread; Shutdown once, then Wait.
class CoordinatorServer {
 public:
  /// The daemon's flags' values (README.md, "The control plane:
  /// `zbpp-coordinator` and `zbppctl`").
  struct Options {
    /// gRPC "HOST:PORT" (--listen); port 0: any free port.
    std::string listen;
    /// Metrics and schedule page "HOST:PORT" (--metrics-listen); port 0: any.
    std::string metrics_listen;
    /// SQLite file or ":memory:" (--db).
    std::string db;
    /// fsync every commit (--db-sync full); false: WAL with
    /// synchronous=NORMAL (--db-sync normal), whose committed writes
    /// survive a crash of the process, not necessarily a power loss.
    bool fsync_every_commit = false;
    /// File holding the bearer token every service but health requires
    /// (--token-file); empty: none.
    std::string token_file;
    /// Coordinator::Options.max_workers (--max-workers); >= 1.
    int max_workers = Coordinator::Options().max_workers;
    /// Coordinator::Options.lost_worker_retention_seconds
    /// (--lost-worker-retention-seconds), seconds; >= 0.
    double lost_worker_retention_seconds = Coordinator::Options().lost_worker_retention_seconds;
    /// Coordinator::Options.store_drain_timeout (--store-drain-seconds):
    /// at shutdown, how long a failing store write is still retried before
    /// the writes queued behind it are given up (logged). Keep it below the
    /// pod's termination grace period. >= 0.
    absl::Duration store_drain_timeout = Coordinator::Options().store_drain_timeout;
    /// ServerPolicies.max_threads (--max-threads); >= 8, or 0 for
    /// 2 * max_workers + 256.
    int max_threads = 0;
    /// Coordinator::Options.max_active_jobs (--max-active-jobs) and
    /// .retained_finished_jobs (--retain-finished-jobs); >= 1.
    int max_active_jobs = Coordinator::Options().max_active_jobs;
    int retained_finished_jobs = Coordinator::Options().retained_finished_jobs;
    /// WatchStreamLimits (coordinator/service/watch_streams.h;
    /// --max-watch-streams, --max-watch-streams-per-client): WatchJob
    /// streams open at once in total and from one client host; >= 1. Past
    /// either, a stream is refused with RESOURCE_EXHAUSTED naming the flag.
    int max_watch_streams = 1024;
    int max_watch_streams_per_client = 64;
    /// TLS (--tls-cert, --tls-key, --tls-client-ca): PEM files; all empty:
    /// plaintext. Cert and key go together; a client CA requires them.
    std::string tls_cert;
    std::string tls_key;
    std::string tls_client_ca;
  };

  /// Builds everything in the daemon's order (token, store, core recovered
  /// from the store, metrics, services, gRPC server) and starts serving;
  /// health is SERVING once it returns. On failure nothing keeps running and
  /// the error's message is the daemon's one error line (without the
  /// "zbpp-coordinator: " prefix), naming the flag:
  /// "--token-file: ...", "--db: ...", "recovering from --db: ...",
  /// "--metrics-listen: ...", "--listen: ...", or a TLS error naming the
  /// flag and the file.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Create(Options options);

  /// Shuts down (if not yet) and waits.
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  /// The gRPC address, "HOST:PORT" with HOST as Options.listen gave it and
  /// the bound port.
  std::string address() const;
  /// The metrics and schedule page address, "HOST:PORT" with the bound port.
  std::string metrics_address() const;

  /// Health goes NOT_SERVING, in-flight unary calls get up to 5 s to finish
  /// (streams are cancelled at that deadline), the ticker stops. Idempotent.
  void Shutdown();
  /// Blocks until the gRPC server stopped (after Shutdown).
  void Wait();

 private:
  CoordinatorServer();
  absl::Status Start(const Options& options);
  void Tick();

  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<MetricsObserver> observer_;
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  absl::Duration tick_period_;
  absl::Notification stop_;
  std::thread ticker_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
