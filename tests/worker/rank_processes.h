#ifndef ZBPP_TESTS_WORKER_RANK_PROCESSES_H_
#define ZBPP_TESTS_WORKER_RANK_PROCESSES_H_

// Ranks as processes, for the tests that need them: NCCL refuses two ranks
// of one process on one GPU, and ranks sharing one GPU need a host identity
// each (ConfigureNcclForSharedGpuTests, one per process). The parent runs
// the current test again in one child process per rank (this binary,
// filtered to that test); each child finds its rank with CurrentRankProcess
// and does its rank's share, its gtest failures making it exit non-zero.

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace zbpp::worker {

/// What a child knows: its rank, the number of ranks, and a file for a
/// c10d::FileStore all ranks of the run share.
struct RankProcess {
  int rank = 0;
  int size = 0;
  std::string store_path;
};

/// A child's output lines that start with this are copied to the parent's
/// standard output (measurements a test reports).
inline constexpr char kRankReport[] = "[rank report]";

/// In a child started by RunTestAsRankProcesses: its RankProcess; nullopt in
/// any other process.
std::optional<RankProcess> CurrentRankProcess();

/// Runs the current gtest test in `size` (>= 1) child processes of this
/// binary at once and waits for them: OK when every child exited 0 within
/// `timeout`. Otherwise an error naming the first rank that failed (or all
/// that were still running at the timeout, which are killed), its exit
/// status and the last lines of its output. When one child fails, the others
/// get 10 s to end before they are killed (they may wait for it). The
/// children's kRankReport lines are printed. Call from the test body of the
/// parent only.
absl::Status RunTestAsRankProcesses(int size, absl::Duration timeout);

}  // namespace zbpp::worker

#endif  // ZBPP_TESTS_WORKER_RANK_PROCESSES_H_
