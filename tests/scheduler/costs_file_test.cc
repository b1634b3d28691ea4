#include "scheduler/cli/costs_file.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kYaml[] = R"(
stages:
  - {t_f: 1, t_b: 2, t_w: 0.5, m_b: 100, m_w: 40}
  - {t_f: 3, t_b: 4, t_w: 1.5, m_b: 200, m_w: 80, reduce: 0.25}
comm: 0.125
memory_limit_bytes: [1000, 2000]
)";

constexpr char kJson[] = R"({"stages": [
  {"t_f": 1, "t_b": 2, "t_w": 0.5, "m_b": 100, "m_w": 40},
  {"t_f": 3, "t_b": 4, "t_w": 1.5, "m_b": 200, "m_w": 80, "reduce": 0.25}],
  "comm": 0.125, "memory_limit_bytes": [1000, 2000]})";

TEST(CostFile, ReadsYamlAndJsonAlike) {
  for (const char* text : {kYaml, kJson}) {
    absl::StatusOr<CostFile> costs = ParseCostFile(text);
    ASSERT_TRUE(costs.ok()) << costs.status();
    EXPECT_FALSE(costs->per_virtual_stage);
    ASSERT_EQ(costs->entries.size(), 2u);
    const VirtualStageCost& second = costs->entries[1];
    EXPECT_EQ(second.f_seconds, 3);
    EXPECT_EQ(second.b_seconds, 4);
    EXPECT_EQ(second.w_seconds, 1.5);
    EXPECT_EQ(second.m_b_bytes, 200);
    EXPECT_EQ(second.m_w_bytes, 80);
    EXPECT_EQ(second.reduce_seconds, 0.25);
    EXPECT_EQ(costs->entries[0].reduce_seconds, 0);
    EXPECT_TRUE(costs->has_reduce);
    EXPECT_EQ(costs->comm_seconds, 0.125);
    EXPECT_THAT(costs->memory_limit_bytes, ElementsAre(1000, 2000));
  }
}

TEST(CostFile, ErrorsNameTheField) {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::string ok = "{t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0.5}";
  const std::vector<Case> cases = {
      {"stages: [" + ok + ", " + ok + ", " + ok +
           ", {t_f: 1, t_b: -1, t_w: 1, m_b: 1, m_w: 0}]",
       "stages[3].t_b: must be a number >= 0, got -1"},
      {"stages: [{t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0, transient: -2}]",
       "stages[0].transient: must be a number >= 0, got -2"},
      {"stages: [{t_f: 1, t_b: 1, m_b: 1, m_w: 0}]", "stages[0].t_w: missing"},
      {"stages: [{t_f: 1, t_b: 1, t_w: x, m_b: 1, m_w: 0}]",
       "stages[0].t_w: must be a number >= 0, got x"},
      {"stages: [{t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 2}]",
       "stages[0].m_w: must not exceed m_b (1), got 2"},
      {"stages: [{tf: 1}]", "stages[0]: unknown key \"tf\""},
      {"stages: [{t_f: 1, t_b: 1, t_w: 1, t_bw: -1, m_b: 1, m_w: 0}]",
       "stages[0].t_bw: must be a number >= 0, got -1"},
      {"stages: [3]", "stages[0]: must be a mapping"},
      {"stages: []", "stages: must be a non-empty list"},
      {"virtual_stages: [" + ok + "]\nstages: [" + ok + "]",
       "give stages or virtual_stages, not both"},
      {"comm: 1", "stages: missing"},
      {"stages: [" + ok + "]\ncomm: -2", "comm: must be a number >= 0, got -2"},
      {"stages: [" + ok + "]\nmemory_limit_bytes: [0]",
       "memory_limit_bytes[0]: must be > 0"},
      {"stages: [" + ok + "]\nspeed: 2", "unknown key \"speed\""},
      {"[1, 2", "not JSON or YAML"},
      {"", "must be a mapping"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CostFile> costs = ParseCostFile(c.text);
    ASSERT_FALSE(costs.ok()) << c.text;
    EXPECT_EQ(costs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(costs.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(CostFile, StagesAreSplitOverTheChunksOfTheirStage) {
  absl::StatusOr<CostFile> costs = ParseCostFile(kYaml);
  ASSERT_TRUE(costs.ok()) << costs.status();
  // V placement on 2 stages: stage 0 holds virtual stages 0 and 3,
  // stage 1 virtual stages 1 and 2.
  absl::StatusOr<Problem> problem =
      CostProblem(*costs, 2, 2, 6, PlaceVirtualStages(Placement::kV, 2, 2));
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_TRUE(problem->Validate().ok());
  EXPECT_EQ(problem->microbatches, 6);
  EXPECT_EQ(problem->comm_seconds, 0.125);
  std::vector<double> f, m_b;
  for (const VirtualStageCost& c : problem->virtual_stages) {
    f.push_back(c.f_seconds);
    m_b.push_back(c.m_b_bytes);
  }
  EXPECT_THAT(f, ElementsAre(0.5, 1.5, 1.5, 0.5));
  EXPECT_THAT(m_b, ElementsAre(50, 100, 100, 50));
  EXPECT_THAT(problem->memory_limit_bytes, ElementsAre(1000, 2000));
}

TEST(CostFile, VirtualStagesAreTakenAsTheyAre) {
  absl::StatusOr<CostFile> costs = ParseCostFile(
      "virtual_stages:\n"
      "  - {t_f: 1, t_b: 1, t_w: 1, m_b: 1, m_w: 0}\n"
      "  - {t_f: 2, t_b: 1, t_w: 1, m_b: 1, m_w: 0}\n"
      "  - {t_f: 3, t_b: 1, t_w: 1, m_b: 1, m_w: 0}\n"
      "  - {t_f: 4, t_b: 1, t_w: 1, m_b: 1, m_w: 0}\n");
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_TRUE(costs->per_virtual_stage);
  absl::StatusOr<Problem> problem =
      CostProblem(*costs, 2, 2, 4, PlaceVirtualStages(Placement::kLoop, 2, 2));
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->virtual_stages[2].f_seconds, 3);
  absl::StatusOr<Problem> wrong =
      CostProblem(*costs, 4, 2, 4, PlaceVirtualStages(Placement::kLoop, 4, 2));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("virtual_stages has 4 entries, the schedule needs 8"));
}

TEST(CostFile, YamlOfAProblemReadsBackToTheSameCosts) {
  Problem want = Problem::Uniform(2, 2, 6, VirtualStageCost{}, 0.1);
  for (int s = 0; s < want.num_virtual_stages(); ++s) {
    VirtualStageCost& c = want.virtual_stages[s];
    c.f_seconds = 0.1 + s / 3.0;
    c.b_seconds = 1e-7 * (s + 1);
    c.w_seconds = 2.0 / 7.0;
    c.m_b_bytes = 1.5e9 + s;
    c.m_w_bytes = 0.7e9;
    c.reduce_seconds = s == 2 ? 0.0 : 0.01 / 3;
    c.bw_seconds = s == 1 ? 0.0 : c.b_seconds + c.w_seconds / 2;
    c.transient_bytes = s == 3 ? 0.0 : 2.5e8 / 3 + s;
  }
  want.memory_limit_bytes = {1e10 / 3, 4e9};
  const std::string yaml = CostFileYaml(want);
  EXPECT_THAT(yaml, HasSubstr("p=2 v=2 m=6"));
  absl::StatusOr<CostFile> costs = ParseCostFile(yaml);
  ASSERT_TRUE(costs.ok()) << costs.status() << "\n" << yaml;
  EXPECT_TRUE(costs->per_virtual_stage);
  absl::StatusOr<Problem> got =
      CostProblem(*costs, 2, 2, 6, PlaceVirtualStages(Placement::kV, 2, 2));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->virtual_stages.size(), want.virtual_stages.size());
  for (size_t s = 0; s < want.virtual_stages.size(); ++s) {
    const VirtualStageCost& a = got->virtual_stages[s];
    const VirtualStageCost& b = want.virtual_stages[s];
    EXPECT_EQ(a.f_seconds, b.f_seconds) << s;
    EXPECT_EQ(a.b_seconds, b.b_seconds) << s;
    EXPECT_EQ(a.w_seconds, b.w_seconds) << s;
    EXPECT_EQ(a.m_b_bytes, b.m_b_bytes) << s;
    EXPECT_EQ(a.m_w_bytes, b.m_w_bytes) << s;
    EXPECT_EQ(a.reduce_seconds, b.reduce_seconds) << s;
    EXPECT_EQ(a.bw_seconds, b.bw_seconds) << s;
    EXPECT_EQ(a.transient_bytes, b.transient_bytes) << s;
  }
  EXPECT_EQ(got->comm_seconds, want.comm_seconds);
  EXPECT_EQ(got->memory_limit_bytes, want.memory_limit_bytes);
}

}  // namespace
}  // namespace zbpp::sched::cli
