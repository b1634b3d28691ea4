// CPU time of a process, for the benchmarks that measure other processes
// (pipeline_bench, coordinator_load_bench).

#ifndef ZBPP_BENCH_PROCESS_CPU_H_
#define ZBPP_BENCH_PROCESS_CPU_H_

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/read_file.h"

namespace zbpp::bench {

/// utime + stime of process `pid` from /proc/PID/stat, seconds; -1 when
/// unreadable (the process is gone). Thread-safe.
inline double ProcessCpuSeconds(pid_t pid) {
  const std::string stat =
      ReadFileToString(absl::StrCat("/proc/", pid, "/stat")).value_or("");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 2), ' ');
  // Fields after "(comm) ": state is [0], utime [11], stime [12].
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

}  // namespace zbpp::bench

#endif  // ZBPP_BENCH_PROCESS_CPU_H_
