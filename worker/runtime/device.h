#ifndef ZBPP_WORKER_RUNTIME_DEVICE_H_
#define ZBPP_WORKER_RUNTIME_DEVICE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include "absl/status/statusor.h"

namespace zbpp::worker {

/// The device of a worker's `--device` flag: "cpu" or "cuda:N" (N >= 0).
/// InvalidArgument for any other spelling; FailedPrecondition, in one line,
/// when CUDA device N is not there (no GPU or no driver on this machine, N
/// beyond the devices LibTorch sees, or a binary without CUDA support).
/// Thread-safe.
absl::StatusOr<c10::Device> ParseDevice(const std::string& text);

/// Keeps freed host memory in the process for the next pass, as the CUDA
/// caching allocator keeps device memory: buffers up to glibc's largest mmap
/// threshold (32 MiB) come from the heap, which is never trimmed; larger
/// ones are still mapped per allocation. Without it glibc maps buffers above
/// its adaptive threshold afresh and returns the heap's top to the system,
/// so passes pay page faults and zeroing for their largest buffers (an LM
/// head's logits, [b, s, vocab] float32) in proportions that vary from pass
/// to pass: the calibration profile's LM head then spreads over tens of per
/// cent (bench/results/calibration.md, "Host memory kept"). Call once at
/// start, before the passes allocate; the process's resident memory then
/// stays at its peak. glibc only (mallopt); not thread-safe against
/// concurrent allocation.
void KeepFreedHostMemory();

/// Waits until the work queued on `device` has run (a CUDA device
/// synchronisation); returns at once on the CPU, whose work is never queued.
void SynchronizeDevice(const c10::Device& device);

/// Times the passes of one step on `device`, in seconds since `step_start`
/// (a steady-clock time at or before construction).
///
/// On the CPU, Begin and End read the host clock: a pass has run when its
/// call returns. On a CUDA device they record events on the device's
/// current stream instead, so timing a pass does not wait for it and the
/// host may queue the next pass while the device runs this one; the times
/// are when the device reached each event, converted at Resolve() by one
/// synchronisation (each event's offset from a reference event recorded,
/// on an idle device, at construction). Either way the times are the
/// device's, which is what the coordinator's cost model and the measured
/// bubble rate need.
///
/// Index `j` is the action's position in the stage's list. Thread-compatible:
/// the executor's thread only.
class PassTimer {
 public:
  /// `actions`: how many actions the step has (valid j < actions).
  /// Synchronises a CUDA device once.
  PassTimer(const c10::Device& device, std::chrono::steady_clock::time_point step_start,
            size_t actions);
  PassTimer(const PassTimer&) = delete;
  PassTimer& operator=(const PassTimer&) = delete;

  /// The pass of action j starts now (on the device: once what is queued
  /// before it has run).
  void Begin(size_t j);
  /// The pass of action j ends now (queued likewise); again after a first
  /// End moves the end.
  void End(size_t j);
  /// Seconds from Begin(j) to the last End(j), waiting for that End on a
  /// CUDA device; both must have been called.
  double Duration(size_t j);
  /// Waits for every recorded event and writes the seconds of each action
  /// begun and ended (starts[j], ends[j]) for j < min(actions,
  /// starts.size()); the entries of other actions are left as they are.
  /// `ends` is at least as long as `starts`.
  void Resolve(std::vector<double>& starts, std::vector<double>& ends);

 private:
  double HostSeconds() const;
  // Begin or End: action j's time, now, on the CPU's or the CUDA side.
  void Mark(size_t j, std::vector<double>& host, std::vector<std::unique_ptr<c10::Event>>& events);

  const c10::Device device_;
  const std::chrono::steady_clock::time_point step_start_;
  // CPU: seconds since the step's start, NaN where not marked. CUDA: unused.
  std::vector<double> host_begin_, host_end_;
  // CUDA: the reference event and when the host saw it reached, and each
  // action's events (null where not recorded).
  std::unique_ptr<c10::Event> reference_;
  double reference_seconds_ = 0;
  std::vector<std::unique_ptr<c10::Event>> begin_, end_;
};

/// The memory a worker on `device` offers a job, bytes (what it reports as
/// WorkerDescription.memory_bytes unless --memory-bytes says otherwise):
/// a CUDA device's total memory (at::accelerator::getMemoryInfo), or, for
/// the CPU, the host's RAM divided by its online cores (one worker per
/// core). Thread-safe.
uint64_t DeviceMemoryBytes(const c10::Device& device);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_DEVICE_H_
