#ifndef ZBPP_BENCH_BENCH_CLOCK_H_
#define ZBPP_BENCH_BENCH_CLOCK_H_

#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

#include "worker/runtime/device.h"

namespace zbpp::bench {

/// The benches' clock, in seconds. On the CPU this thread's CPU time: the
/// passes run on it alone (one intra-op thread), and unlike wall time it
/// does not grow when other processes share the core. On a GPU wall-clock
/// time after the work queued on `device` so far has run.
inline double DeviceSeconds(const c10::Device& device) {
  if (!device.is_cpu()) {
    worker::SynchronizeDevice(device);
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

/// The median of `v` (the upper one of an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Median seconds (DeviceSeconds) of `fn` over `reps` calls after `warmup`
/// untimed ones.
inline double TimeMedian(const c10::Device& device, int warmup, int reps,
                         const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    const double start = DeviceSeconds(device);
    fn();
    samples.push_back(DeviceSeconds(device) - start);
  }
  return Median(std::move(samples));
}

}  // namespace zbpp::bench

#endif  // ZBPP_BENCH_BENCH_CLOCK_H_
