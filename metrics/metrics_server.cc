#include "metrics/metrics_server.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace zbpp::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(
    Options options, std::shared_ptr<prometheus::Registry> registry) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("registry is null");
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
      !absl::SimpleAtoi(listen.substr(colon + 1),
                        &requested_port) ||
      requested_port < 0 || requested_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics listen address \"", listen,
        "\" is not HOST:PORT with PORT in [0, 65535]"));
  }
  const std::string host = listen.substr(0, colon);

  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<int> ports;
  try {
    exposer = std::make_unique<prometheus::Exposer>(
        listen, static_cast<size_t>(options.num_threads));
    exposer->RegisterCollectable(registry, kPath);
    ports = exposer->GetListeningPorts();
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
  const int port = ports.front();
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(exposer), std::move(registry),
                        absl::StrCat(host, ":", port), port));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                             std::shared_ptr<prometheus::Registry> registry,
                             std::string address, int port)
    : registry_(std::move(registry)),
      exposer_(std::move(exposer)),
      address_(std::move(address)),
      port_(port) {}

MetricsServer::~MetricsServer() = default;

}  // namespace zbpp::metrics
