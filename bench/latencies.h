// Latency samples and their table rows, for the benchmarks that print
// percentiles (coordinator_load_bench).

#ifndef ZBPP_BENCH_LATENCIES_H_
#define ZBPP_BENCH_LATENCIES_H_

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace zbpp::bench {

/// Samples in seconds, summarised as count / p50 / p90 / p99 / max in ms.
/// Thread-safe.
class Latencies {
 public:
  void Add(double seconds) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    samples_.push_back(seconds);
  }
  void Clear() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    samples_.clear();
  }
  /// One row of the table PrintLatencyHeader heads: `name`, the count and
  /// the percentiles in milliseconds.
  std::string Row(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<double> s;
    {
      absl::MutexLock lock(&mu_);
      s = samples_;
    }
    std::sort(s.begin(), s.end());
    auto at = [&](double q) {
      if (s.empty()) return 0.0;
      size_t i = static_cast<size_t>(q * (s.size() - 1) + 0.5);
      return 1e3 * s[std::min(i, s.size() - 1)];
    };
    return absl::StrFormat("%-44s %7zu %9.2f %9.2f %9.2f %9.2f", name,
                           s.size(), at(0.5), at(0.9), at(0.99), at(1.0));
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<double> samples_ ABSL_GUARDED_BY(mu_);
};

/// Prints the header of a table of Latencies::Row lines to stdout.
inline void PrintLatencyHeader() {
  std::printf("%-44s %7s %9s %9s %9s %9s\n", "what", "n", "p50 ms", "p90 ms", "p99 ms",
              "max ms");
}

}  // namespace zbpp::bench

#endif  // ZBPP_BENCH_LATENCIES_H_
