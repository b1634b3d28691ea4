#ifndef ZBPP_METRICS_METRICS_SERVER_H_
#define ZBPP_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace zbpp::metrics {

/// The coordinator's HTTP scrape target: serves a `prometheus::Registry` in
/// Prometheus' text format at `kPath` (`/metrics`), together with
/// prometheus-cpp's own `exposer_*` families, on its own port (issue 3 §2).
///
/// Wraps prometheus-cpp's `Exposer` (civetweb). Keep it out of processes that
/// load LibTorch: civetweb's fixed thread stack cannot hold their static TLS
/// (shared/TOOLCHAIN.md).
///
/// Thread-safety: const methods may be called from any thread; scrapes are
/// served by the server's own threads until it is destroyed.
class MetricsServer {
 public:
  struct Options {
    /// "HOST:PORT" to listen on, HOST an IPv4 address or a host name
    /// ("127.0.0.1", "0.0.0.0", "localhost"); PORT 0 picks a free port
    /// (see `address()`).
    std::string listen_address = "127.0.0.1:0";
    /// HTTP threads that serve scrapes; >= 1.
    int num_threads = 2;
  };

  /// The path the registry is served at.
  static constexpr char kPath[] = "/metrics";

  /// Starts serving `registry` (shared: the server keeps it alive).
  /// InvalidArgument for a null registry, a listen address that is not
  /// HOST:PORT with PORT in [0, 65535], or num_threads < 1; Unavailable,
  /// naming the address, when the server cannot listen there (port in use,
  /// address not local, ...).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(
      Options options, std::shared_ptr<prometheus::Registry> registry);

  /// Stops serving; waits for scrapes in progress. Once a scrape has been
  /// served this takes about 2 s (measured: civetweb's shutdown waits for
  /// its listener thread's poll to time out).
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The bound address, "HOST:PORT" with HOST as given and the real port
  /// (never 0).
  const std::string& address() const { return address_; }
  /// The bound port, in [1, 65535].
  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::shared_ptr<prometheus::Registry> registry,
                std::string address, int port);

  // Declared before the exposer, so destroyed after it: no scrape outlives
  // the registry it reads.
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
  int port_;
};

}  // namespace zbpp::metrics

#endif  // ZBPP_METRICS_METRICS_SERVER_H_
