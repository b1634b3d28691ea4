#include "common/tls_hint.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace zbpp {
namespace {

// Whether `text` holds one of `needles` (lower case), ignoring case.
bool Mentions(const std::string& text, std::initializer_list<const char*> needles) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (const char* needle : needles) {
    if (lower.find(needle) != std::string::npos) return true;
  }
  return false;
}

// Whether something at `address` accepts a TCP connection within
// `timeout`; false too for an address this cannot parse or resolve.
bool AcceptsTcp(std::string address, absl::Duration timeout) {
  for (const std::string scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (address.compare(0, scheme.size(), scheme) == 0) {
      address.erase(0, scheme.size());
      break;
    }
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || address.find('/') != std::string::npos) {
    return false;  // unix:, a bare host, a path: not probed
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return false;
  bool accepted = false;
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd poll_fd{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof(error);
      accepted = ::poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1 &&
                 ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return accepted;
}

}  // namespace

std::string TlsMismatchHint(const std::string& address, bool tls, const std::string& grpc_error,
                            absl::Duration probe_timeout) {
  if (tls && Mentions(grpc_error, {"certificate_verify_failed", "certificate verify failed"})) {
    return "; TLS: the coordinator's certificate does not verify against --tls-ca (signed by "
           "another CA, or not naming this address): pass the CA that signed it";
  }
  if (tls && Mentions(grpc_error, {"wrong_version_number", "wrong version number"})) {
    return "; TLS: the coordinator answered in plaintext: it serves no TLS, drop --tls-ca";
  }
  if (Mentions(grpc_error, {"connection refused", "dns resolution failed", "name or service"}) ||
      !AcceptsTcp(address, probe_timeout)) {
    return "";
  }
  if (!tls) {
    return "; it accepts connections but not plaintext gRPC: the coordinator most likely "
           "serves TLS (pass --tls-ca with the CA that signed its certificate)";
  }
  return "; it accepts connections but the TLS handshake failed: the coordinator may serve "
         "plaintext (drop --tls-ca), or its certificate is signed by another CA than --tls-ca's "
         "or does not name this address";
}

}  // namespace zbpp
