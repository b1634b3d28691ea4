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
#include "tests/scheduler/zbpp_sched_cli.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

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

}  // namespace
}  // namespace zbpp::sched
