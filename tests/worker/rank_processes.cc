#include "tests/worker/rank_processes.h"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace zbpp::worker {
namespace {

constexpr char kRankVar[] = "ZBPP_TEST_RANK";
constexpr char kSizeVar[] = "ZBPP_TEST_RANKS";
constexpr char kStoreVar[] = "ZBPP_TEST_STORE";

// The last `lines` lines of the file at `path`.
std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> all = absl::StrSplit(text.str(), '\n');
  if (all.size() > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, "\n");
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "ended abnormally";
}

}  // namespace

std::optional<RankProcess> CurrentRankProcess() {
  const char* rank = std::getenv(kRankVar);
  const char* size = std::getenv(kSizeVar);
  const char* store = std::getenv(kStoreVar);
  RankProcess process;
  if (rank == nullptr || size == nullptr || store == nullptr ||
      !absl::SimpleAtoi(rank, &process.rank) || !absl::SimpleAtoi(size, &process.size)) {
    return std::nullopt;
  }
  process.store_path = store;
  return process;
}

absl::Status RunTestAsRankProcesses(int size, absl::Duration timeout) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr || size < 1) {
    return absl::InvalidArgumentError("RunTestAsRankProcesses: call it from a test, size >= 1");
  }
  char dir_template[] = "/tmp/zbpp-ranks-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string filter =
      absl::StrCat("--gtest_filter=", test->test_suite_name(), ".", test->name());
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e) inherited.push_back(*e);

  std::vector<pid_t> pids(size, -1);
  std::vector<std::string> logs(size);
  for (int r = 0; r < size; ++r) {
    logs[r] = absl::StrCat(dir, "/rank", r, ".log");
    std::vector<std::string> env = inherited;
    env.push_back(absl::StrCat(kRankVar, "=", r));
    env.push_back(absl::StrCat(kSizeVar, "=", size));
    env.push_back(absl::StrCat(kStoreVar, "=", dir, "/store"));
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::string arg = filter;
    char* argv[] = {exe.data(), arg.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logs[r].c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int spawned = posix_spawn(&pids[r], exe.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      for (int k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) waitpid(pids[k], nullptr, 0);
      return absl::InternalError(absl::StrCat("spawning rank ", r, " failed: errno ", spawned));
    }
  }

  absl::Time deadline = absl::Now() + timeout;
  std::vector<int> statuses(size, 0);
  std::vector<bool> running(size, true);
  int left = size;
  int first_failed = -1;
  while (left > 0 && absl::Now() < deadline) {
    for (int r = 0; r < size; ++r) {
      if (!running[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        running[r] = false;
        statuses[r] = status;
        --left;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && first_failed < 0) {
          first_failed = r;
          deadline = std::min(deadline, absl::Now() + absl::Seconds(10));
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::vector<int> killed;
  for (int r = 0; r < size; ++r) {
    if (!running[r]) continue;
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
    killed.push_back(r);
  }
  absl::Status result;
  if (first_failed >= 0) {
    result = absl::InternalError(absl::StrCat(
        "rank ", first_failed, " of ", size, " failed (", DescribeExit(statuses[first_failed]),
        "); its output ends:\n", Tail(logs[first_failed], 40)));
  } else if (!killed.empty()) {
    result = absl::DeadlineExceededError(absl::StrCat(
        "ranks ", absl::StrJoin(killed, ", "), " of ", size, " still ran after ",
        absl::FormatDuration(timeout), " and were killed; rank ", killed[0],
        "'s output ends:\n", Tail(logs[killed[0]], 40)));
  }
  for (int r = 0; r < size; ++r) {
    std::ifstream in(logs[r]);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(kRankReport, 0) == 0) std::printf("rank %d: %s\n", r, line.c_str());
    }
  }
  if (result.ok()) {
    for (const std::string& log : logs) std::remove(log.c_str());
    std::remove(absl::StrCat(dir, "/store").c_str());
    rmdir(dir.c_str());
  }
  return result;
}

}  // namespace zbpp::worker
