// Merged pairs (a B with its whole W right after it on one stage): what the
// simulator charges them, what the timelines draw, and the solvers' merge
// step (scheduler/merge_backward.h).

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/export_trace.h"
#include "scheduler/merge_backward.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::sched {
namespace {

using testing::ScheduleFromRows;

// p = 2, m = 1: each stage runs F, B, W of its virtual stage; T_F = T_B =
// T_W = 1, no communication.
Schedule TwoStagesOneMicrobatch() {
  return ScheduleFromRows("pairs", 2, 1, 1, Placement::kLoop,
                          {{"0F0", "0I0", "0W0"}, {"1F0", "1I0", "1W0"}});
}

TEST(MergedPairs, OnlyAWholeWRightAfterItsBMerges) {
  // The predicates read one list; it need not be a whole schedule.
  const Schedule s = ScheduleFromRows(
      "rows", 1, 1, 4, Placement::kLoop,
      {{"0F0", "0F1", "0F2", "0I0", "0W0", "0I1", "0F3", "0W1", "0I2", "0W2@0", "0W2@1"}});
  const std::vector<Action>& a = s.actions[0];
  EXPECT_TRUE(MergesWithNext(a, 3));       // 0I0 0W0
  EXPECT_FALSE(MergesWithNext(a, 5));      // 0I1, then an F
  EXPECT_FALSE(MergesWithNext(a, 8));      // 0I2, then a partial W
  EXPECT_TRUE(MergedIntoPrevious(a, 4));
  EXPECT_FALSE(MergedIntoPrevious(a, 7));
  EXPECT_EQ(TimelineUnit(a, 3), (Action{PassKind::kBW, VirtualStage(0), 0}));
  EXPECT_EQ(TimelineUnit(a, 5), a[5]);
  EXPECT_EQ(CountMergedPairs(s.actions), 1);
}

TEST(MergedPairs, WithoutAMeasuredFusedCostTimesAreThoseOfBThenW) {
  const Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{}, 0.0);
  absl::StatusOr<SimulationResult> sim = Simulate(problem, TwoStagesOneMicrobatch());
  ASSERT_TRUE(sim.ok()) << sim.status();
  // Stage 1: F [1, 2], the merged pass [2, 4]: its B part [2, 3], whose
  // input gradient leaves at 3, its W part [3, 4]; stage 0's pass is [3, 5].
  EXPECT_DOUBLE_EQ(sim->timings[1][1].start_seconds, 2);
  EXPECT_DOUBLE_EQ(sim->timings[1][1].end_seconds, 3);
  EXPECT_DOUBLE_EQ(sim->timings[1][2].start_seconds, 3);
  EXPECT_DOUBLE_EQ(sim->timings[1][2].end_seconds, 4);
  EXPECT_DOUBLE_EQ(sim->timings[0][1].start_seconds, 3);
  EXPECT_DOUBLE_EQ(sim->makespan_seconds, 5);
  EXPECT_DOUBLE_EQ(sim->busy_seconds[0], 3);
}

TEST(MergedPairs, ChargeTheFusedCostAndSendAfterTheBPart) {
  VirtualStageCost cost;
  cost.bw_seconds = 1.5;
  const Problem problem = Problem::Uniform(2, 1, 1, cost, 0.0);
  absl::StatusOr<SimulationResult> sim = Simulate(problem, TwoStagesOneMicrobatch());
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_DOUBLE_EQ(sim->timings[1][1].end_seconds, 3);
  EXPECT_DOUBLE_EQ(sim->timings[1][2].end_seconds, 3.5);
  EXPECT_DOUBLE_EQ(sim->timings[0][1].start_seconds, 3);
  EXPECT_DOUBLE_EQ(sim->timings[0][1].end_seconds, 4);
  EXPECT_DOUBLE_EQ(sim->timings[0][2].end_seconds, 4.5);
  EXPECT_DOUBLE_EQ(sim->makespan_seconds, 4.5);
  EXPECT_DOUBLE_EQ(sim->busy_seconds[0], 2.5);
}

TEST(MergedPairs, AnExplicitBwCostsTheFusedCost) {
  VirtualStageCost cost;
  cost.bw_seconds = 1.25;
  const Problem problem = Problem::Uniform(1, 1, 1, cost, 0.0);
  absl::StatusOr<SimulationResult> sim =
      Simulate(problem, ScheduleFromRows("bw", 1, 1, 1, Placement::kLoop, {{"0F0", "0B0"}}));
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_DOUBLE_EQ(sim->makespan_seconds, 2.25);
}

TEST(MergedPairs, TheTraceDrawsOneBwUnit) {
  const Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{}, 0.0);
  const Schedule schedule = TwoStagesOneMicrobatch();
  absl::StatusOr<SimulationResult> sim = Simulate(problem, schedule);
  ASSERT_TRUE(sim.ok());
  const std::string trace = ToChromeTrace(schedule, *sim);
  EXPECT_NE(trace.find("\"1B0\""), std::string::npos) << trace;
  // The unit spans the pass: 2 s long (dur in microseconds).
  EXPECT_NE(trace.find("\"dur\":2000000.0"), std::string::npos) << trace;
  EXPECT_EQ(trace.find("\"1W0\""), std::string::npos) << trace;
  EXPECT_EQ(trace.find("\"1I0\""), std::string::npos) << trace;
}

TEST(MergedPairs, NegativeFusedCostIsRefusedNamingTheField) {
  VirtualStageCost cost;
  cost.bw_seconds = -1;
  const absl::Status st = Problem::Uniform(2, 1, 2, cost, 0.0).Validate();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("virtual_stages[0].bw_seconds"), std::string::npos) << st;
}

// Where T_BW = T_B + T_W no generator changes: the paper-table and solver
// tests pin today's makespans, and a measured T_BW equal to T_B + T_W
// produces the very schedules an unmeasured one does.
TEST(MergeBackwards, FusedCostEqualToBPlusWChangesNoSchedule) {
  for (const ScheduleTraits& t : AllSchedules()) {
    for (int p : {2, 4}) {
      VirtualStageCost plain{1.0, 1.2, 0.7, 1.0, 0.5};
      VirtualStageCost equal = plain;
      equal.bw_seconds = plain.b_seconds + plain.w_seconds;
      absl::StatusOr<Schedule> a =
          Generate(t.name, Problem::Uniform(p, t.default_chunks, 3 * p, plain, 0.1));
      absl::StatusOr<Schedule> b =
          Generate(t.name, Problem::Uniform(p, t.default_chunks, 3 * p, equal, 0.1));
      ASSERT_EQ(a.ok(), b.ok()) << t.name;
      if (a.ok()) EXPECT_EQ(*a, *b) << t.name << " p=" << p;
    }
  }
}

// With a cheaper fused backward the automatic solvers keep W passes next to
// their B where that does not lengthen the step: never a longer makespan
// than the plan without merges under the same costs, never over the
// memory limit, and more merged pairs.
TEST(MergeBackwards, CheaperFusedBackwardNeverLengthensAndMergesMore) {
  for (const std::string name : {"zb-1p", "zb-2p", "zb-auto", "zb-v"}) {
    const ScheduleTraits t = *FindSchedule(name);
    for (int p : {2, 4}) {
      VirtualStageCost cost{1.0, 1.0, 1.0, 1.0, 0.5};
      cost.bw_seconds = 1.6;
      const Problem problem = Problem::Uniform(p, t.default_chunks, 3 * p, cost, 0.05);
      Problem unmeasured = problem;
      for (VirtualStageCost& c : unmeasured.virtual_stages) c.bw_seconds = 0;
      absl::StatusOr<Schedule> plain = Generate(name, unmeasured);
      absl::StatusOr<Schedule> merged = Generate(name, problem);
      ASSERT_TRUE(plain.ok() && merged.ok()) << name;
      absl::StatusOr<SimulationResult> before = Simulate(problem, *plain);
      absl::StatusOr<SimulationResult> after = Simulate(problem, *merged);
      ASSERT_TRUE(before.ok() && after.ok());
      EXPECT_LE(after->makespan_seconds, before->makespan_seconds * (1 + 1e-12))
          << name << " p=" << p;
      EXPECT_LE(after->max_peak_memory_m_b, before->max_peak_memory_m_b + 1e-9)
          << name << " p=" << p;
      EXPECT_GE(CountMergedPairs(merged->actions), CountMergedPairs(plain->actions))
          << name << " p=" << p;
    }
  }
}

TEST(MergeBackwards, MovesAWNextToItsBWhenThatShortensTheStep) {
  // One stage, two microbatches: F0 F1 B0 B1 W0 W1 holds W0 back; with a
  // fused pass cheaper than B + W, W0 next to B0 saves the difference.
  VirtualStageCost cost;
  cost.bw_seconds = 1.5;
  const Problem problem = Problem::Uniform(1, 1, 2, cost, 0.0);
  const Schedule apart = ScheduleFromRows("apart", 1, 1, 2, Placement::kLoop,
                                          {{"0F0", "0F1", "0I0", "0I1", "0W0", "0W1"}});
  absl::StatusOr<Schedule> merged = MergeBackwards(problem, apart);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->actions[0],
            ScheduleFromRows("m", 1, 1, 2, Placement::kLoop,
                             {{"0F0", "0F1", "0I0", "0W0", "0I1", "0W1"}})
                .actions[0]);
  absl::StatusOr<SimulationResult> sim = Simulate(problem, *merged);
  ASSERT_TRUE(sim.ok());
  EXPECT_DOUBLE_EQ(sim->makespan_seconds, 5);
  // Without a measured T_BW nothing moves.
  absl::StatusOr<Schedule> same =
      MergeBackwards(Problem::Uniform(1, 1, 2, VirtualStageCost{}, 0.0), apart);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, apart);
}

}  // namespace
}  // namespace zbpp::sched
