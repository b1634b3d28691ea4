#include "coordinator/server/coordinator_server.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "common/call_auth.h"
#include "common/channel_credentials.h"
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

// The services this daemon serves: their health status, and the `service`
// label of zbpp_rpc_refusals_total.
const std::vector<std::string>& Services() {
  static const auto* services = new std::vector<std::string>{
      "zbpp.v1.JobService", "zbpp.v1.WorkerService", "zbpp.v1.RendezvousService"};
  return *services;
}

std::string HostOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// `status` as the daemon's error line: "<what>: <CODE>: <message>".
absl::Status Failed(const std::string& what, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.ToString()));
}

/// Drops the reflection plugin from a ServerBuilder. Linking the
/// reflection library registers it for every server (a static
/// initializer), so not calling InitProtoReflectionServerBuilderPlugin is
/// not enough.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    return p->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

// The server's TLS credentials under `options` (plaintext when no
// certificate is given); with a client CA, calls without a client
// certificate are refused and counted in `metrics`. A file that cannot be
// used: the status names the flag and the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListeningCredentials(
    const CoordinatorServer::Options& options, metrics::CoordinatorMetrics* metrics) {
  if (options.tls_cert.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<PemKeyCertPair> pair =
      ReadKeyCertPair("--tls-cert", options.tls_cert, "--tls-key", options.tls_key);
  if (!pair.ok()) return pair.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({pair->key, pair->cert});
  if (options.tls_client_ca.empty()) return grpc::SslServerCredentials(ssl);
  absl::StatusOr<std::string> ca =
      ReadPemFile("--tls-client-ca", options.tls_client_ca, PemKind::kCertificate);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *ca;
  // Requested and verified, not required: a certificate the CA did not
  // sign fails the handshake, while a client without one connects and
  // every call it makes is refused (and counted) by ClientCertificateCheck
  // instead of failing as an unexplained UNAVAILABLE that nothing on this
  // side could count.
  ssl.client_certificate_request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(ssl);
  credentials->SetAuthMetadataProcessor(std::make_shared<ClientCertificateCheck>(
      ClientCertificateCheck::Options{metrics, Services()}));
  return credentials;
}

}  // namespace

Coordinator::Options CoordinatorServer::DefaultCoreOptions() {
  Coordinator::Options options;
  options.resolve_on_background_thread = true;
  return options;
}

CoordinatorServer::CoordinatorServer() = default;

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(Options options) {
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  if (absl::Status st = server->Start(options); !st.ok()) return st;
  return server;
}

absl::Status CoordinatorServer::Start(const Options& options) {
  if (options.max_watch_streams < 1 || options.max_watch_streams_per_client < 1) {
    return absl::InvalidArgumentError(
        "--max-watch-streams and --max-watch-streams-per-client must be >= 1");
  }
  if (absl::Status st = ReadToken(options.token_file); !st.ok()) return st;
  if (absl::Status st = OpenStore(options); !st.ok()) return st;
  if (absl::Status st = CreateMetrics(); !st.ok()) return st;
  if (absl::Status st = RecoverCore(options.core); !st.ok()) return st;
  if (absl::Status st = ServeMetricsHttp(options.metrics_listen); !st.ok()) return st;
  CreateServices(options);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ListeningCredentials(options, metrics_.get());
  if (!credentials.ok()) return credentials.status();
  if (absl::Status st = StartGrpcServer(options, *std::move(credentials)); !st.ok()) return st;
  MarkServing();
  ticker_ = std::thread([this] { Tick(); });
  return absl::OkStatus();
}

absl::Status CoordinatorServer::ReadToken(const std::string& token_file) {
  if (token_file.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> contents = ReadTokenFile(token_file);
  if (!contents.ok()) return Failed("--token-file", contents.status());
  token_ = *std::move(contents);
  return absl::OkStatus();
}

absl::Status CoordinatorServer::OpenStore(const Options& options) {
  SqliteStore::Options store_options;
  store_options.path = options.db;
  store_options.fsync_every_commit = options.fsync_every_commit;
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Create(store_options);
  if (!store.ok()) return Failed("--db", store.status());
  store_ = *std::move(store);
  return absl::OkStatus();
}

absl::Status CoordinatorServer::CreateMetrics() {
  registry_ = std::make_shared<prometheus::Registry>();
  metrics::CoordinatorMetrics::Options metrics_options;
  for (v1::JobState state : kAllJobStates) {
    metrics_options.job_states.push_back(JobStateName(state));
  }
  metrics_options.worker_states = {"IDLE", "ASSIGNED", "RUNNING", "SPARE", "LOST"};
  metrics_options.rpc_services = Services();
  absl::StatusOr<std::unique_ptr<metrics::CoordinatorMetrics>> job_metrics =
      metrics::CoordinatorMetrics::Create(metrics_options, registry_);
  if (!job_metrics.ok()) return Failed("metrics", job_metrics.status());
  metrics_ = *std::move(job_metrics);
  observer_ = std::make_unique<MetricsObserver>(metrics_.get());
  return absl::OkStatus();
}

// The core's state is recovered before anything is served
// (docs/architecture.md, Layers: "store, recovered core, ..., in that order").
absl::Status CoordinatorServer::RecoverCore(const Coordinator::Options& options) {
  Coordinator::Options core_options = options;
  core_options.store = store_.get();
  core_options.observer = observer_.get();
  absl::StatusOr<std::unique_ptr<Coordinator>> core = Coordinator::Create(core_options);
  if (!core.ok()) return Failed("coordinator", core.status());
  core_ = *std::move(core);
  if (absl::Status recovered = core_->Recover(); !recovered.ok()) {
    return Failed("recovering from --db", recovered);
  }
  tick_period_ = absl::Seconds(core_options.heartbeat_interval_seconds / 2);
  return absl::OkStatus();
}

// Metrics exposition, and the schedule page on the same port.
absl::Status CoordinatorServer::ServeMetricsHttp(const std::string& metrics_listen) {
  metrics::MetricsServer::Options http_options;
  http_options.listen_address = metrics_listen;
  http_options.page_handler = [core = core_.get()](const std::string& path) {
    return ServeSchedulePage(*core, path);
  };
  absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> metrics_server =
      metrics::MetricsServer::Create(std::move(http_options), registry_);
  if (!metrics_server.ok()) return Failed("--metrics-listen", metrics_server.status());
  metrics_server_ = *std::move(metrics_server);
  return absl::OkStatus();
}

// With a token every zbpp.v1 method requires it; a worker's credential is
// required regardless where kCallerChecks (rpc_scope.cc) says so.
void CoordinatorServer::CreateServices(const Options& options) {
  const RpcPolicy rpc{metrics_.get(), token_};
  job_service_ = std::make_unique<JobServiceImpl>(JobServiceImpl::Options{
      core_.get(), rpc,
      WatchStreamLimits{options.max_watch_streams, options.max_watch_streams_per_client}});
  // The defaults are valid: Create cannot fail.
  session_gate_ = *SessionGate::Create({});
  WorkerServiceImpl::Options worker_options{core_.get(), rpc};
  worker_options.session_gate = session_gate_.get();
  worker_service_ = std::make_unique<WorkerServiceImpl>(std::move(worker_options));
  rendezvous_service_ =
      std::make_unique<RendezvousServiceImpl>(RendezvousServiceImpl::Options{core_.get(), rpc});
}

absl::Status CoordinatorServer::StartGrpcServer(
    const Options& options, std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Reflection has no hook for the bearer token, so with a token it is not
  // served at all (UNIMPLEMENTED) rather than listing the API to anyone.
  // Under mTLS ClientCertificateCheck guards it like every other service.
  if (!token_.empty()) builder.SetOption(std::make_unique<WithoutReflection>());
  ApplyServerPolicies({options.max_threads > 0 ? options.max_threads
                                               : 2 * options.core.max_workers + 256},
                      builder);
  int port = 0;
  builder.AddListeningPort(options.listen, std::move(credentials), &port);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(rendezvous_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return Failed("--listen",
                  absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen)));
  }
  address_ = absl::StrCat(HostOf(options.listen), ":", port);
  return absl::OkStatus();
}

// Ready: the state was recovered before the server started.
void CoordinatorServer::MarkServing() {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const std::string& name : Services()) health->SetServingStatus(name, true);
  // The process itself: SERVING from here to shutdown, whatever the store
  // does. Kubernetes probes this name (deploy/k8s/base/coordinator.yaml), so
  // a store outage does not restart the process and lose the writes it
  // still holds.
  health->SetServingStatus("zbpp.coordinator.process", true);
}

// Leases, forgetting lost workers, gauges and health: the core's Tick every
// half heartbeat interval. Health follows the store: NOT_SERVING while a
// store write fails and is retried (store_writer.h), since jobs are paused
// and nothing decided is being stored.
void CoordinatorServer::Tick() {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  bool serving = true;
  while (!stop_.WaitForNotificationWithTimeout(tick_period_)) {
    core_->Tick();
    session_gate_->CancelExpired();
    UpdateStateGauges(*core_, *metrics_);
    const bool healthy = core_->StoreHealth().healthy;
    if (healthy == serving) continue;
    serving = healthy;
    // By name: SetServingStatus(bool) would set every name, the process's
    // too.
    health->SetServingStatus("", serving);
    for (const std::string& name : Services()) health->SetServingStatus(name, serving);
  }
}

CoordinatorServer::~CoordinatorServer() {
  Shutdown();
  Wait();
}

std::string CoordinatorServer::address() const { return address_; }

std::string CoordinatorServer::metrics_address() const { return metrics_server_->address(); }

void CoordinatorServer::Shutdown() {
  if (server_ == nullptr || stop_.HasBeenNotified()) return;
  server_->GetHealthCheckService()->Shutdown();
  // Drain: in-flight unary calls finish; streams are cancelled at the
  // deadline.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  stop_.Notify();
  ticker_.join();
}

void CoordinatorServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace zbpp::coordinator
