// zbpp-coordinator: the daemon. Flags, then CoordinatorServer
// (coordinator/server/coordinator_server.h: store, core recovery, metrics,
// services, gRPC server with health, and reflection unless --token-file),
// then the "listening" line, then SIGTERM.
//
//   zbpp-coordinator --listen HOST:PORT --metrics-listen HOST:PORT
//                    --db FILE|:memory: [--db-sync full|normal]
//                    [--token-file F] [--max-workers N] [--max-threads N]
//                    [--lost-worker-retention-seconds S] [--store-drain-seconds S]
//                    [--max-watch-streams N] [--max-watch-streams-per-client N]
//                    [--max-active-jobs N] [--retain-finished-jobs N]
//                    [--calibration-timeout-seconds S]
//                    [--max-submissions-per-second R] [--submission-burst N]
//                    [--tls-cert F --tls-key F [--tls-client-ca F]]

#include <pthread.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/log.h"
#include "coordinator/server/coordinator_server.h"

namespace zbpp::coordinator {
namespace {

constexpr char kUsage[] =
    "usage: zbpp-coordinator --listen HOST:PORT --metrics-listen HOST:PORT "
    "--db FILE|:memory: [--db-sync full|normal] [--token-file F] "
    "[--max-workers N] [--max-threads N] [--lost-worker-retention-seconds S] "
    "[--store-drain-seconds S] "
    "[--max-watch-streams N] [--max-watch-streams-per-client N] "
    "[--max-active-jobs N] [--retain-finished-jobs N] "
    "[--calibration-timeout-seconds S] "
    "[--max-submissions-per-second R] [--submission-burst N] "
    "[--tls-cert F --tls-key F "
    "[--tls-client-ca F]]";

// The flags as CoordinatorServer's options (whose comments say what each
// means); InvalidArgument naming the flag when one is missing or malformed.
absl::StatusOr<CoordinatorServer::Options> ParseFlags(int argc, char** argv) {
  CoordinatorServer::Options flags;
  std::string db_sync = "normal";
  std::string max_workers;
  std::string max_threads;
  std::string retention;
  std::string drain;
  std::string max_watch;
  std::string max_watch_per_client;
  std::string max_active_jobs;
  std::string retained_jobs;
  std::string calibration_timeout;
  std::string submission_rate;
  std::string submission_burst;
  const std::map<std::string, std::string*> known = {
      {"--listen", &flags.listen},         {"--metrics-listen", &flags.metrics_listen},
      {"--db", &flags.db},                 {"--db-sync", &db_sync},
      {"--token-file", &flags.token_file},
      {"--max-workers", &max_workers},
      {"--max-threads", &max_threads},
      {"--lost-worker-retention-seconds", &retention},
      {"--store-drain-seconds", &drain},
      {"--max-watch-streams", &max_watch},
      {"--max-watch-streams-per-client", &max_watch_per_client},
      {"--max-active-jobs", &max_active_jobs},
      {"--retain-finished-jobs", &retained_jobs},
      {"--calibration-timeout-seconds", &calibration_timeout},
      {"--max-submissions-per-second", &submission_rate},
      {"--submission-burst", &submission_burst},
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
  if (db_sync != "full" && db_sync != "normal") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--db-sync must be full or normal, got \"", db_sync, "\""));
  }
  flags.fsync_every_commit = db_sync == "full";
  if (!max_workers.empty() &&
      (!absl::SimpleAtoi(max_workers, &flags.core.max_workers) ||
       flags.core.max_workers < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-workers must be an integer >= 1, got \"", max_workers, "\""));
  }
  if (!max_threads.empty() &&
      (!absl::SimpleAtoi(max_threads, &flags.max_threads) ||
       flags.max_threads < 8)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-threads must be an integer >= 8, got \"", max_threads, "\""));
  }
  for (const auto& [flag, text, value] :
       {std::tuple{"--max-watch-streams", &max_watch, &flags.max_watch_streams},
        std::tuple{"--max-watch-streams-per-client", &max_watch_per_client,
                   &flags.max_watch_streams_per_client},
        std::tuple{"--max-active-jobs", &max_active_jobs, &flags.core.max_active_jobs},
        std::tuple{"--retain-finished-jobs", &retained_jobs,
                   &flags.core.retained_finished_jobs}}) {
    if (!text->empty() && (!absl::SimpleAtoi(*text, value) || *value < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " must be an integer >= 1, got \"", *text, "\""));
    }
  }
  if (!retention.empty() &&
      (!absl::SimpleAtod(retention, &flags.core.lost_worker_retention_seconds) ||
       !std::isfinite(flags.core.lost_worker_retention_seconds) ||
       flags.core.lost_worker_retention_seconds < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lost-worker-retention-seconds must be a number >= 0, got \"",
        retention, "\""));
  }
  if (!calibration_timeout.empty() &&
      (!absl::SimpleAtod(calibration_timeout, &flags.core.calibration_timeout_seconds) ||
       !std::isfinite(flags.core.calibration_timeout_seconds) ||
       flags.core.calibration_timeout_seconds <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--calibration-timeout-seconds must be a number > 0, got \"", calibration_timeout,
        "\""));
  }
  for (const auto& [flag, text, value, least] :
       {std::tuple{"--max-submissions-per-second", &submission_rate,
                   &flags.core.max_submissions_per_second, 0.0},
        std::tuple{"--submission-burst", &submission_burst, &flags.core.submission_burst, 1.0}}) {
    if (!text->empty() && (!absl::SimpleAtod(*text, value) || !std::isfinite(*value) ||
                           *value < least || *value == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " must be a number ", least > 0 ? ">= 1" : "> 0", ", got \"", *text, "\""));
    }
  }
  if (!drain.empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(drain, &seconds) || !std::isfinite(seconds) ||
        seconds < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--store-drain-seconds must be a number >= 0, got \"", drain, "\""));
    }
    flags.core.store_drain_timeout = absl::Seconds(seconds);
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

int Main(int argc, char** argv) {
  absl::StatusOr<CoordinatorServer::Options> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    Logf("%s; %s", flags.status().message(), kUsage);
    return 2;
  }
  const sigset_t signals = BlockTerminationSignals();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(*std::move(flags));
  if (!server.ok()) {
    LogLine(server.status().message());
    return 1;
  }
  std::printf("zbpp-coordinator listening grpc=%s metrics=%s\n",
              (*server)->address().c_str(), (*server)->metrics_address().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  (*server)->Shutdown();
  (*server)->Wait();
  return 0;
}

}  // namespace
}  // namespace zbpp::coordinator

int main(int argc, char** argv) { return zbpp::coordinator::Main(argc, argv); }
