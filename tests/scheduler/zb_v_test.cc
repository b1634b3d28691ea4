// V-placed schedules: ZB-V (Zero Bubble paper §6) and V-Half / V-Min
// ("Pipeline Parallelism with Controllable Memory", arXiv 2405.15362).
#include "scheduler/zb_v.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/baselines.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;

// Two chunks per stage, each with half of a virtual stage's uniform cost.
Problem UniformV(int p, int m, double m_w_share) {
  return Problem::Uniform(p, 2, m, VirtualStageCost{1, 1, 1, 0.5, 0.5 * m_w_share}, 0);
}

SimulationResult Simulated(const Problem& problem, VShape shape) {
  const absl::StatusOr<Schedule> schedule = GenerateVSchedule(problem, shape);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (!schedule.ok()) return {};
  absl::StatusOr<SimulationResult> result = Simulate(problem, *schedule);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimulationResult{};
}

TEST(VShapeLimit, FollowsTheControllableMemoryPaper) {
  // p, ZB-V, V-Half floor((p+2)/2), V-Min floor((p+4)/3).
  const int kExpected[][4] = {{1, 1, 1, 1},     {2, 2, 2, 2},    {4, 4, 3, 2},
                              {6, 6, 4, 3},     {8, 8, 5, 4},    {16, 16, 9, 6},
                              {32, 32, 17, 12}, {64, 64, 33, 22}};
  for (const auto& row : kExpected) {
    EXPECT_EQ(VShapeLimitMb(VShape::kZbV, row[0]), row[1]) << "p=" << row[0];
    EXPECT_EQ(VShapeLimitMb(VShape::kHalf, row[0]), row[2]) << "p=" << row[0];
    EXPECT_EQ(VShapeLimitMb(VShape::kMin, row[0]), row[3]) << "p=" << row[0];
  }
  EXPECT_EQ(VShapeLimitMb(VShape::kMin, 0), 0);
}

TEST(ZbV, ZeroBubbleAtOneF1BMemoryForEqualPasses) {
  for (int p : {2, 3, 4, 5, 8, 16}) {
    for (int m : {2 * p, 3 * p, 4 * p}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const SimulationResult result =
          Simulated(UniformV(p, m, 0.5), VShape::kZbV);
      EXPECT_LT(result.bubble_rate, 1e-9);
      EXPECT_LE(result.max_peak_memory_m_b, p + 1e-9);
    }
  }
}

TEST(VHalfAndVMin, FitTheirLimitsBelowZbVAndBeat1F1B) {
  for (double m_w_share : {0.5, 1.0}) {  // 1.0: the paper's memory model
    for (int p : {4, 6, 8, 12, 16, 24, 32}) {
      for (int m : {p, 2 * p, 4 * p}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " M_W/M_B=" + std::to_string(m_w_share));
        const Problem problem = UniformV(p, m, m_w_share);
        const SimulationResult zb_v = Simulated(problem, VShape::kZbV);
        // 1F1B on the same model, one virtual stage per stage.
        const Problem loop =
            Problem::Uniform(p, 1, m, VirtualStageCost{2, 2, 2, 1, m_w_share}, 0);
        const double one_f_one_b =
            Simulate(loop, *Generate1F1B(loop))->bubble_rate;
        for (VShape shape : {VShape::kHalf, VShape::kMin}) {
          const SimulationResult result = Simulated(problem, shape);
          EXPECT_LE(result.max_peak_memory_m_b, VShapeLimitMb(shape, p) + 1e-9);
          EXPECT_LT(result.max_peak_memory_m_b, zb_v.max_peak_memory_m_b - 0.5);
          EXPECT_LT(result.bubble_rate, one_f_one_b);
        }
      }
    }
  }
}

TEST(VShapes, RegistryNamesAndLimits) {
  const Problem problem = UniformV(8, 24, 0.5);
  for (const char* name : {"zb-v", "v-half", "v-min"}) {
    const absl::StatusOr<Schedule> schedule = Generate(name, problem);
    ASSERT_TRUE(schedule.ok()) << name << ": " << schedule.status();
    EXPECT_EQ(schedule->name, name);
    EXPECT_EQ(schedule->stage_of, PlaceVirtualStages(Placement::kV, 8, 2));
  }
}

TEST(VShapes, ServeFewMicrobatches) {
  for (int m = 1; m <= 5; ++m) {
    for (VShape shape : {VShape::kZbV, VShape::kHalf, VShape::kMin}) {
      const SimulationResult result = Simulated(UniformV(4, m, 0.5), shape);
      EXPECT_LE(result.max_peak_memory_m_b, VShapeLimitMb(shape, 4) + 1e-9);
    }
  }
}

TEST(VShapes, RefuseOtherChunkCounts) {
  const absl::StatusOr<Schedule> schedule = GenerateVSchedule(
      Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0), VShape::kHalf);
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(schedule.status().message()),
              HasSubstr("v-half needs chunks = 2 (the V placement), got 1"));
}

}  // namespace
}  // namespace zbpp::sched
