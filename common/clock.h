#ifndef ZBPP_COMMON_CLOCK_H_
#define ZBPP_COMMON_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace zbpp {

/// Source of the current time, injected through `Options` so that tests
/// can drive leases, timeouts and rates without sleeping.
/// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current wall-clock time.
  virtual absl::Time Now() const = 0;
};

/// The real clock (absl::Now). Thread-safe; a process-wide instance is
/// returned by `RealClock()`.
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

/// The process-wide SystemClock. Never null, never destroyed.
inline Clock* RealClock() {
  static SystemClock* const clock = new SystemClock();
  return clock;
}

/// A clock that only moves when told to. Starts at the Unix epoch + 1e9 s so
/// that times are plausible. Thread-safe.
class FakeClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  /// Moves the clock forward by `d` (>= 0).
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1000000000);
};

}  // namespace zbpp

#endif  // ZBPP_COMMON_CLOCK_H_
