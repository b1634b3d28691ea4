#ifndef ZBPP_WORKER_RUNTIME_DEVICE_H_
#define ZBPP_WORKER_RUNTIME_DEVICE_H_

#include <cstdint>
#include <string>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"

namespace zbpp::worker {

/// The device of a worker's `--device` flag: "cpu" or "cuda:N" (N >= 0).
/// InvalidArgument for any other spelling; FailedPrecondition, in one line,
/// when CUDA device N is not there (no GPU or no driver on this machine, N
/// beyond the devices LibTorch sees, or a binary without CUDA support).
/// Thread-safe.
absl::StatusOr<c10::Device> ParseDevice(const std::string& text);

/// Waits until the work queued on `device` has run (a CUDA device
/// synchronisation); returns at once on the CPU, whose work is never queued.
/// Pass times are taken after it, so that they are device times.
void SynchronizeDevice(const c10::Device& device);

/// The memory a worker on `device` offers a job, bytes (what it reports as
/// WorkerDescription.memory_bytes unless --memory-bytes says otherwise):
/// a CUDA device's total memory (at::accelerator::getMemoryInfo), or, for
/// the CPU, the host's RAM divided by its online cores (one worker per
/// core). Thread-safe.
uint64_t DeviceMemoryBytes(const c10::Device& device);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_DEVICE_H_
