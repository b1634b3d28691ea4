#ifndef ZBPP_TESTS_SCHEDULER_ZBPP_SCHED_CLI_H_
#define ZBPP_TESTS_SCHEDULER_ZBPP_SCHED_CLI_H_

// Running the zbpp-sched binary (ZBPP_SCHED_BINARY, set by
// tests/scheduler/CMakeLists.txt) as other tools do, for the CLI's tests
// (zbpp_sched_cli_test.cc, zbpp_sched_import_test.cc).

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string Quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

inline RunResult RunCli(const std::vector<std::string>& args) {
  // ctest may run these tests as parallel processes: one file per process.
  const std::string err_path = ::testing::TempDir() + "zbpp_sched_cli_stderr_" +
                               std::to_string(getpid());
  std::string command = ZBPP_SCHED_BINARY;
  for (const std::string& arg : args) command += " " + Quote(arg);
  command += " 2>" + Quote(err_path);
  RunResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) {
    result.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFileToString(err_path).value_or("");
  return result;
}

inline std::vector<std::string> Concat(std::vector<std::string> a,
                                const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// simulate with the flags every caller passes.
inline std::vector<std::string> SimulateArgs(const std::string& schedule, int p,
                                      int m) {
  return {"simulate",       "--schedule",     schedule, "--stages",
          std::to_string(p), "--microbatches", std::to_string(m),
          "--cost-f",       "1",              "--cost-b", "1",
          "--cost-w",       "1"};
}

// Runs a command that should succeed and print JSON; null JSON otherwise.
inline nlohmann::json RunJson(const std::vector<std::string>& args) {
  const RunResult run = RunCli(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  return nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
}

inline SimulationResult Direct(const std::string& name, const Problem& problem) {
  absl::StatusOr<Schedule> schedule = Generate(name, problem);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (!schedule.ok()) return {};
  absl::StatusOr<SimulationResult> result = Simulate(problem, *schedule);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimulationResult{};
}

// Writes `text` to a file of its own under the test's temporary folder.
inline std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "zbpp_sched_cli_" +
                           std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A command line that must exit 2 with one line on stderr that says `says`.
struct UsageCase {
  std::vector<std::string> args;
  std::string says;
};

inline void ExpectUsageErrors(const std::vector<UsageCase>& cases) {
  for (const UsageCase& c : cases) {
    const RunResult run = RunCli(c.args);
    const std::string what = ::testing::PrintToString(c.args);
    EXPECT_EQ(run.exit_code, 2) << what << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << what << "\n" << run.err;
    EXPECT_THAT(run.err, ::testing::HasSubstr(c.says)) << what;
  }
}

inline const std::vector<std::string> kUnitCosts = {"--cost-f", "1", "--cost-b", "1",
                                             "--cost-w", "1"};

}  // namespace zbpp::sched

#endif  // ZBPP_TESTS_SCHEDULER_ZBPP_SCHED_CLI_H_
