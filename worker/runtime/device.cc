#include "worker/runtime/device.h"

#include <unistd.h>

#include <algorithm>

#include <ATen/DeviceAccelerator.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

// CUDA devices LibTorch can use. Without a driver, c10 would warn on stderr
// while finding none: the caller reports it in its own words instead.
int CudaDeviceCount() {
  struct Silent : c10::WarningHandler {
    void process(const c10::Warning&) override {}
  } silent;
  c10::WarningUtils::WarningHandlerGuard guard(&silent);
  return at::detail::getCUDAHooks().deviceCount();
}

}  // namespace

absl::StatusOr<c10::Device> ParseDevice(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  int index = -1;
  if (!absl::StartsWith(text, "cuda:") || !absl::SimpleAtoi(text.substr(5), &index) ||
      index < 0 || index > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device must be cpu or cuda:N, got \"", text, "\""));
  }
  const int count = CudaDeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device ", text, ": no CUDA device here (LibTorch sees none: no GPU, no NVIDIA driver, "
        "or CUDA_VISIBLE_DEVICES hides them); use --device cpu"));
  }
  if (index >= count) {
    return absl::FailedPreconditionError(absl::StrCat("--device ", text, ": only ", count,
                                                      " CUDA devices here (cuda:0..cuda:",
                                                      count - 1, ")"));
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

uint64_t DeviceMemoryBytes(const c10::Device& device) {
  if (device.is_cuda()) {
    return at::accelerator::getMemoryInfo(device.index()).second;
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / cores;
}

void SynchronizeDevice(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
}

}  // namespace zbpp::worker
