#ifndef ZBPP_METRICS_METRICS_SERVER_H_
#define ZBPP_METRICS_METRICS_SERVER_H_

#include <netinet/in.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

class CivetServer;

namespace zbpp::metrics {

/// One HTTP reply of a `MetricsServer::Options::page_handler`.
struct HttpResponse {
  /// HTTP status code: 200, 404, ...
  int status = 200;
  /// The Content-Type header.
  std::string content_type = "text/html; charset=utf-8";
  /// The body, sent as is.
  std::string body;
};

/// The coordinator's HTTP port: serves a `prometheus::Registry` in
/// Prometheus' text format (0.0.4) at `kPath` (`/metrics`), and every other
/// GET path through an optional page handler (the coordinator's schedule
/// page, coordinator/service/schedule_page.h), so that the HTTP code stays
/// out of the core.
///
/// Built on civetweb (Debian's libcivetweb, the server prometheus-cpp's own
/// `Exposer` wraps): the Exposer cannot serve other paths. Keep it out of
/// processes that load LibTorch: civetweb's fixed thread stack cannot hold
/// their static TLS (shared/TOOLCHAIN.md).
///
/// Thread-safety: const methods may be called from any thread; requests are
/// served by the server's own threads (the page handler may be called from
/// several at once) until it is destroyed.
class MetricsServer {
 public:
  struct Options {
    /// "HOST:PORT" to listen on, HOST an IPv4 address or a host name
    /// ("127.0.0.1", "0.0.0.0", "localhost"); PORT 0 picks a free port
    /// (see `address()`).
    std::string listen_address = "127.0.0.1:0";
    /// HTTP threads that serve requests; >= 1. A thread is held by each open
    /// connection until its request arrives, and browsers open several
    /// connections ahead of their requests: one tab on the schedule page
    /// could hold two threads and stall Prometheus' scrapes.
    int num_threads = 8;
    /// A connection that sends no complete request within this time is
    /// closed, freeing its thread (civetweb's request_timeout_ms); > 0.
    double request_timeout_seconds = 5;
    /// Answers a GET of any path other than `kPath` (the path without the
    /// query string); thread-safe. Null: 404 for every other path.
    std::function<HttpResponse(const std::string& path)> page_handler;
  };

  /// The path the registry is served at.
  static constexpr char kPath[] = "/metrics";

  /// Starts serving `registry` (shared: the server keeps it alive).
  /// InvalidArgument for a null registry, a listen address that is not
  /// HOST:PORT with PORT in [0, 65535], num_threads < 1 or
  /// request_timeout_seconds <= 0; Unavailable,
  /// naming the address, when the server cannot listen there (port in use,
  /// address not local, host that does not resolve, ...).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(
      Options options, std::shared_ptr<prometheus::Registry> registry);

  /// Stops serving; waits for requests in progress (not for civetweb's
  /// listener to notice the stop on its own, which takes up to 2 s).
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The bound address, "HOST:PORT" with HOST as given and the real port
  /// (never 0).
  const std::string& address() const { return address_; }
  /// The bound port, in [1, 65535].
  int port() const { return port_; }

 private:
  class Handler;  // civetweb's callback; defined in the .cc

  MetricsServer(std::shared_ptr<prometheus::Registry> registry,
                std::function<HttpResponse(const std::string&)> page_handler);

  // Declared before the server, so destroyed after it: no request outlives
  // what it reads.
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::function<HttpResponse(const std::string&)> page_handler_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<CivetServer> server_;
  std::string address_;
  int port_ = 0;
  // Where a connection reaches the listener: the host resolved as civetweb
  // resolves it, the loopback address for a wildcard host.
  sockaddr_in wake_address_{};
};

}  // namespace zbpp::metrics

#endif  // ZBPP_METRICS_METRICS_SERVER_H_
