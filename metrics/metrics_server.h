#ifndef ZBPP_METRICS_METRICS_SERVER_H_
#define ZBPP_METRICS_METRICS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "metrics/connection_caps.h"
#include "prometheus/registry.h"

struct MHD_Connection;
struct MHD_Daemon;

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
/// Built on GNU libmicrohttpd (Debian's libmicrohttpd), event-driven: each
/// of `num_threads` threads polls many connections (epoll), so a client that
/// opens connections and sends its request slowly, or never, holds no
/// thread, and a scrape is answered while such clients wait. Connections are
/// capped in all and per client address, and closed after
/// `idle_timeout_seconds` without traffic; past a cap, the oldest
/// connection that is not inside a request is closed to let the new one
/// in (ConnectionCaps), so idle connections, however many and from
/// whichever address, never lock a scrape out.
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
    /// Threads that poll the connections and answer requests; >= 1. A
    /// request is answered by the thread polling its connection while it
    /// renders the reply; a slow client costs no thread.
    int num_threads = 4;
    /// A connection with no traffic for this long is closed; >= 1 s
    /// (libmicrohttpd's MHD_OPTION_CONNECTION_TIMEOUT, whole seconds).
    int idle_timeout_seconds = 10;
    /// Open connections at most, in all; >= 1. A connection past the cap
    /// closes the oldest idle connection (one not inside a request), or is
    /// closed itself as soon as it is accepted when every connection is
    /// inside a request.
    int max_connections = 512;
    /// Open connections at most from one client address; >= 1, at most
    /// max_connections. Past it, as past max_connections, among that
    /// address's connections only. Prometheus keeps one per scrape target;
    /// browsers on the schedule page keep a few.
    int max_connections_per_client = 64;
    /// Answers a GET of any path other than `kPath` (the path without the
    /// query string); thread-safe. Null: 404 for every other path.
    std::function<HttpResponse(const std::string& path)> page_handler;
  };

  /// The path the registry is served at.
  static constexpr char kPath[] = "/metrics";

  /// Starts serving `registry` (shared: the server keeps it alive).
  /// InvalidArgument, naming the option, for a null registry, a listen
  /// address that is not HOST:PORT with PORT in [0, 65535], or a count or
  /// timeout out of its range; Unavailable, naming the address and the
  /// reason, when the server cannot listen there (port in use, address not
  /// local, host that does not resolve, ...).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(
      Options options, std::shared_ptr<prometheus::Registry> registry);

  /// Stops serving: closes the listener and every connection, after the
  /// requests being answered.
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The bound address, "HOST:PORT" with HOST as given and the real port
  /// (never 0).
  const std::string& address() const { return address_; }
  /// The bound port, in [1, 65535].
  int port() const { return port_; }

 private:
  MetricsServer(std::shared_ptr<prometheus::Registry> registry,
                std::function<HttpResponse(const std::string&)> page_handler,
                int max_connections, int max_connections_per_client);

  // libmicrohttpd's connection callback (`code` an
  // MHD_ConnectionNotificationCode): counts a started connection in
  // `caps_` and shuts down the one it says to close; forgets a closed one.
  void OnConnection(MHD_Connection* connection, void** socket_context, int code);

  // The reply to a GET or HEAD of `path`.
  HttpResponse Answer(const std::string& path) const;

  // Declared before the daemon, whose threads read them.
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::function<HttpResponse(const std::string&)> page_handler_;
  // libmicrohttpd's last error line (the reason of a failed start).
  absl::Mutex log_mutex_;
  std::string last_error_ ABSL_GUARDED_BY(log_mutex_);
  ConnectionCaps caps_;
  // Ids of started connections (OnConnection's, from 1) and their sockets.
  std::atomic<uint64_t> next_id_{0};
  absl::Mutex sockets_mutex_;
  absl::flat_hash_map<uint64_t, int> sockets_ ABSL_GUARDED_BY(sockets_mutex_);
  MHD_Daemon* daemon_ = nullptr;
  std::string address_;
  int port_ = 0;
};

}  // namespace zbpp::metrics

#endif  // ZBPP_METRICS_METRICS_SERVER_H_
