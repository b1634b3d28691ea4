// The runtime's per-pass overhead in the cost model (coordinator/core/
// cost_model.h): how a stage's measured overhead becomes a time per pass,
// how the medians enter the problem the solver and the simulator see, and
// how a prediction counts that time as idle, as a worker's measured
// bubble does.

#include <limits>
#include <memory>
#include <vector>

#include "coordinator/core/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

using sched::Action;
using sched::PassKind;
using ::testing::HasSubstr;

// Two virtual stages, a window of three steps.
class CostModelOverhead : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CostModel>> created =
        CostModel::Create({.num_virtual_stages = 2, .window_steps = 3});
    ASSERT_TRUE(created.ok()) << created.status();
    model_ = *std::move(created);
  }
  std::unique_ptr<CostModel> model_;
};

sched::Schedule MustGenerate(const char* name, const sched::Problem& problem) {
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *schedule;
}

TEST(PassOverheadSeconds, CountsEachPassByTheFBWItStandsFor) {
  // One stage, one virtual stage, two microbatches: F F B W, then BW's
  // fused backward for the second, a reduction, and a W in two buckets.
  sched::Schedule schedule;
  schedule.stages = 1;
  schedule.microbatches = 2;
  schedule.stage_of = {0};
  const VirtualStage v0(0);
  schedule.actions = {{{PassKind::kF, v0, 0}, {PassKind::kF, v0, 1}, {PassKind::kB, v0, 0},
                       {PassKind::kW, v0, 0}, {PassKind::kBW, v0, 1}, {PassKind::kReduce, v0, 0}}};
  // F, F, B, W count one each, BW two, the reduction none: 6 units.
  EXPECT_DOUBLE_EQ(PassOverheadSeconds(schedule, 0, 1.2), 0.2);
  // W in two buckets: W@0 and W@1 count half each.
  schedule.actions[0][3] = {PassKind::kW, v0, 0, 0};
  schedule.actions[0].insert(schedule.actions[0].begin() + 4, Action{PassKind::kW, v0, 0, 1});
  EXPECT_DOUBLE_EQ(PassOverheadSeconds(schedule, 0, 1.2), 0.2);
  // A stage outside the schedule, or without passes, has no overhead.
  EXPECT_DOUBLE_EQ(PassOverheadSeconds(schedule, 1, 1.2), 0);
  schedule.actions[0] = {{PassKind::kReduce, v0, 0}};
  EXPECT_DOUBLE_EQ(PassOverheadSeconds(schedule, 0, 1.2), 0);
}

TEST(PassOverheadSeconds, FusedAndSplitSchedulesPayTheSameOverheadPerMicrobatch) {
  const sched::Problem problem =
      sched::Problem::Uniform(2, 1, 4, sched::VirtualStageCost{}, 0.0);
  // 1F1B's 4 F + 4 BW and ZB-H1's 4 F + 4 B + 4 W are 12 units each.
  for (const char* name : {"1f1b", "zb-h1"}) {
    EXPECT_DOUBLE_EQ(PassOverheadSeconds(MustGenerate(name, problem), 1, 0.6), 0.05) << name;
  }
}

TEST_F(CostModelOverhead, MediansAreAddedToEveryPassOfTheirVirtualStage) {
  CostModel* model = model_.get();
  const sched::Problem base = sched::Problem::Uniform(2, 1, 4, sched::VirtualStageCost{}, 0.25);
  for (int s = 0; s < 2; ++s) ASSERT_TRUE(model->AddVirtualStageTiming({s, 1.0, 2.0, 0.5}).ok());
  // No overhead measured: the passes as measured, and zeros.
  absl::StatusOr<sched::Problem> bare = model->ToProblem(base);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_DOUBLE_EQ(bare->virtual_stages[1].f_seconds, 1.0);
  EXPECT_EQ(model->PassOverheads(), (std::vector<double>{0, 0}));

  // Virtual stage 1 only; one outlier does not move the median.
  for (double seconds : {0.01, 0.5, 0.02}) ASSERT_TRUE(model->AddPassOverhead(1, seconds).ok());
  EXPECT_EQ(model->PassOverheads(), (std::vector<double>{0, 0.02}));
  absl::StatusOr<sched::Problem> measured = model->ToProblem(base);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_DOUBLE_EQ(measured->virtual_stages[0].f_seconds, 1.0);
  EXPECT_DOUBLE_EQ(measured->virtual_stages[0].w_seconds, 0.5);
  EXPECT_DOUBLE_EQ(measured->virtual_stages[1].f_seconds, 1.02);
  EXPECT_DOUBLE_EQ(measured->virtual_stages[1].b_seconds, 2.02);
  EXPECT_DOUBLE_EQ(measured->virtual_stages[1].w_seconds, 0.52);
  // The window slides: three new samples replace the old ones.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model->AddPassOverhead(1, 0.1).ok());
  EXPECT_DOUBLE_EQ(model->ToProblem(base)->virtual_stages[1].f_seconds, 1.1);
}

TEST_F(CostModelOverhead, BadSamplesAreRefusedAndNothingIsKept) {
  CostModel* model = model_.get();
  EXPECT_THAT(model->AddPassOverhead(2, 0.1).message(), HasSubstr("virtual stage 2 outside"));
  EXPECT_THAT(model->AddPassOverhead(-1, 0.1).message(), HasSubstr("outside [0, 2)"));
  const absl::Status negative = model->AddPassOverhead(0, -1e-3);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("virtual stage 0 pass overhead"));
  EXPECT_FALSE(model->AddPassOverhead(1, std::numeric_limits<double>::infinity()).ok());
  EXPECT_EQ(model->PassOverheads(), (std::vector<double>{0, 0}));
}

TEST(CountOverheadAsIdle, BusyIsThePassesAloneUnderTheLongerMakespan) {
  const sched::VirtualStageCost pass{.f_seconds = 1.0, .b_seconds = 1.0, .w_seconds = 1.0};
  const sched::Problem bare = sched::Problem::Uniform(4, 1, 8, pass, 0.0);
  const sched::Schedule schedule = MustGenerate("zb-h1", bare);
  const std::vector<double> overhead = {0.1, 0.2, 0.1, 0.3};
  sched::Problem paid = bare;
  for (int s = 0; s < 4; ++s) {
    paid.virtual_stages[s].f_seconds += overhead[s];
    paid.virtual_stages[s].b_seconds += overhead[s];
    paid.virtual_stages[s].w_seconds += overhead[s];
  }
  absl::StatusOr<sched::SimulationResult> sim = sched::Simulate(paid, schedule);
  ASSERT_TRUE(sim.ok()) << sim.status();
  const double makespan = sim->makespan_seconds;
  const double bubble_as_busy = sim->bubble_rate;
  CountOverheadAsIdle(schedule, overhead, *sim);

  // Each stage runs 8 F, B and W of 1 s of work: 24 s busy, whatever it
  // paid around them.
  EXPECT_DOUBLE_EQ(sim->makespan_seconds, makespan);
  for (int w = 0; w < 4; ++w) {
    EXPECT_NEAR(sim->busy_seconds[w], 24.0, 1e-9) << w;
    EXPECT_NEAR(sim->idle_seconds[w], makespan - 24.0, 1e-9) << w;
  }
  EXPECT_NEAR(sim->bubble_rate, 1 - 24.0 / makespan, 1e-12);
  EXPECT_GT(sim->bubble_rate, bubble_as_busy + 0.05);
  // Without an overhead measured, nothing changes.
  absl::StatusOr<sched::SimulationResult> plain = sched::Simulate(bare, schedule);
  const double plain_bubble = plain->bubble_rate;
  CountOverheadAsIdle(schedule, {}, *plain);
  EXPECT_DOUBLE_EQ(plain->bubble_rate, plain_bubble);
}

}  // namespace
}  // namespace zbpp::coordinator
