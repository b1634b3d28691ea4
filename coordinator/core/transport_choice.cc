#include "coordinator/core/transport_choice.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace zbpp::coordinator {
namespace {

using zbpp::v1::Transport;

// What stands between a set of workers and NCCL: a worker without a GPU
// (or without a registered identity), or two workers sharing one.
struct Obstacle {
  std::string text;           // "worker-3 (stage 1) has no GPU (device cpu)".
  bool shared_gpu = false;    // Two workers share a GPU...
  bool test_setting = false;  // ... and both run the shared-GPU test setting.
};

class Places {
 public:
  explicit Places(const std::vector<PlacedWorker>& workers) {
    for (const PlacedWorker& w : workers) several_replicas_ |= w.replica > 0;
  }
  std::string operator()(const PlacedWorker& w) const {
    return absl::StrCat(w.worker_id, " (stage ", w.stage,
                        several_replicas_ ? absl::StrCat(", replica ", w.replica) : "", ")");
  }

 private:
  bool several_replicas_ = false;
};

// How a worker's device reads in a message: its name as registered, else
// its kind ("cpu").
std::string DeviceLabel(const zbpp::v1::WorkerDescription* d) {
  if (d == nullptr) return "unknown";
  if (!d->device_name().empty()) return d->device_name();
  std::string kind = zbpp::v1::DeviceKind_Name(d->device_kind());
  const std::string prefix = "DEVICE_KIND_";
  if (kind.rfind(prefix, 0) == 0) kind = kind.substr(prefix.size());
  return absl::AsciiStrToLower(kind);
}

// `text` as a hexadecimal number of at most `digits` digits, or -1.
long ParseHex(const std::string& text, size_t digits) {
  if (text.empty() || text.size() > digits || !absl::ascii_isxdigit(text[0])) return -1;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 16);
  return *end == '\0' ? value : -1;
}

}  // namespace

std::string GpuKey(const std::string& host, const std::string& identity) {
  // A UUID names one GPU (or MIG instance) anywhere: in Kubernetes the host
  // is the pod's name, and two pods time-sharing a GPU register two hosts
  // and one UUID.
  if (absl::StartsWithIgnoreCase(identity, "GPU-") ||
      absl::StartsWithIgnoreCase(identity, "MIG-")) {
    return absl::StrCat("uuid ", absl::AsciiStrToLower(identity));
  }
  // A PCI bus id names a device on its host, written variously: CUDA
  // "0000:1B:00.0", nvidia-smi "00000000:1B:00.0", sysfs lower case, or
  // without the domain.
  std::vector<std::string> parts = absl::StrSplit(identity, ':');
  if (parts.size() == 2) parts.insert(parts.begin(), "0");
  if (parts.size() == 3) {
    const std::vector<std::string> slot = absl::StrSplit(parts[2], '.');
    const long domain = ParseHex(parts[0], 8), bus = ParseHex(parts[1], 2);
    const long device = ParseHex(slot[0], 2);
    const long function = slot.size() == 2 ? ParseHex(slot[1], 1) : (slot.size() == 1 ? 0 : -1);
    if (domain >= 0 && bus >= 0 && device >= 0 && function >= 0) {
      return absl::StrFormat("pci %s %08x:%02x:%02x.%x", host, domain, bus, device, function);
    }
  }
  return absl::StrCat("other ", host, " ", identity);
}

namespace {

// Every obstacle, in worker-index order: what makes AUTO choose Gloo and
// NCCL refuse (unless each is a shared GPU under the test setting).
std::vector<Obstacle> Obstacles(const std::vector<PlacedWorker>& workers) {
  const Places place(workers);
  std::vector<Obstacle> obstacles;
  // GpuKey -> the first worker seen on that GPU.
  std::map<std::string, const PlacedWorker*> gpus;
  for (const PlacedWorker& w : workers) {
    const zbpp::v1::WorkerDescription* d = w.description;
    if (d == nullptr || d->device_kind() != zbpp::v1::DEVICE_KIND_CUDA) {
      obstacles.push_back(
          {absl::StrCat(place(w), " has no GPU (device ", DeviceLabel(d), ")")});
      continue;
    }
    if (d->device_identity().empty()) {
      obstacles.push_back({absl::StrCat(place(w), " registered no device identity (",
                                        DeviceLabel(d), ")")});
      continue;
    }
    auto [it, first] = gpus.emplace(GpuKey(d->host(), d->device_identity()), &w);
    if (first) continue;
    const PlacedWorker& other = *it->second;
    const std::string& other_host = other.description->host();
    obstacles.push_back({absl::StrCat(place(other), " and ", place(w), " share GPU ",
                                      d->device_identity(),
                                      other_host == d->host()
                                          ? absl::StrCat(" on host ", d->host())
                                          : absl::StrCat(" (hosts ", other_host, " and ",
                                                         d->host(), ")")),
                         true,
                         other.description->nccl_shared_gpu_test() && d->nccl_shared_gpu_test()});
  }
  return obstacles;
}

}  // namespace

bool JoinsNcclWorkers(const zbpp::v1::WorkerDescription& candidate,
                    const std::vector<const zbpp::v1::WorkerDescription*>& chosen) {
  if (candidate.device_kind() != zbpp::v1::DEVICE_KIND_CUDA ||
      candidate.device_identity().empty()) {
    return false;
  }
  return std::none_of(chosen.begin(), chosen.end(), [&](const zbpp::v1::WorkerDescription* d) {
    return GpuKey(d->host(), d->device_identity()) ==
               GpuKey(candidate.host(), candidate.device_identity()) &&
           !(d->nccl_shared_gpu_test() && candidate.nccl_shared_gpu_test());
  });
}

std::string TransportName(Transport transport) {
  std::string name = zbpp::v1::Transport_Name(transport);
  const std::string prefix = "TRANSPORT_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return name.empty() ? absl::StrCat(static_cast<int>(transport)) : name;
}

absl::StatusOr<TransportChoice> ChooseTransport(Transport requested,
                                                const std::vector<PlacedWorker>& workers) {
  switch (requested) {
    case zbpp::v1::TRANSPORT_GLOO:
      return TransportChoice{zbpp::v1::TRANSPORT_GLOO, "gloo: as the job spec asks"};
    case zbpp::v1::TRANSPORT_AUTO: {
      const std::vector<Obstacle> obstacles = Obstacles(workers);
      if (obstacles.empty()) {
        return TransportChoice{zbpp::v1::TRANSPORT_NCCL,
                               "auto: every worker has a GPU of its own"};
      }
      return TransportChoice{zbpp::v1::TRANSPORT_GLOO,
                             absl::StrCat("auto: ", obstacles.front().text)};
    }
    case zbpp::v1::TRANSPORT_NCCL: {
      bool test_setting = false;
      for (const Obstacle& obstacle : Obstacles(workers)) {
        if (obstacle.shared_gpu && obstacle.test_setting) {
          test_setting = true;
          continue;
        }
        return absl::InvalidArgumentError(absl::StrCat(
            "transport: nccl needs a GPU of its own for every worker; ", obstacle.text,
            obstacle.shared_gpu
                ? " (allowed only when every worker on it runs zbpp-worker "
                  "--nccl-shared-gpu-test-host-id, for tests)"
                : ""));
      }
      return TransportChoice{
          zbpp::v1::TRANSPORT_NCCL,
          test_setting ? "nccl: workers share GPUs under the NCCL shared-GPU test setting "
                         "(correct, not fast)"
                       : "nccl: every worker has a GPU of its own"};
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("transport: unknown transport ", static_cast<int>(requested)));
  }
}

}  // namespace zbpp::coordinator
