#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/text_serializer.h"

namespace zbpp::metrics {
namespace {

// The IPv4 address to listen on for `host` (port 0): names through
// getaddrinfo, the first address found.
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
  return address;
}

// Queues `response` on `connection`; libmicrohttpd leaves a HEAD's body out.
MHD_Result Send(MHD_Connection* connection, const HttpResponse& response) {
  MHD_Response* reply = MHD_create_response_from_buffer(
      response.body.size(), const_cast<char*>(response.body.data()), MHD_RESPMEM_MUST_COPY);
  if (reply == nullptr) return MHD_NO;
  MHD_add_response_header(reply, MHD_HTTP_HEADER_CONTENT_TYPE, response.content_type.c_str());
  MHD_add_response_header(reply, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  const MHD_Result queued =
      MHD_queue_response(connection, static_cast<unsigned int>(response.status), reply);
  MHD_destroy_response(reply);
  return queued;
}

// The id OnConnection gave `connection` (0 when it gave none).
uint64_t ConnectionId(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info == nullptr ? 0 : reinterpret_cast<uintptr_t>(info->socket_context);
}

// The client's host, equal for every connection from one address (the
// port left out).
std::string ClientAddress(const sockaddr& address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address.sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text,
                sizeof(text));
  } else if (address.sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text,
                sizeof(text));
  }
  return text;
}

}  // namespace

HttpResponse MetricsServer::Answer(const std::string& path) const {
  if (path == kPath) {
    return {200, "text/plain; version=0.0.4; charset=utf-8",
            prometheus::TextSerializer().Serialize(registry_->Collect())};
  }
  if (!page_handler_) {
    return {404, "text/plain; charset=utf-8", absl::StrCat("no page at ", path, "\n")};
  }
  try {
    return page_handler_(path);
  } catch (const std::exception& e) {
    return {500, "text/plain; charset=utf-8", absl::StrCat("error: ", e.what(), "\n")};
  }
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(
    Options options, std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("registry is null");
  }
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 1, got ", options.num_threads));
  }
  if (options.idle_timeout_seconds < 1) {
    return absl::InvalidArgumentError(absl::StrCat("idle_timeout_seconds must be >= 1, got ",
                                                   options.idle_timeout_seconds));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_connections must be >= 1, got ", options.max_connections));
  }
  if (options.max_connections_per_client < 1 ||
      options.max_connections_per_client > options.max_connections) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_connections_per_client must be in [1, max_connections = ",
                     options.max_connections, "], got ", options.max_connections_per_client));
  }
  // Only HOST:PORT, so that the flag means one thing and the bound address
  // can be reported back in the same form.
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
  absl::StatusOr<sockaddr_in> address = ListenerAddress(host);
  if (!address.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", address.status().message()));
  }
  address->sin_port = htons(static_cast<uint16_t>(requested_port));

  auto server = std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(registry), std::move(options.page_handler),
                        options.max_connections, options.max_connections_per_client));
  // Every request is answered on its first call: GET and HEAD carry no body
  // to wait for; other methods are refused.
  MHD_AccessHandlerCallback on_request =
      [](void* self, MHD_Connection* connection, const char* url, const char* method,
         const char* /*version*/, const char* /*upload_data*/, size_t* /*upload_data_size*/,
         void** /*request_state*/) -> MHD_Result {
    auto* server = static_cast<MetricsServer*>(self);
    server->caps_.BeginRequest(ConnectionId(connection));
    const absl::string_view verb = method;
    if (verb != MHD_HTTP_METHOD_GET && verb != MHD_HTTP_METHOD_HEAD) {
      return Send(connection, {405, "text/plain; charset=utf-8", "only GET and HEAD\n"});
    }
    return Send(connection, server->Answer(url));
  };
  // libmicrohttpd's error log: the last line is the reason of a failed
  // start (e.g. "Failed to bind to port 9464: Address already in use").
  MHD_LogCallback keep_last_error = [](void* self, const char* format, va_list args) {
    char line[512];
    std::vsnprintf(line, sizeof(line), format, args);
    auto* server = static_cast<MetricsServer*>(self);
    absl::MutexLock lock(&server->log_mutex_);
    server->last_error_ = std::string(absl::StripTrailingAsciiWhitespace(line));
  };
  // Caps: ConnectionCaps decides, from the connection callbacks, which
  // connection to close past a cap (an idle one, rather than the newcomer).
  // libmicrohttpd's own limit stays as a backstop above them: it splits its
  // limit evenly over the pool's threads, so each thread's share is sized
  // to hold every connection, twice over for those closing after an
  // eviction.
  MHD_NotifyConnectionCallback on_connection = [](void* self, MHD_Connection* connection,
                                                  void** socket_context,
                                                  MHD_ConnectionNotificationCode code) {
    static_cast<MetricsServer*>(self)->OnConnection(connection, socket_context, code);
  };
  MHD_RequestCompletedCallback on_completed = [](void* self, MHD_Connection* connection,
                                                 void** /*request_state*/,
                                                 MHD_RequestTerminationCode /*code*/) {
    static_cast<MetricsServer*>(self)->caps_.EndRequest(ConnectionId(connection));
  };
  const unsigned int backstop =
      2u * static_cast<unsigned int>(options.max_connections) *
      static_cast<unsigned int>(options.num_threads);
  server->daemon_ = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, on_request,
      // The logger first: the options' own warnings (a pool of one thread
      // is no pool) go to it, not to stderr.
      server.get(), MHD_OPTION_EXTERNAL_LOGGER, keep_last_error, server.get(),
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr*>(&*address),
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned int>(options.num_threads),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned int>(options.idle_timeout_seconds),
      MHD_OPTION_CONNECTION_LIMIT, backstop, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
      server.get(), MHD_OPTION_NOTIFY_COMPLETED, on_completed, server.get(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    absl::MutexLock lock(&server->log_mutex_);
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", listen, ": ",
        server->last_error_.empty() ? "libmicrohttpd did not start" : server->last_error_));
  }
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  if (bound == nullptr || bound->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": no listening port reported"));
  }
  server->port_ = bound->port;
  server->address_ = absl::StrCat(host, ":", server->port_);
  return server;
}

MetricsServer::MetricsServer(
    std::shared_ptr<prometheus::Registry> registry,
    std::function<HttpResponse(const std::string&)> page_handler, int max_connections,
    int max_connections_per_client)
    : registry_(std::move(registry)),
      page_handler_(std::move(page_handler)),
      caps_(max_connections, max_connections_per_client) {}

void MetricsServer::OnConnection(MHD_Connection* connection, void** socket_context,
                                 int code) {
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    // Before libmicrohttpd closes the socket: a descriptor in `sockets_`
    // is never one the kernel gave to a later connection.
    const uint64_t id = reinterpret_cast<uintptr_t>(*socket_context);
    if (id == 0) return;  // Never started.
    caps_.Close(id);
    absl::MutexLock lock(&sockets_mutex_);
    sockets_.erase(id);
    return;
  }
  const MHD_ConnectionInfo* fd =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  const MHD_ConnectionInfo* peer =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (fd == nullptr || peer == nullptr || peer->client_addr == nullptr) return;
  const uint64_t id = next_id_.fetch_add(1) + 1;  // 0 marks "never started".
  *socket_context = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
  {
    absl::MutexLock lock(&sockets_mutex_);
    sockets_.emplace(id, fd->connect_fd);
  }
  const std::optional<uint64_t> close = caps_.Open(id, ClientAddress(*peer->client_addr));
  if (!close.has_value()) return;
  // Shut down, not closed: libmicrohttpd sees the end of the stream on its
  // next poll and closes the connection itself (CLOSED above, then close).
  absl::MutexLock lock(&sockets_mutex_);
  if (auto it = sockets_.find(*close); it != sockets_.end()) ::shutdown(it->second, SHUT_RDWR);
}

MetricsServer::~MetricsServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace zbpp::metrics
