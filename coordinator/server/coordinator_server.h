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
#include "coordinator/service/session_gate.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace prometheus {
class Registry;
}  // namespace prometheus

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
  /// The core's options as the daemon runs them: Coordinator::Options'
  /// defaults with resolve_on_background_thread.
  static Coordinator::Options DefaultCoreOptions();

  /// The daemon's flags' values (docs/control-plane.md, "The control plane:
  /// `zbpp-coordinator` and `zbppctl`"), grouped by what they configure.
  struct Options {
    // --- Listening ---
    /// gRPC "HOST:PORT" (--listen); port 0: any free port.
    std::string listen;
    /// Metrics and schedule page "HOST:PORT" (--metrics-listen); port 0: any.
    std::string metrics_listen;

    // --- The store ---
    /// SQLite file or ":memory:" (--db).
    std::string db;
    /// fsync every commit (--db-sync full); false: WAL with
    /// synchronous=NORMAL (--db-sync normal), whose committed writes
    /// survive a crash of the process, not necessarily a power loss.
    bool fsync_every_commit = false;

    // --- The core ---
    /// The core's limits and timings (coordinator/core/coordinator_options.h),
    /// among them max_workers (--max-workers), lost_worker_retention_seconds
    /// (--lost-worker-retention-seconds), store_drain_timeout
    /// (--store-drain-seconds; keep it below the pod's termination grace
    /// period), max_active_jobs (--max-active-jobs) and
    /// retained_finished_jobs (--retain-finished-jobs). Its dependencies
    /// `store` and `observer` are the server's own (whatever is set here is
    /// replaced). By default re-solves run on the core's background thread,
    /// so that the ReportStep completing a window returns without waiting
    /// for the solver.
    Coordinator::Options core = DefaultCoreOptions();

    // --- gRPC threads and streams ---
    /// ServerPolicies.max_threads (--max-threads); >= 8, or 0 for
    /// 2 * core.max_workers + 256.
    int max_threads = 0;
    /// WatchStreamLimits (coordinator/service/watch_streams.h;
    /// --max-watch-streams, --max-watch-streams-per-client): WatchJob
    /// streams open at once in total and from one client host; >= 1. Past
    /// either, a stream is refused with RESOURCE_EXHAUSTED naming the flag.
    int max_watch_streams = 1024;
    int max_watch_streams_per_client = 64;

    // --- Security ---
    /// File holding the bearer token every service but health requires
    /// (--token-file); empty: none.
    std::string token_file;
    /// TLS (--tls-cert, --tls-key, --tls-client-ca): PEM files; all empty:
    /// plaintext. Cert and key go together; a client CA requires them.
    std::string tls_cert;
    std::string tls_key;
    std::string tls_client_ca;
  };

  /// Builds everything in the daemon's order (token, store, metrics, the
  /// core recovered from the store, the metrics HTTP server, services, TLS
  /// credentials, gRPC server: the private steps below) and starts serving;
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

  // Start's steps, in the daemon's order (docs/architecture.md, Layers:
  // store, recovered core, metrics, services, gRPC server: recover, wire, then
  // serve). Each sets the members it names; on error the message is the
  // daemon's error line, naming the flag.
  absl::Status Start(const Options& options);
  /// token_ from Options.token_file.
  absl::Status ReadToken(const std::string& token_file);
  /// store_ on Options.db.
  absl::Status OpenStore(const Options& options);
  /// registry_, metrics_ and observer_.
  absl::Status CreateMetrics();
  /// core_ over store_, recovered from it; tick_period_.
  absl::Status RecoverCore(const Coordinator::Options& core_options);
  /// metrics_server_: /metrics and the schedule page.
  absl::Status ServeMetricsHttp(const std::string& metrics_listen);
  /// The three services over core_.
  void CreateServices(const Options& options);
  /// server_ on Options.listen with `credentials`; address_.
  absl::Status StartGrpcServer(const Options& options,
                               std::shared_ptr<grpc::ServerCredentials> credentials);
  /// Health SERVING (every service, and the process's own name).
  void MarkServing();
  void Tick();

  // In construction order: each member is built from those above it, so
  // they are destroyed in the reverse (the gRPC server before the services,
  // the core, which drains its store writes, before the observer and the
  // store).
  std::string token_;  // Empty: none.
  std::unique_ptr<SqliteStore> store_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::CoordinatorMetrics> metrics_;
  std::unique_ptr<MetricsObserver> observer_;
  std::unique_ptr<Coordinator> core_;
  absl::Duration tick_period_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  std::unique_ptr<JobServiceImpl> job_service_;
  /// Session streams before their first message (session_gate.h): the
  /// ticker cancels those past its timeout.
  std::unique_ptr<SessionGate> session_gate_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<RendezvousServiceImpl> rendezvous_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  absl::Notification stop_;
  std::thread ticker_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVER_COORDINATOR_SERVER_H_
