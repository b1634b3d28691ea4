#include "metrics/metrics_server.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <civetweb.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "prometheus/text_serializer.h"

namespace zbpp::metrics {
namespace {

// The address (port 0) that reaches a listener on `host`, resolved as
// civetweb resolves a listening host (Debian builds it without IPv6): IPv4,
// names through getaddrinfo, the first address found. A wildcard host
// listens on the loopback address too.
absl::StatusOr<sockaddr_in> ListenerAddress(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); error != 0) {
    return absl::UnavailableError(absl::StrCat("host \"", host, "\" does not resolve: ",
                                               ::gai_strerror(error)));
  }
  sockaddr_in address{};
  std::memcpy(&address, found->ai_addr, sizeof(address));
  ::freeaddrinfo(found);
  if (address.sin_addr.s_addr == htonl(INADDR_ANY)) {
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  return address;
}

// Opens a connection to `address` and closes it. False when it is refused:
// nothing listens there any more.
bool Knock(const sockaddr_in& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A full accept queue drops the SYN and connect would retry it for
  // seconds; give up on this knock instead.
  const timeval timeout{0, 100'000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  const bool refused =
      ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 &&
      errno == ECONNREFUSED;
  ::close(fd);
  return !refused;
}

}  // namespace

// One handler for every path: civetweb gives a handler registered at "/"
// every URI that no longer registration matches, so /metrics and the pages
// are told apart here, in one place.
class MetricsServer::Handler : public CivetHandler {
 public:
  explicit Handler(const MetricsServer* server) : server_(server) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    const mg_request_info* request = mg_get_request_info(conn);
    const std::string path = request->local_uri != nullptr ? request->local_uri : "/";
    HttpResponse response;
    if (path == kPath) {
      response.content_type = "text/plain; version=0.0.4; charset=utf-8";
      response.body = prometheus::TextSerializer().Serialize(server_->registry_->Collect());
    } else if (server_->page_handler_) {
      try {
        response = server_->page_handler_(path);
      } catch (const std::exception& e) {
        response = {500, "text/plain; charset=utf-8", absl::StrCat("error: ", e.what(), "\n")};
      }
    } else {
      response = {404, "text/plain; charset=utf-8", absl::StrCat("no page at ", path, "\n")};
    }
    Send(conn, response);
    return true;
  }

  bool handleHead(CivetServer* server, mg_connection* conn) override {
    return handleGet(server, conn);
  }

 private:
  static void Send(mg_connection* conn, const HttpResponse& response) {
    const std::string head = absl::StrCat(
        "HTTP/1.1 ", response.status, " ",
        mg_get_response_code_text(conn, response.status), "\r\nContent-Type: ",
        response.content_type, "\r\nContent-Length: ", response.body.size(),
        "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
    mg_write(conn, head.data(), head.size());
    if (std::string(mg_get_request_info(conn)->request_method) != "HEAD") {
      mg_write(conn, response.body.data(), response.body.size());
    }
  }

  const MetricsServer* const server_;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(
    Options options, std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("registry is null");
  }
  if (!(options.request_timeout_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request_timeout_seconds must be > 0, got ", options.request_timeout_seconds));
  }
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 1, got ", options.num_threads));
  }
  // civetweb reads "PORT", "HOST:PORT" and suffixes such as "8080s" (TLS) or
  // "8080r" (redirect); accept only HOST:PORT so that the flag means one
  // thing and the bound address can be reported back in the same form.
  const std::string& listen = options.listen_address;
  const size_t colon = listen.rfind(':');
  int requested_port = -1;
  if (colon == std::string::npos || colon == 0 ||
      listen.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &requested_port) ||
      requested_port < 0 || requested_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics listen address \"", listen,
        "\" is not HOST:PORT with PORT in [0, 65535]"));
  }
  const std::string host = listen.substr(0, colon);
  absl::StatusOr<sockaddr_in> listener = ListenerAddress(host);
  if (!listener.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", listener.status().message()));
  }

  auto server = std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(registry), std::move(options.page_handler)));
  server->wake_address_ = *listener;  // Port 0 until the listener's is known.
  server->handler_ = std::make_unique<Handler>(server.get());
  std::vector<int> ports;
  try {
    server->server_ = std::make_unique<CivetServer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads", std::to_string(options.num_threads),
        "request_timeout_ms",
        std::to_string(static_cast<int64_t>(options.request_timeout_seconds * 1000))});
    server->server_->addHandler("/", server->handler_.get());
    ports = server->server_->getListeningPorts();
  } catch (const std::exception& e) {
    // CivetException ("null context when constructing CivetServer") says
    // little; the address is what the operator needs.
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", listen, ": ", e.what()));
  }
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", listen, ": no listening port reported"));
  }
  server->port_ = ports.front();
  server->address_ = absl::StrCat(host, ":", server->port_);
  server->wake_address_.sin_port = htons(static_cast<uint16_t>(server->port_));
  return server;
}

MetricsServer::MetricsServer(
    std::shared_ptr<prometheus::Registry> registry,
    std::function<HttpResponse(const std::string&)> page_handler)
    : registry_(std::move(registry)), page_handler_(std::move(page_handler)) {}

MetricsServer::~MetricsServer() {
  // civetweb's listener thread polls the listening socket in rounds of 2 s
  // (SOCKET_TIMEOUT_QUANTUM) and reads the stop flag only between rounds;
  // mg_stop sets the flag, then waits for the listener. A connection ends
  // the round: made before the flag is set, it is accepted and served as an
  // empty request; made after, the listener stops without accepting it and
  // closes its socket, which refuses the next one. So knock until then.
  // After a failed Create the knock goes to port 0 and is refused.
  absl::Notification stopped;
  std::thread waker([this, &stopped] {
    while (Knock(wake_address_) &&
           !stopped.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
    }
  });
  // Stop the server (joining its threads) before the handler goes.
  server_.reset();
  stopped.Notify();
  waker.join();
}

}  // namespace zbpp::metrics
