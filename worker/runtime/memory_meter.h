#ifndef ZBPP_WORKER_RUNTIME_MEMORY_METER_H_
#define ZBPP_WORKER_RUNTIME_MEMORY_METER_H_

#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

#include "absl/status/status.h"

namespace zbpp::worker {

namespace memory_meter_internal {
struct Counter;
}  // namespace memory_meter_internal

/// Bytes held by CPU tensors, counted exactly: the tensors allocated on a
/// thread while this meter is current there (MemoryMeterScope), from their
/// allocation until their storage is freed — on whichever thread frees it.
/// Each allocation counts the bytes its storage asked for (a tensor's
/// nbytes() for a fresh contiguous tensor); allocations made with no meter
/// current are not counted by any meter, and their frees neither.
///
/// How: a counting c10::Allocator installed once over LibTorch's CPU
/// allocator (InstallCountingCpuAllocator) remembers, in a header in front
/// of each block, the meter current at allocation (shared ownership: a
/// tensor may outlive its meter) and the size. Several workers as threads of
/// one process (the worker tests) therefore each count their own tensors.
/// Memory that is not a tensor's (BLAS workspaces, oneDNN scratch, the
/// allocator's own headers) is not counted, nor the tensors LibTorch's
/// intra-op worker threads allocate inside a parallel kernel (transient
/// per-thread buffers; none with one intra-op thread, the worker's default).
/// A tensor allocated without a meter and freed under one counts nothing.
///
/// Thread-safe (atomics). Copying shares the counts.
class MemoryMeter {
 public:
  MemoryMeter();

  /// Bytes of the tensors counted by this meter still held now.
  int64_t current_bytes() const;
  /// The largest current_bytes() since the meter was made or ResetPeak.
  int64_t peak_bytes() const;
  /// Starts a new peak at current_bytes(). Allocations racing with the
  /// reset may or may not raise the new peak.
  void ResetPeak();

 private:
  friend class MemoryMeterScope;
  std::shared_ptr<memory_meter_internal::Counter> counter_;
};

/// Makes `meter` the current meter of this thread while the scope lives
/// (null: no meter, nothing counted); scopes nest, the innermost wins and
/// the previous meter is current again at the end. The meter must outlive
/// the scope. Not copyable; per thread.
class MemoryMeterScope {
 public:
  explicit MemoryMeterScope(const MemoryMeter* meter);
  ~MemoryMeterScope();
  MemoryMeterScope(const MemoryMeterScope&) = delete;
  MemoryMeterScope& operator=(const MemoryMeterScope&) = delete;

 private:
  memory_meter_internal::Counter* previous_;
};

/// Installs the counting allocator over LibTorch's current CPU allocator
/// (c10::SetCPUAllocator), once per process; later calls return the first
/// call's result. The binaries linking this library install it before main
/// (a static initialiser), so no tensor races the switch; tensors
/// allocated earlier keep their own deleters. FailedPrecondition when the
/// CPU allocator in place has no raw deleter (its blocks cannot carry a
/// header) or another allocator of higher priority stays in place.
/// Thread-safe.
absl::Status InstallCountingCpuAllocator();

/// Activation memory on a worker's device, one interface for both kinds:
///
/// * CPU: a MemoryMeter, counting what the threads that made cpu_meter()
///   current allocate (the pass runner opens a MemoryMeterScope).
/// * CUDA: the caching allocator's allocated bytes of the device, current
///   and peak (at::accelerator::getDeviceStats / resetPeakStats): every
///   tensor on that device, whoever made it. Ranks that share one GPU (the
///   tests' several NCCL workers on one device) therefore see each other's
///   tensors mixed into theirs.
///
/// Either way only differences are meaningful: a peak above the bytes held
/// at a window's start (ResetPeak, then current_bytes()). Thread-safe on
/// the CPU; on CUDA the device's counters are shared by the process.
class DeviceMemoryMeter {
 public:
  explicit DeviceMemoryMeter(c10::Device device);

  int64_t current_bytes() const;
  /// The largest current_bytes() since the last ResetPeak (or the start).
  int64_t peak_bytes() const;
  void ResetPeak();
  /// The meter to make current on the threads running passes; null on a
  /// CUDA device (whose counters need no scope).
  const MemoryMeter* cpu_meter() const { return device_.is_cpu() ? &cpu_ : nullptr; }

 private:
  c10::Device device_;
  MemoryMeter cpu_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_MEMORY_METER_H_
