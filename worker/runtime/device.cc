#include "worker/runtime/device.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

void KeepFreedHostMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

void SynchronizeDevice(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::impl::getDeviceGuardImpl(device.type())->synchronizeDevice(device.index());
}

namespace {

// An event that can be timed, recorded now on `device`'s current stream.
std::unique_ptr<c10::Event> RecordEvent(const c10::Device& device) {
  auto event = std::make_unique<c10::Event>(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  event->record(c10::impl::getDeviceGuardImpl(device.type())->getStream(device));
  return event;
}

}  // namespace

PassTimer::PassTimer(const c10::Device& device, std::chrono::steady_clock::time_point step_start,
                     size_t actions)
    : device_(device), step_start_(step_start) {
  if (device_.is_cpu()) {
    host_begin_.assign(actions, std::numeric_limits<double>::quiet_NaN());
    host_end_.assign(actions, std::numeric_limits<double>::quiet_NaN());
    return;
  }
  begin_.resize(actions);
  end_.resize(actions);
  // On an idle device the reference event is reached as it is recorded.
  SynchronizeDevice(device_);
  reference_ = RecordEvent(device_);
  reference_->synchronize();
  reference_seconds_ = HostSeconds();
}

double PassTimer::HostSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count();
}

void PassTimer::Mark(size_t j, std::vector<double>& host,
                     std::vector<std::unique_ptr<c10::Event>>& events) {
  if (device_.is_cpu()) {
    host[j] = HostSeconds();
  } else {
    events[j] = RecordEvent(device_);
  }
}

void PassTimer::Begin(size_t j) { Mark(j, host_begin_, begin_); }

void PassTimer::End(size_t j) { Mark(j, host_end_, end_); }

double PassTimer::Duration(size_t j) {
  if (device_.is_cpu()) return host_end_[j] - host_begin_[j];
  end_[j]->synchronize();
  return begin_[j]->elapsedTime(*end_[j]) / 1e3;
}

void PassTimer::Resolve(std::vector<double>& starts, std::vector<double>& ends) {
  if (device_.is_cpu()) {
    const size_t n = std::min(starts.size(), host_begin_.size());
    for (size_t j = 0; j < n; ++j) {
      if (std::isnan(host_begin_[j]) || std::isnan(host_end_[j])) continue;
      starts[j] = host_begin_[j];
      ends[j] = host_end_[j];
    }
    return;
  }
  SynchronizeDevice(device_);
  const size_t n = std::min(starts.size(), begin_.size());
  for (size_t j = 0; j < n; ++j) {
    if (begin_[j] == nullptr || end_[j] == nullptr) continue;
    starts[j] = reference_seconds_ + reference_->elapsedTime(*begin_[j]) / 1e3;
    ends[j] = reference_seconds_ + reference_->elapsedTime(*end_[j]) / 1e3;
  }
}

}  // namespace zbpp::worker
