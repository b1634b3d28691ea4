// zbpp-coordinator: the daemon. The construction order lives here and only
// here (STYLE.md 10): flags, store, core recovery, metrics, services, gRPC
// server (health, and reflection unless --token-file), then the "listening"
// line, then SIGTERM.
//
//   zbpp-coordinator --listen HOST:PORT --metrics-listen HOST:PORT
//                    --db FILE|:memory: [--db-sync full|normal]
//                    [--token-file F] [--max-workers N] [--max-threads N]
//                    [--lost-worker-retention-seconds S]
//                    [--tls-cert F --tls-key F [--tls-client-ca F]]

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/call_auth.h"
#include "common/channel_credentials.h"
#include "common/flags.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/service/job_service.h"
#include "coordinator/service/metrics_observer.h"
#include "coordinator/service/rendezvous_service.h"
#include "coordinator/service/rpc_scope.h"
#include "coordinator/service/schedule_page.h"
#include "coordinator/service/server_policies.h"
#include "coordinator/service/worker_service.h"
#include "coordinator/store/sqlite_store.h"
#include "metrics/coordinator_metrics.h"
#include "metrics/metrics_server.h"
#include "prometheus/registry.h"

namespace zbpp::coordinator {
namespace {

constexpr char kUsage[] =
    "usage: zbpp-coordinator --listen HOST:PORT --metrics-listen HOST:PORT "
    "--db FILE|:memory: [--db-sync full|normal] [--token-file F] "
    "[--max-workers N] [--max-threads N] [--lost-worker-retention-seconds S] "
    "[--tls-cert F --tls-key F "
    "[--tls-client-ca F]]";

struct Flags {
  std::string listen;
  std::string metrics_listen;
  std::string db;
  /// "normal" (default): SQLite WAL + synchronous=NORMAL — a committed write
  /// survives a crash of the process; a power loss may lose the last
  /// commits but never corrupts the database. "full": fsync every commit.
  std::string db_sync = "normal";
  std::string token_file;
  /// Coordinator::Options.max_workers: workers held at once (LOST ones
  /// until forgotten included); RegisterWorker refuses more. >= 1.
  int max_workers = Coordinator::Options().max_workers;
  /// Coordinator::Options.lost_worker_retention_seconds: how long a LOST
  /// worker stays listed before it is forgotten, seconds; >= 0.
  double lost_worker_retention_seconds =
      Coordinator::Options().lost_worker_retention_seconds;
  /// ServerPolicies.max_threads; 0 (unset): 2 * max_workers + 256. >= 8.
  int max_threads = 0;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  std::string max_workers;
  std::string max_threads;
  std::string retention;
  const std::map<std::string, std::string*> known = {
      {"--listen", &flags.listen},         {"--metrics-listen", &flags.metrics_listen},
      {"--db", &flags.db},                 {"--db-sync", &flags.db_sync},
      {"--token-file", &flags.token_file},
      {"--max-workers", &max_workers},
      {"--max-threads", &max_threads},
      {"--lost-worker-retention-seconds", &retention},
      {"--tls-cert", &flags.tls_cert},     {"--tls-key", &flags.tls_key},
      {"--tls-client-ca", &flags.tls_client_ca}};
  std::set<std::string> names;
  for (const auto& [name, target] : known) names.insert(name);
  absl::StatusOr<std::map<std::string, std::string>> values = ParseLongFlags(argc, argv, names);
  if (!values.ok()) return values.status();
  for (const auto& [name, value] : *values) *known.at(name) = value;
  if (flags.listen.empty()) return absl::InvalidArgumentError("--listen is required");
  if (flags.metrics_listen.empty()) {
    return absl::InvalidArgumentError("--metrics-listen is required");
  }
  if (flags.db.empty()) return absl::InvalidArgumentError("--db is required");
  if (flags.db_sync != "full" && flags.db_sync != "normal") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--db-sync must be full or normal, got \"", flags.db_sync, "\""));
  }
  if (!max_workers.empty() &&
      (!absl::SimpleAtoi(max_workers, &flags.max_workers) ||
       flags.max_workers < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-workers must be an integer >= 1, got \"", max_workers, "\""));
  }
  if (!max_threads.empty() &&
      (!absl::SimpleAtoi(max_threads, &flags.max_threads) ||
       flags.max_threads < 8)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-threads must be an integer >= 8, got \"", max_threads, "\""));
  }
  if (flags.max_threads == 0) flags.max_threads = 2 * flags.max_workers + 256;
  if (!retention.empty() &&
      (!absl::SimpleAtod(retention, &flags.lost_worker_retention_seconds) ||
       !std::isfinite(flags.lost_worker_retention_seconds) ||
       flags.lost_worker_retention_seconds < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lost-worker-retention-seconds must be a number >= 0, got \"",
        retention, "\""));
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together");
  }
  if (!flags.tls_client_ca.empty() && flags.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key");
  }
  return flags;
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

/// Drops the reflection plugin from a ServerBuilder. Linking the
/// reflection library registers it for every server (a static
/// initializer), so not calling InitProtoReflectionServerBuilderPlugin is
/// not enough.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(
      std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == "proto_server_reflection";
                       }),
        plugins->end());
  }
};

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "zbpp-coordinator: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  return 1;
}

// A TLS file that cannot be used: its status already names the flag and
// the file. Exit 1, as for --db and --token-file.
int FailTls(const absl::Status& status) {
  std::fprintf(stderr, "zbpp-coordinator: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "zbpp-coordinator: %s; %s\n",
                 std::string(flags.status().message()).c_str(), kUsage);
    return 2;
  }
  const sigset_t signals = BlockTerminationSignals();

  std::string token;
  if (!flags->token_file.empty()) {
    absl::StatusOr<std::string> contents = ReadTokenFile(flags->token_file);
    if (!contents.ok()) return Fail("--token-file", contents.status());
    token = *std::move(contents);
  }

  // 1. The store, 2. the core recovered from it (before serving).
  SqliteStore::Options store_options;
  store_options.path = flags->db;
  store_options.fsync_every_commit = flags->db_sync == "full";
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Create(store_options);
  if (!store.ok()) return Fail("--db", store.status());

  // The services this daemon serves: their health status, and the
  // `service` label of zbpp_rpc_refusals_total.
  const std::vector<std::string> services = {
      "zbpp.v1.JobService", "zbpp.v1.WorkerService",
      "zbpp.v1.RendezvousService"};

  auto registry = std::make_shared<prometheus::Registry>();
  metrics::CoordinatorMetrics::Options metrics_options;
  metrics_options.job_states = {"PENDING",   "ASSIGNING", "RUNNING",
                                "RECOVERING", "SUCCEEDED", "FAILED",
                                "CANCELLED"};
  metrics_options.worker_states = {"IDLE", "ASSIGNED", "RUNNING", "LOST"};
  metrics_options.rpc_services = services;
  absl::StatusOr<std::unique_ptr<metrics::CoordinatorMetrics>> job_metrics =
      metrics::CoordinatorMetrics::Create(metrics_options, registry);
  if (!job_metrics.ok()) return Fail("metrics", job_metrics.status());
  MetricsObserver observer(job_metrics->get());

  Coordinator::Options core_options;
  core_options.store = store->get();
  core_options.observer = &observer;
  core_options.validate_spec = ValidateJobSpec;
  core_options.initial_problem = InitialProblem;
  core_options.max_workers = flags->max_workers;
  core_options.lost_worker_retention_seconds =
      flags->lost_worker_retention_seconds;
  // ReportStep returns without waiting for a re-solve (issue 3 §5).
  core_options.resolve_on_background_thread = true;
  absl::StatusOr<std::unique_ptr<Coordinator>> core =
      Coordinator::Create(core_options);
  if (!core.ok()) return Fail("coordinator", core.status());
  if (absl::Status recovered = (*core)->Recover(); !recovered.ok()) {
    return Fail("recovering from --db", recovered);
  }

  // 3. Metrics exposition, and the schedule page on the same port.
  metrics::MetricsServer::Options http_options;
  http_options.listen_address = flags->metrics_listen;
  http_options.page_handler = [&core](const std::string& path) {
    return ServeSchedulePage(**core, path);
  };
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Create(std::move(http_options), registry);
  if (!metrics_server.ok()) {
    return Fail("--metrics-listen", metrics_server.status());
  }

  // 4. Services and the server.
  // With a token every service but health requires it; a worker's
  // credential is required regardless.
  JobServiceImpl job_service({core->get(), job_metrics->get(), token});
  WorkerServiceImpl worker_service({core->get(), job_metrics->get(), token});
  RendezvousServiceImpl rendezvous_service(
      {core->get(), job_metrics->get(), token});

  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (!flags->tls_cert.empty()) {
    absl::StatusOr<PemKeyCertPair> pair = ReadKeyCertPair(
        "--tls-cert", flags->tls_cert, "--tls-key", flags->tls_key);
    if (!pair.ok()) return FailTls(pair.status());
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({pair->key, pair->cert});
    if (!flags->tls_client_ca.empty()) {
      absl::StatusOr<std::string> ca = ReadPemFile(
          "--tls-client-ca", flags->tls_client_ca, PemKind::kCertificate);
      if (!ca.ok()) return FailTls(ca.status());
      ssl.pem_root_certs = *ca;
      // Requested and verified, not required: a certificate the CA did not
      // sign fails the handshake, while a client without one connects and
      // every call it makes is refused (and counted) by
      // ClientCertificateCheck instead of failing as an unexplained
      // UNAVAILABLE that nothing on this side could count.
      ssl.client_certificate_request =
          GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
    if (!flags->tls_client_ca.empty()) {
      credentials->SetAuthMetadataProcessor(
          std::make_shared<ClientCertificateCheck>(
              ClientCertificateCheck::Options{job_metrics->get(), services}));
    }
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Reflection has no hook for the bearer token, so with a token it is not
  // served at all (UNIMPLEMENTED) rather than listing the API to anyone.
  // Under mTLS ClientCertificateCheck guards it like every other service.
  if (!token.empty()) builder.SetOption(std::make_unique<WithoutReflection>());
  ApplyServerPolicies({flags->max_threads}, builder);
  int port = 0;
  builder.AddListeningPort(flags->listen, credentials, &port);
  builder.RegisterService(&job_service);
  builder.RegisterService(&worker_service);
  builder.RegisterService(&rendezvous_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail("--listen", absl::UnavailableError(absl::StrCat(
                                "cannot listen on ", flags->listen)));
  }
  // Ready: the state was recovered before the server started.
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const std::string& name : services) {
    health->SetServingStatus(name, true);
  }
  // The process itself: SERVING from here to shutdown, whatever the store
  // does. Kubernetes probes this name (deploy/k8s/base/coordinator.yaml), so
  // a store outage does not restart the process and lose the writes it
  // still holds.
  health->SetServingStatus("zbpp.coordinator.process", true);

  // Leases, forgetting lost workers, gauges and health: the core's Tick
  // every half heartbeat interval. Health follows the store: NOT_SERVING
  // while a store write fails and is retried (store_writer.h), since jobs
  // are paused and nothing decided is being stored.
  absl::Notification stop;
  std::thread ticker([&] {
    const absl::Duration period = absl::Seconds(core_options.heartbeat_interval_seconds / 2);
    bool serving = true;
    while (!stop.WaitForNotificationWithTimeout(period)) {
      (*core)->Tick();
      UpdateStateGauges(**core, **job_metrics);
      const bool healthy = (*core)->StoreHealth().healthy;
      if (healthy == serving) continue;
      serving = healthy;
      // By name: SetServingStatus(bool) would set every name, the
      // process's too.
      health->SetServingStatus("", serving);
      for (const std::string& name : services) {
        health->SetServingStatus(name, serving);
      }
    }
  });

  std::printf("zbpp-coordinator listening grpc=%s:%d metrics=%s\n",
              HostOf(flags->listen).c_str(), port,
              (*metrics_server)->address().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  health->Shutdown();
  // Drain: in-flight unary calls finish; streams are cancelled at the
  // deadline.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  stop.Notify();
  ticker.join();
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace zbpp::coordinator

int main(int argc, char** argv) { return zbpp::coordinator::Main(argc, argv); }
