// Runs the zbpp-sched binary as other tools do and checks exit codes,
// stdout and stderr.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/read_file.h"
#include "nlohmann/json.hpp"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& arg) {
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

RunResult RunCli(const std::vector<std::string>& args) {
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

std::vector<std::string> Concat(std::vector<std::string> a,
                                const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// simulate with the flags every caller passes.
std::vector<std::string> SimulateArgs(const std::string& schedule, int p,
                                      int m) {
  return {"simulate",       "--schedule",     schedule, "--stages",
          std::to_string(p), "--microbatches", std::to_string(m),
          "--cost-f",       "1",              "--cost-b", "1",
          "--cost-w",       "1"};
}

// Runs a command that should succeed and print JSON; null JSON otherwise.
nlohmann::json RunJson(const std::vector<std::string>& args) {
  const RunResult run = RunCli(args);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  return nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
}

SimulationResult Direct(const std::string& name, const Problem& problem) {
  absl::StatusOr<Schedule> schedule = Generate(name, problem);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (!schedule.ok()) return {};
  absl::StatusOr<SimulationResult> result = Simulate(problem, *schedule);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimulationResult{};
}

TEST(ZbppSchedCli, JsonMatchesDirectSimulationFor1F1B) {
  const nlohmann::json j =
      RunJson({"simulate", "--schedule", "1f1b", "--stages", "4",
               "--microbatches", "8", "--cost-f", "1", "--cost-b", "2",
               "--cost-w", "1.5", "--cost-comm", "0.1", "--format", "json"});
  ASSERT_TRUE(j.is_object());
  for (const char* field :
       {"schedule", "stages", "microbatches", "chunks", "makespan",
        "bubble_rate", "peak_memory_m_b", "mem_limit", "solve_seconds",
        "cost_f", "cost_b", "cost_w", "cost_comm", "step_seconds",
        "per_stage"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  const SimulationResult want = Direct(
      "1f1b", Problem::Uniform(4, 1, 8, VirtualStageCost{1, 2, 1.5, 1, 0.5}, 0.1));
  EXPECT_EQ(j["schedule"], "1f1b");
  EXPECT_EQ(j["stages"], 4);
  EXPECT_EQ(j["microbatches"], 8);
  EXPECT_EQ(j["chunks"], 1);
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), want.bubble_rate);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), want.makespan_seconds);
  EXPECT_DOUBLE_EQ(j["step_seconds"].get<double>(), want.step_seconds);
  EXPECT_DOUBLE_EQ(j["peak_memory_m_b"].get<double>(), 4.0);
  EXPECT_TRUE(j["mem_limit"].is_null());
  EXPECT_GE(j["solve_seconds"].get<double>(), 0.0);
  EXPECT_EQ(j["per_stage"]["idle_seconds"].get<std::vector<double>>(),
            want.idle_seconds);
  EXPECT_EQ(j["per_stage"]["peak_memory_m_b"].get<std::vector<double>>(),
            want.peak_memory_m_b);
}

// --cost-bw below T_B + T_W: ZB-H1's merged pairs (stage 0's B and W) cost
// T_BW, and the report lists them with the makespan were they run apart.
TEST(ZbppSchedCli, JsonReportsMergedPairsAndTheMakespanApart) {
  const nlohmann::json j =
      RunJson({"simulate", "--schedule", "zb-h1", "--stages", "4", "--microbatches", "8",
               "--cost-f", "1", "--cost-b", "1", "--cost-w", "1", "--cost-bw", "1.5",
               "--format", "json"});
  ASSERT_TRUE(j.is_object());
  EXPECT_DOUBLE_EQ(j["cost_bw"].get<double>(), 1.5);
  const nlohmann::json& merged = j["merged_pairs"];
  ASSERT_TRUE(merged.is_object()) << j.dump();
  EXPECT_GT(merged["count"].get<int>(), 0);
  ASSERT_EQ(merged["per_stage"].size(), 4u);
  EXPECT_EQ(merged["per_stage"][0][0], "0I0+0W0");
  EXPECT_LT(j["makespan"].get<double>(), merged["makespan_apart"].get<double>());
  // The default T_BW is T_B + T_W: the same makespan either way.
  const nlohmann::json plain =
      RunJson({"simulate", "--schedule", "zb-h1", "--stages", "4", "--microbatches", "8",
               "--cost-f", "1", "--cost-b", "1", "--cost-w", "1", "--format", "json"});
  EXPECT_DOUBLE_EQ(plain["makespan"].get<double>(),
                   plain["merged_pairs"]["makespan_apart"].get<double>());
  EXPECT_DOUBLE_EQ(plain["cost_bw"].get<double>(), 2);
}

TEST(ZbppSchedCli, SplitsStageCostsAndMemoryOverChunks) {
  // Per stage T=2 and M_B=1 over 2 chunks: each chunk costs 1 and holds 1/2.
  const nlohmann::json j =
      RunJson({"simulate", "--schedule", "1f1b-interleaved", "--stages", "4",
               "--microbatches", "8", "--chunks", "2", "--cost-f", "2",
               "--cost-b", "2", "--cost-w", "2", "--format", "json"});
  ASSERT_TRUE(j.is_object());
  const SimulationResult want =
      Direct("1f1b-interleaved",
             Problem::Uniform(4, 2, 8, VirtualStageCost{1, 1, 1, 0.5, 0.25}, 0));
  EXPECT_EQ(j["chunks"], 2);
  EXPECT_DOUBLE_EQ(j["cost_f"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), want.makespan_seconds);
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), want.bubble_rate);
  EXPECT_DOUBLE_EQ(j["peak_memory_m_b"].get<double>(), want.max_peak_memory_m_b);
}

TEST(ZbppSchedCli, MemLimitIsReportedAndEnforced) {
  const nlohmann::json j = RunJson(Concat(SimulateArgs("1f1b", 4, 8),
                                          {"--mem-limit", "4", "--format", "json"}));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["mem_limit"], 4.0);
  // 1F1B needs p = 4 M_B on stage 0: a limit of 3 is refused.
  const RunResult run = RunCli(Concat(SimulateArgs("1f1b", 4, 8), {"--mem-limit", "3"}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, StartsWith("zbpp-sched: "));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST(ZbppSchedCli, EachUsageErrorExitsTwoWithOneLineNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<std::string> base = SimulateArgs("1f1b", 4, 8);
  auto without = [&](const std::string& flag) {
    std::vector<std::string> args = base;
    auto it = std::find(args.begin(), args.end(), flag);
    args.erase(it, it + 2);
    return args;
  };
  auto with = [&](const std::string& flag, const std::string& value) {
    std::vector<std::string> args = without(flag);
    args.push_back(flag);
    args.push_back(value);
    return args;
  };
  const std::vector<Case> cases = {
      {{}, "missing command"},
      {{"frobnicate"}, "\"frobnicate\""},
      {Concat(base, {"--bogus", "1"}), "--bogus"},
      {Concat(base, {"extra"}), "\"extra\""},
      {without("--stages"), "missing required flag --stages"},
      {without("--schedule"), "--schedule"},
      {without("--cost-w"), "--cost-w"},
      {with("--stages", "x"), "--stages must be an integer >= 1, got \"x\""},
      {with("--stages", "0"), "--stages"},
      {with("--stages", "2.5"), "--stages"},
      {with("--microbatches", "-3"), "--microbatches"},
      {with("--cost-f", "-1"), "--cost-f"},
      {with("--cost-b", "abc"), "--cost-b"},
      {with("--cost-w", "nan"), "--cost-w"},
      {Concat(base, {"--cost-comm", "-0.5"}), "--cost-comm"},
      {Concat(base, {"--mem-limit", "0"}), "--mem-limit"},
      {Concat(base, {"--weight-memory-fraction", "1.5"}),
       "--weight-memory-fraction"},
      {Concat(base, {"--weight-memory-fraction", "-0.1"}),
       "--weight-memory-fraction"},
      {Concat(base, {"--format", "xml"}), "--format"},
      {Concat(base, {"--stages", "5"}), "--stages is given more than once"},
      {Concat(base, {"--output"}), "--output needs a value"},
      {Concat(SimulateArgs("nope", 4, 8), {}), "\"nope\""},
      {Concat(SimulateArgs("zb-h1", 4, 8), {"--chunks", "3"}), "--chunks"},
      {SimulateArgs("zb-h2", 4, 4), "zb-h2"},
      {{"compare", "--stages", "4", "--microbatches", "8", "--format", "svg"},
       "--format"},
      {{"compare", "--microbatches", "8"}, "--stages"},
      {{"show", "--schedule", "1f1b", "--stages", "2", "--microbatches", "2",
        "--width", "0"},
       "--width"},
  };
  for (const Case& c : cases) {
    const RunResult run = RunCli(c.args);
    const std::string what = ::testing::PrintToString(c.args);
    EXPECT_EQ(run.exit_code, 2) << what << "\n" << run.err;
    EXPECT_THAT(run.err, StartsWith("zbpp-sched: ")) << what;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << what << "\n" << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.says)) << what;
    EXPECT_EQ(run.out, "") << what;
  }
}

TEST(ZbppSchedCli, UnknownScheduleListsKnownNames) {
  const RunResult run = RunCli(SimulateArgs("zb-h3", 4, 8));
  EXPECT_EQ(run.exit_code, 2);
  for (const ScheduleTraits& traits : AllSchedules()) {
    EXPECT_THAT(run.err, HasSubstr(traits.name));
  }
}

TEST(ZbppSchedCli, OutputFlagWritesTheFile) {
  const std::string path = ::testing::TempDir() + "zbpp_sched_cli_out_" +
                           std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  const RunResult run = RunCli(Concat(SimulateArgs("zb-h1", 4, 8),
                                   {"--format", "json", "--output", path}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "");
  const nlohmann::json j = nlohmann::json::parse(ReadFileToString(path).value_or(""));
  EXPECT_EQ(j["schedule"], "zb-h1");
  // ZB-H1, uniform costs, no communication: bubble (p-1)(T_F+T_B-T_W) = 3
  // over a makespan of 8*3 + 3 = 27.
  EXPECT_DOUBLE_EQ(j["bubble_rate"].get<double>(), 3.0 / 27.0);
}

TEST(ZbppSchedCli, UnwritableOutputExitsOne) {
  const RunResult run =
      RunCli(Concat(SimulateArgs("1f1b", 2, 2),
                 {"--output", "/nonexistent-dir/zbpp/out.json"}));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("--output"));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
}

TEST(ZbppSchedCli, HelpPrintsUsage) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"help"}, {"simulate", "--help"}}) {
    const RunResult run = RunCli(args);
    EXPECT_EQ(run.exit_code, 0);
    EXPECT_THAT(run.out, HasSubstr("usage: zbpp-sched"));
    EXPECT_THAT(run.out, HasSubstr("--mem-limit"));
    EXPECT_THAT(run.out, HasSubstr("compare"));
  }
}

TEST(ZbppSchedCli, CsvFormatIsTheGeneratedSchedule) {
  const RunResult run =
      RunCli(Concat(SimulateArgs("zb-h1", 3, 6), {"--format", "csv"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  absl::StatusOr<Schedule> got = ScheduleFromCsv(run.out, Placement::kLoop);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<Schedule> want =
      Generate("zb-h1", Problem::Uniform(3, 1, 6, VirtualStageCost{}, 0));
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(got->actions, want->actions);
}

TEST(ZbppSchedCli, ChromeTraceAndSvgFormats) {
  RunResult run =
      RunCli(Concat(SimulateArgs("1f1b", 3, 4), {"--format", "chrome-trace"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json trace = nlohmann::json::parse(run.out);
  int complete = 0;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    complete += event.at("ph") == "X";
  }
  EXPECT_EQ(complete, 3 * 4 * 2);  // F and fused BW per stage and microbatch
  run = RunCli(Concat(SimulateArgs("1f1b", 3, 4), {"--format", "svg"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("<?xml"));
  EXPECT_THAT(run.out, HasSubstr("</svg>"));
}

TEST(ZbppSchedCli, TableIsTheDefaultFormat) {
  const RunResult run = RunCli(SimulateArgs("1f1b", 4, 8));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // 1F1B: bubble (p-1)*3 over makespan 8*3 + 3*3 = 33.
  EXPECT_THAT(run.out, HasSubstr("bubble rate           0.272727 (27.27%)"));
  EXPECT_THAT(run.out, HasSubstr("makespan              33 s"));
  EXPECT_THAT(run.out, HasSubstr("\n3      24      9"));  // stage 3's row
}

TEST(ZbppSchedCli, ShowDrawsOneLinePerStage) {
  // 1F1B, p=2, m=2, every pass 1 s (fused BW 2 s); the shortest pass is
  // three columns, "F0 " or "BW0   ".
  const RunResult run = RunCli({"show", "--schedule", "1f1b", "--stages", "2",
                             "--microbatches", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("stage 0 |F0 F1 ......BW0   ...BW1   |\n"));
  EXPECT_THAT(run.out, HasSubstr("stage 1 |...F0 BW0   F1 BW1   ......|\n"));
  EXPECT_THAT(run.out, HasSubstr("bubble rate"));
  EXPECT_THAT(run.out, HasSubstr("legend:"));
}

TEST(ZbppSchedCli, ShowWidthSetsTheColumns) {
  const RunResult run = RunCli({"show", "--schedule", "1f1b", "--stages", "2",
                             "--microbatches", "2", "--width", "9"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // 9 s over 9 columns: one column per second.
  EXPECT_THAT(run.out, HasSubstr("stage 0 |FF..BW.BW|\n"));
}

TEST(ZbppSchedCli, CompareListsEverySchedule) {
  // m < 2p: zb-h2 and dualpipe-v cannot serve it, and say so in their rows.
  const RunResult run = RunCli({"compare", "--stages", "4", "--microbatches", "6"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::string> names;
  std::istringstream lines(run.out);
  std::string line;
  std::getline(lines, line);  // header
  EXPECT_THAT(line, HasSubstr("bubble_rate"));
  while (std::getline(lines, line)) names.push_back(line.substr(0, line.find(' ')));
  std::vector<std::string> want;
  for (const ScheduleTraits& traits : AllSchedules()) want.push_back(traits.name);
  EXPECT_EQ(names, want);
  EXPECT_EQ(want.size(), 12u);
  EXPECT_THAT(run.out, HasSubstr("n/a: "));
  std::istringstream again(run.out);
  while (std::getline(again, line)) {
    if (line.rfind("zb-h2 ", 0) == 0 || line.rfind("dualpipe-v ", 0) == 0) {
      EXPECT_THAT(line, HasSubstr("n/a: "));
    }
  }
}

TEST(ZbppSchedCli, CompareJsonMatchesDirectSimulation) {
  const nlohmann::json j = RunJson(
      {"compare", "--stages", "4", "--microbatches", "8", "--format", "json"});
  ASSERT_EQ(j["schedules"].size(), AllSchedules().size());
  for (size_t k = 0; k < AllSchedules().size(); ++k) {
    const nlohmann::json& row = j["schedules"][k];
    EXPECT_EQ(row["schedule"], AllSchedules()[k].name);
    EXPECT_TRUE(row.contains("bubble_rate") != row.contains("error"))
        << row.dump();
  }
  const SimulationResult want =
      Direct("zb-h1", Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0));
  EXPECT_DOUBLE_EQ(j["schedules"][3]["bubble_rate"].get<double>(),
                   want.bubble_rate);
}

TEST(ZbppSchedCli, CompareCsvHasOneRowPerSchedule) {
  const RunResult run = RunCli({"compare", "--stages", "2", "--microbatches",
                             "4", "--format", "csv"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("schedule,chunks,makespan_s,bubble_rate,"));
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'),
            1 + static_cast<long>(AllSchedules().size()));
}

TEST(ZbppSchedCli, ReductionsShowOnACommunicationLineAndCountInTheMakespan) {
  // 1F1B, p=2, m=1, F=1, BW=2: stage 0 runs F0 [0,1] and BW0 [4,6],
  // stage 1 F0 [1,2] and BW0 [2,4]. 2 s reductions: stage 1's [4,6]
  // within its span, stage 0's [6,8] after everything: 2 s exposed.
  const std::vector<std::string> args = {"--schedule", "1f1b", "--stages", "2",
                                         "--microbatches", "1", "--reduce-seconds", "2",
                                         "--reduce-placement", "after-last-backward"};
  const RunResult show = RunCli(Concat({"show"}, args));
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("makespan 8 s"));
  EXPECT_THAT(show.out, HasSubstr("\n  comm  |"));
  EXPECT_THAT(show.out, HasSubstr("R0"));
  EXPECT_THAT(show.out, HasSubstr("R1"));
  const nlohmann::json j = RunJson(
      Concat({"simulate", "--cost-f", "1", "--cost-b", "1", "--cost-w", "1", "--format", "json"},
             args));
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 8);
  EXPECT_DOUBLE_EQ(j["exposed_reduce_seconds"].get<double>(), 2);
  EXPECT_EQ(j["reduce_placement"], "after-last-backward");
  EXPECT_EQ(j["per_stage"]["exposed_reduce_seconds"].get<std::vector<double>>(),
            (std::vector<double>{2, 2}));
}

TEST(ZbppSchedCli, RingModelGivesTheReduceSeconds) {
  // d = 4, 3 GB of gradients per stage, 100 GB/s: 2*3/4 * 3e9 / 1e11 s.
  const nlohmann::json j = RunJson(Concat(
      SimulateArgs("zb-v", 2, 4), {"--data-parallel", "4", "--gradient-bytes", "3e9",
                                   "--reduce-bandwidth", "100", "--format", "json"}));
  EXPECT_DOUBLE_EQ(j["reduce_seconds"].get<double>(), 0.045);
  EXPECT_EQ(j["reduce_placement"], "solved");
  // d = 1: one replica, nothing to reduce.
  const nlohmann::json one = RunJson(Concat(
      SimulateArgs("zb-v", 2, 4), {"--data-parallel", "1", "--format", "json"}));
  EXPECT_TRUE(one["reduce_seconds"].is_null());
}

TEST(ZbppSchedCli, ReductionFlagsRefuseBadCombinations) {
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--reduce-seconds", "1", "--data-parallel", "2"},
        std::vector<std::string>{"--data-parallel", "2", "--gradient-bytes", "1e9"},
        std::vector<std::string>{"--reduce-seconds", "-1"},
        std::vector<std::string>{"--reduce-seconds", "1", "--reduce-placement", "early"}}) {
    const RunResult run = RunCli(Concat(SimulateArgs("zb-h1", 2, 4), extra));
    EXPECT_EQ(run.exit_code, 2) << extra[0] << " " << extra[1];
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

TEST(ZbppSchedCli, CsvExportCarriesReductionsThatImportBack) {
  const RunResult run = RunCli(Concat(SimulateArgs("zb-v", 2, 4),
                                      {"--reduce-seconds", "3", "--format", "csv"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* text : {"0REDUCE_GRAD", "1REDUCE_GRAD", "2REDUCE_GRAD", "3REDUCE_GRAD"}) {
    EXPECT_THAT(run.out, HasSubstr(text));
  }
  absl::StatusOr<Schedule> schedule = ScheduleFromCsv(run.out, Placement::kV);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  VirtualStageCost cost{0.5, 0.5, 0.5, 0.5, 0.25};
  cost.reduce_seconds = 1.5;
  EXPECT_TRUE(CheckSchedule(Problem::Uniform(2, 2, 4, cost, 0), *schedule).ok());
}

// Writes `text` to a file of its own under the test's temporary folder.
std::string WriteTemp(const std::string& name, const std::string& text) {
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

void ExpectUsageErrors(const std::vector<UsageCase>& cases) {
  for (const UsageCase& c : cases) {
    const RunResult run = RunCli(c.args);
    const std::string what = ::testing::PrintToString(c.args);
    EXPECT_EQ(run.exit_code, 2) << what << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << what << "\n" << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.says)) << what;
  }
}

const std::vector<std::string> kUnitCosts = {"--cost-f", "1", "--cost-b", "1",
                                             "--cost-w", "1"};

TEST(ZbppSchedCli, ImportedExportSimulatesLikeTheGeneratedSchedule) {
  for (const char* name : {"zb-v", "1f1b-interleaved", "zb-h1"}) {
    const std::vector<std::string> generate = Concat(
        SimulateArgs(name, 4, 8), {"--cost-comm", "0.25", "--format"});
    const RunResult csv = RunCli(Concat(generate, {"csv"}));
    ASSERT_EQ(csv.exit_code, 0) << csv.err;
    const nlohmann::json want = RunJson(Concat(generate, {"json"}));
    const std::string path = WriteTemp(std::string(name) + ".csv", csv.out);
    const RunResult run =
        RunCli(Concat({"simulate", "--import", path, "--cost-comm", "0.25",
                       "--format", "json"},
                      kUnitCosts));
    ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
    const nlohmann::json got = nlohmann::json::parse(run.out);
    EXPECT_EQ(got["schedule"], "imported");
    EXPECT_EQ(got["placement"], want["placement"]) << name;
    for (const char* field : {"stages", "chunks", "microbatches"}) {
      EXPECT_EQ(got[field], want[field]) << name << " " << field;
    }
    EXPECT_DOUBLE_EQ(got["makespan"].get<double>(),
                     want["makespan"].get<double>())
        << name;
    EXPECT_DOUBLE_EQ(got["peak_memory_m_b"].get<double>(),
                     want["peak_memory_m_b"].get<double>())
        << name;
  }
}

TEST(ZbppSchedCli, ShowDrawsAnImportedSchedule) {
  // DualPipeV's overlapped F and B on a V of 2 stages, PyTorch's form.
  const std::string path = WriteTemp(
      "overlap.csv",
      "0F0,0F1,3F0,3I0,3W0,(3F1;0B0)OVERLAP_F_B,3B1,0B1\n"
      "1F0,2F0,1F1,2I0,2F1,1I0,2B1,2W0,1B1,1W0\n");
  const RunResult run = RunCli({"show", "--import", path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("imported: p=2 v=2 m=2"));
  EXPECT_THAT(run.out, HasSubstr("stage 0 |"));
  EXPECT_THAT(run.out, HasSubstr("stage 1 |"));
  EXPECT_THAT(run.err, HasSubstr("1 OVERLAP_F_B split into F and B"));
}

// The speculative prefixes of post-update validation under a transport that
// matches by order (scheduler/comm_order.h), in both forms: 1F1B's are its
// warm-up forwards and the first steady-state one, and pass; ZB-V's at p = 2,
// m = 2 pass too, as every registry schedule's do, since the derived order
// puts each pair's prefix messages first (rule (b);
// tests/scheduler/comm_order_test.cc); an imported V whose stage 1 forwards
// microbatch 1 before stage 0 has produced it outside its prefix breaks
// rule (a), which is about the schedule, not the order.
TEST(ZbppSchedCli, ReportsWhetherTheSpeculativePrefixesAreClosed) {
  const std::vector<std::string> one_f_one_b = SimulateArgs("1f1b", 4, 8);
  const nlohmann::json j = RunJson(Concat(one_f_one_b, {"--format", "json"}));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["speculative_prefixes"]["actions_per_stage"].get<std::vector<int>>(),
            (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(j["speculative_prefixes"]["closed"], true);
  EXPECT_TRUE(j["speculative_prefixes"]["error"].is_null());
  const RunResult table = RunCli(one_f_one_b);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              HasSubstr("closed, leading each pair's order; actions per stage 4 3 2 1"));

  const std::vector<std::string> zb_v = SimulateArgs("zb-v", 2, 2);
  const nlohmann::json v = RunJson(Concat(zb_v, {"--format", "json"}));
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v["in_order_transport"]["runs"], true);
  EXPECT_EQ(v["speculative_prefixes"]["actions_per_stage"].get<std::vector<int>>(),
            (std::vector<int>{3, 4}));
  EXPECT_EQ(v["speculative_prefixes"]["closed"], true);
  EXPECT_TRUE(v["speculative_prefixes"]["error"].is_null());
  const RunResult v_table = RunCli(zb_v);
  ASSERT_EQ(v_table.exit_code, 0) << v_table.err;
  EXPECT_THAT(v_table.out, HasSubstr("speculative prefixes  closed, leading each pair's order; "
                                     "actions per stage 3 4"));

  const std::string open_v = WriteTemp("open-prefix.csv",
                                       "0F0,3F0,3B0,0F1,3F1,3B1,0B0,0B1\n"
                                       "1F0,2F0,1F1,2B0,2F1,2B1,1B0,1B1\n");
  const nlohmann::json imported =
      RunJson(Concat({"simulate", "--import", open_v, "--format", "json"}, kUnitCosts));
  ASSERT_TRUE(imported.is_object());
  EXPECT_EQ(imported["placement"], "v");
  EXPECT_EQ(imported["speculative_prefixes"]["closed"], false);
  EXPECT_EQ(imported["speculative_prefixes"]["error"],
            "stage 1 runs 1F1 in its speculative prefix, but its input comes from stage 0's "
            "0F1, which follows that stage's first B (3B0): prefix not closed");
}

TEST(ZbppSchedCli, ImportErrorsExitTwoWithOneLine) {
  const std::string missing_send = WriteTemp(
      "missing_send.csv", "0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  const std::string deadlock =
      WriteTemp("deadlock.csv", "0F0,0B0\n1B0,1F0\n");
  const std::string incomplete = WriteTemp("incomplete.csv", "0F0,0F1,0B0\n");
  const std::string good = WriteTemp("good.csv", "0F0,0F1,0B0,0B1\n");
  const std::vector<UsageCase> cases = {
      {Concat({"simulate", "--import", missing_send}, kUnitCosts),
       "row 1 (stage 0), cell 1 (0F0): no 0SEND_F0 after it"},
      {Concat({"simulate", "--import", deadlock}, kUnitCosts), "deadlock"},
      {Concat({"simulate", "--import", incomplete}, kUnitCosts),
       "missing B of virtual stage 0 microbatch 1"},
      {Concat({"simulate", "--import", good, "--stages", "2"}, kUnitCosts),
       "--stages 2 does not match the imported schedule's 1 stages"},
      {Concat({"simulate", "--import", good, "--mem-limit", "1"}, kUnitCosts),
       "stage 0 peaks at 2 M_B, over --mem-limit 1"},
      {Concat({"simulate", "--import", good, "--schedule", "1f1b"}, kUnitCosts),
       "--schedule or --import, not both"},
      {Concat({"simulate", "--import", "/nonexistent/x.csv"}, kUnitCosts),
       "cannot read --import"},
  };
  ExpectUsageErrors(cases);
}

// p = 4 where stage 3 is 1.5x slower than the others.
constexpr char kSlowStage3[] = R"(stages:
  - {t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0.5}
  - {t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0.5}
  - {t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0.5}
  - {t_f: 1.5, t_b: 1.5, t_w: 1.5, m_b: 1, m_w: 0.5}
comm: 0.05
)";

// kSlowStage3 for v chunks per stage under `placement`.
Problem SlowStage3(int chunks, Placement placement) {
  Problem problem = Problem::Uniform(4, chunks, 8,
                                     VirtualStageCost{1.0 / chunks, 1.0 / chunks,
                                               1.0 / chunks, 1.0 / chunks,
                                               0.5 / chunks},
                                     0.05);
  const std::vector<int> owner = PlaceVirtualStages(placement, 4, chunks);
  for (int s = 0; s < problem.num_virtual_stages(); ++s) {
    if (owner[s] != 3) continue;
    VirtualStageCost& c = problem.virtual_stages[s];
    c.f_seconds = c.b_seconds = c.w_seconds = 1.5 / chunks;
  }
  return problem;
}

TEST(ZbppSchedCli, CompareWithCostsFileMatchesDirectSimulation) {
  const std::string path = WriteTemp("slow3.yaml", kSlowStage3);
  const nlohmann::json j = RunJson(
      {"compare", "--microbatches", "8", "--costs", path, "--format", "json"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["stages"], 4);
  EXPECT_EQ(j["costs_file"], path);
  int checked = 0;
  for (const nlohmann::json& row : j["schedules"]) {
    const std::string name = row["schedule"];
    if (name != "zb-h1" && name != "zb-v" && name != "1f1b") continue;
    ASSERT_FALSE(row.contains("error")) << row.dump();
    const SimulationResult want =
        Direct(name, SlowStage3(name == "zb-v" ? 2 : 1,
                                name == "zb-v" ? Placement::kV
                                               : Placement::kLoop));
    EXPECT_DOUBLE_EQ(row["makespan"].get<double>(), want.makespan_seconds)
        << name;
    EXPECT_TRUE(row["cost_f"].is_null()) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
  // The slow stage costs time: the same schedules are faster without it.
  const nlohmann::json uniform =
      RunJson({"compare", "--stages", "4", "--microbatches", "8",
               "--cost-comm", "0.05", "--format", "json"});
  EXPECT_GT(j["schedules"][1]["makespan"].get<double>(),
            uniform["schedules"][1]["makespan"].get<double>());
}

TEST(ZbppSchedCli, ImportWithCostsFileSimulatesUnderThoseCosts) {
  const RunResult csv = RunCli(Concat(SimulateArgs("zb-v", 4, 8),
                                      {"--format", "csv"}));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::string schedule_path = WriteTemp("zbv.csv", csv.out);
  const std::string costs_path = WriteTemp("slow3-import.yaml", kSlowStage3);
  const nlohmann::json j = RunJson({"simulate", "--import", schedule_path,
                                    "--costs", costs_path, "--format", "json"});
  ASSERT_TRUE(j.is_object());
  absl::StatusOr<Schedule> schedule = ScheduleFromCsv(csv.out, Placement::kV);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  absl::StatusOr<SimulationResult> want =
      Simulate(SlowStage3(2, Placement::kV), *schedule);
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), want->makespan_seconds);
}

TEST(ZbppSchedCli, CostsFileErrorsExitTwoWithOneLineNamingTheField) {
  const std::string good = WriteTemp("good-costs.yaml", kSlowStage3);
  std::string negative = kSlowStage3;
  negative.replace(negative.rfind("t_b: 1.5"), 8, "t_b: -1");
  const std::string bad = WriteTemp("bad-costs.yaml", negative);
  const std::string virtual_stages = WriteTemp(
      "virtual-costs.json",
      R"({"virtual_stages": [{"t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1, "m_w": 0},
          {"t_f": 1, "t_b": 1, "t_w": 1, "m_b": 1, "m_w": 0}]})");
  const std::vector<UsageCase> cases = {
      {{"compare", "--microbatches", "8", "--costs", bad},
       "stages[3].t_b: must be a number >= 0, got -1"},
      {{"compare", "--microbatches", "8", "--costs", good, "--cost-f", "1"},
       "--cost-f cannot be given with it"},
      {{"compare", "--microbatches", "8", "--costs", good, "--stages", "3"},
       "--stages 3 does not match the 4 entries"},
      {{"compare", "--microbatches", "8", "--costs", virtual_stages},
       "--stages must say how many stages hold them"},
      {{"compare", "--microbatches", "8", "--costs", "/nonexistent.yaml"},
       "cannot read --costs"},
      {{"simulate", "--schedule", "zb-v", "--stages", "4", "--microbatches",
        "8", "--costs", virtual_stages},
       "has 2 virtual_stages, not --stages 4 x chunks"},
      {{"simulate", "--schedule", "1f1b", "--microbatches", "8"},
       "missing required flag --cost-f"},
      // The imported schedule peaks at 2 M_B = 2 bytes on its stage.
      {{"simulate", "--import", WriteTemp("two-f.csv", "0F0,0F1,0B0,0B1\n"),
        "--costs",
        WriteTemp("tiny-limit.yaml",
                  "stages: [{t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0.5}]\n"
                  "memory_limit_bytes: [1.5]\n")},
       "stage 0 peaks at 2 bytes, over memory_limit_bytes[0] = 1.5"},
  };
  ExpectUsageErrors(cases);
}

}  // namespace
}  // namespace zbpp::sched
