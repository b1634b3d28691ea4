// zbpp-sched reading schedules (CSV, JSON) and cost files: what it imports
// simulates as the generated schedule or the costs given, and each bad input
// exits 2 with one line naming it.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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
