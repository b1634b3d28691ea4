#include "worker/runtime/memory_meter.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <utility>

#include <ATen/DeviceAccelerator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace memory_meter_internal {

struct Counter : std::enable_shared_from_this<Counter> {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};

  void Add(int64_t bytes) {
    const int64_t now = current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void Sub(int64_t bytes) { current.fetch_sub(bytes, std::memory_order_relaxed); }
};

}  // namespace memory_meter_internal

namespace {

using memory_meter_internal::Counter;

// The meter of the allocations made on this thread (MemoryMeterScope). A
// raw pointer: trivially destructible, so an allocation while the thread
// exits still reads it safely; the scope keeps the counter alive.
thread_local Counter* current_counter = nullptr;

// What sits in front of every block the counting allocator hands out: the
// meter it counts towards (none when no meter was current) and the bytes
// counted. One alignment unit, so the tensor's data keeps the alignment
// LibTorch's CPU allocator gives it.
struct Header {
  std::shared_ptr<Counter> counter;
  int64_t bytes = 0;
};
constexpr size_t kHeaderBytes = c10::gAlignment;
static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit in front of the data");

// Wraps the CPU allocator in place at installation. Every DataPtr it makes
// has its data as its context and one deleter (Delete), as LibTorch's own
// CPU allocator's do: raw_allocate / raw_deallocate, copy-on-write storage
// and clone keep working. The block is the inner allocator's, `kHeaderBytes`
// longer.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner)
      : inner_(inner), inner_delete_(inner->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr block = inner_->allocate(n + kHeaderBytes);
    void* base = block.release_context();
    auto* header = new (base) Header();
    if (Counter* counter = current_counter; counter != nullptr) {
      header->counter = counter->shared_from_this();
      header->bytes = static_cast<int64_t>(n);
      counter->Add(header->bytes);
    }
    void* data = static_cast<char*>(base) + kHeaderBytes;
    return {data, data, &Delete, c10::Device(c10::kCPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static void Delete(void* data);

  c10::Allocator* const inner_;
  const c10::DeleterFnPtr inner_delete_;
};

// The installed allocator; lives as long as the process (a tensor anywhere
// may still need its deleter).
CountingCpuAllocator* counting_allocator = nullptr;

void CountingCpuAllocator::Delete(void* data) {
  void* base = static_cast<char*>(data) - kHeaderBytes;
  auto* header = static_cast<Header*>(base);
  if (header->counter != nullptr) header->counter->Sub(header->bytes);
  header->~Header();
  counting_allocator->inner_delete_(base);
}

// Above the default registration's 0: the counting allocator stays in place.
constexpr uint8_t kCountingPriority = 100;

// Before main, while the process has one thread.
const bool installed_at_start = InstallCountingCpuAllocator().ok();

}  // namespace

absl::Status InstallCountingCpuAllocator() {
  static const absl::Status* const status = [] {
    c10::Allocator* inner = c10::GetCPUAllocator();
    if (inner->raw_deleter() == nullptr) {
      return new absl::Status(absl::FailedPreconditionError(
          "LibTorch's CPU allocator has no raw deleter: its tensors cannot be counted"));
    }
    counting_allocator = new CountingCpuAllocator(inner);
    c10::SetCPUAllocator(counting_allocator, kCountingPriority);
    if (c10::GetCPUAllocator() != counting_allocator) {
      return new absl::Status(absl::FailedPreconditionError(
          "another CPU allocator of higher priority is in place: tensors cannot be counted"));
    }
    return new absl::Status();
  }();
  (void)installed_at_start;
  return *status;
}

MemoryMeter::MemoryMeter() : counter_(std::make_shared<memory_meter_internal::Counter>()) {}

int64_t MemoryMeter::current_bytes() const {
  return counter_->current.load(std::memory_order_relaxed);
}

int64_t MemoryMeter::peak_bytes() const { return counter_->peak.load(std::memory_order_relaxed); }

void MemoryMeter::ResetPeak() {
  counter_->peak.store(counter_->current.load(std::memory_order_relaxed),
                       std::memory_order_relaxed);
}

MemoryMeterScope::MemoryMeterScope(const MemoryMeter* meter) : previous_(current_counter) {
  // The allocator was installed before main (installed_at_start); where
  // that failed, the cached failure makes the scope count nothing.
  if (meter != nullptr && InstallCountingCpuAllocator().ok()) {
    current_counter = meter->counter_.get();
  } else {
    current_counter = nullptr;
  }
}

MemoryMeterScope::~MemoryMeterScope() { current_counter = previous_; }

DeviceMemoryMeter::DeviceMemoryMeter(c10::Device device) : device_(device) {}

namespace {

// The CUDA caching allocator's allocated bytes of `device` (all pools).
c10::CachingAllocator::Stat AllocatedBytes(const c10::Device& device) {
  return at::accelerator::getDeviceStats(device.index())
      .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}

}  // namespace

int64_t DeviceMemoryMeter::current_bytes() const {
  return device_.is_cuda() ? AllocatedBytes(device_).current : cpu_.current_bytes();
}

int64_t DeviceMemoryMeter::peak_bytes() const {
  return device_.is_cuda() ? AllocatedBytes(device_).peak : cpu_.peak_bytes();
}

void DeviceMemoryMeter::ResetPeak() {
  if (device_.is_cuda()) {
    at::accelerator::resetPeakStats(device_.index());
  } else {
    cpu_.ResetPeak();
  }
}

}  // namespace zbpp::worker
