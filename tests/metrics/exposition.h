#ifndef ZBPP_TESTS_METRICS_EXPOSITION_H_
#define ZBPP_TESTS_METRICS_EXPOSITION_H_

// Test helpers: render a registry in the text format, fetch /metrics over a
// plain TCP socket, and find one sample in an exposition.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace zbpp::metrics::testing {

/// The registry in Prometheus' text format, as the Exposer would write it.
inline std::string Serialize(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

/// A TCP connection to 127.0.0.1:`port` from the local address `from` (an
/// IPv4 address of the loopback network: Linux routes all of 127.0.0.0/8
/// to the loopback device, so a test can be several clients): its file
/// descriptor, which the caller closes.
inline absl::StatusOr<int> Connect(int port, const char* from = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(std::strerror(errno));
  sockaddr_in source{};
  source.sin_family = AF_INET;
  if (::inet_pton(AF_INET, from, &source.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return absl::InternalError(absl::StrCat("bind to ", from, ": ", error));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect: ", error));
  }
  return fd;
}

/// HTTP/1.0 GET of `path` from 127.0.0.1:`port` (the server closes the
/// connection after the reply), on a connection from 127.0.0.1. Returns the
/// status line and the body.
struct HttpReply {
  std::string status_line;
  std::string body;
};
inline absl::StatusOr<HttpReply> HttpGet(int port, const std::string& path) {
  absl::StatusOr<int> connected = Connect(port);
  if (!connected.ok()) return connected.status();
  const int fd = *connected;
  const std::string request = absl::StrCat(
      "GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent,
                             MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return absl::UnavailableError("send failed");
    }
    sent += static_cast<size_t>(n);
  }
  std::string reply;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) {
    reply.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t header_end = reply.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no HTTP header in: ", reply));
  }
  return HttpReply{reply.substr(0, reply.find("\r\n")),
                   reply.substr(header_end + 4)};
}

using LabelSet = std::map<std::string, std::string>;

/// The value of the sample `name` with exactly `labels` in `text`, or
/// nullopt when there is none. Label values must not contain ',' or '"'.
inline std::optional<double> FindSample(const std::string& text,
                                        const std::string& name,
                                        const LabelSet& labels) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    std::string series = line.substr(0, space);
    LabelSet found;
    std::string series_name = series;
    if (const size_t brace = series.find('{'); brace != std::string::npos) {
      series_name = series.substr(0, brace);
      std::string rest = series.substr(brace + 1);
      if (!rest.empty() && rest.back() == '}') rest.pop_back();
      std::istringstream pairs(rest);
      for (std::string pair; std::getline(pairs, pair, ',');) {
        const size_t eq = pair.find('=');
        if (eq == std::string::npos || pair.size() < eq + 3) continue;
        found[pair.substr(0, eq)] = pair.substr(eq + 2, pair.size() - eq - 3);
      }
    }
    if (series_name != name || found != labels) continue;
    double value = 0;
    if (!absl::SimpleAtod(line.substr(space + 1), &value)) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

}  // namespace zbpp::metrics::testing

#endif  // ZBPP_TESTS_METRICS_EXPOSITION_H_
