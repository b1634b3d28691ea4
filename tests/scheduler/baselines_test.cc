// Analytic bubbles of the fixed schedules (Qi et al. 2024, §2): exact for
// uniform costs and no communication.
#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/baselines.h"
#include "scheduler/simulator.h"
#include "scheduler/zb_handcrafted.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;

constexpr double kF = 1.0, kB = 1.2, kW = 0.7;  // T_W <= T_F + T_B, 2T_W too

// Bubble in seconds: makespan minus one stage's work.
double Bubble(const Problem& problem, const Schedule& schedule,
              double work_per_stage) {
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->makespan_seconds - work_per_stage : -1;
}

class AnalyticGrid : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(AnalyticGrid, OneChunkSchedulesMatchTheirFormulas) {
  const auto [p, m] = GetParam();
  const Problem problem =
      Problem::Uniform(p, 1, m, VirtualStageCost{kF, kB, kW, 1, 0.5}, 0);
  const double work = m * (kF + kB + kW);
  EXPECT_NEAR(Bubble(problem, *GenerateGPipe(problem), work),
              (p - 1) * (kF + kB + kW), 1e-9);
  EXPECT_NEAR(Bubble(problem, *Generate1F1B(problem), work),
              (p - 1) * (kF + kB + kW), 1e-9);
  if (m >= p) {  // ZB-H1 needs p microbatches in flight to fill its cool-down
    EXPECT_NEAR(Bubble(problem, *GenerateZbH1(problem), work),
                (p - 1) * (kF + kB - kW), 1e-9);
  }
  if (m >= 2 * p) {
    EXPECT_NEAR(Bubble(problem, *GenerateZbH2(problem), work),
                (p - 1) * (kF + kB - 2 * kW), 1e-9);
  }
}

TEST_P(AnalyticGrid, InterleavedDividesTheBubbleByChunks) {
  const auto [p, m] = GetParam();
  if (m % p != 0) GTEST_SKIP() << "interleaving needs m to be a multiple of p";
  for (int v : {2, 3, 4}) {
    const Problem problem = Problem::Uniform(
        p, v, m, VirtualStageCost{kF / v, kB / v, kW / v, 1.0 / v, 0.5 / v}, 0);
    EXPECT_NEAR(Bubble(problem, *GenerateInterleaved1F1B(problem),
                       m * (kF + kB + kW)),
                (p - 1) * (kF + kB + kW) / v, 1e-9)
        << "v=" << v;
  }
}

TEST_P(AnalyticGrid, PeakMemoryMatchesTheShape) {
  const auto [p, m] = GetParam();
  const Problem problem =
      Problem::Uniform(p, 1, m, VirtualStageCost{kF, kB, kW, 1, 0.5}, 0);
  EXPECT_DOUBLE_EQ(Simulate(problem, *GenerateGPipe(problem))->max_peak_memory_m_b, m);
  EXPECT_DOUBLE_EQ(Simulate(problem, *Generate1F1B(problem))->max_peak_memory_m_b,
                   std::min(p, m));
  EXPECT_DOUBLE_EQ(Simulate(problem, *GenerateZbH1(problem))->max_peak_memory_m_b,
                   std::min(p, m));
  if (m >= 2 * p) {
    EXPECT_DOUBLE_EQ(
        Simulate(problem, *GenerateZbH2(problem))->max_peak_memory_m_b,
        2 * p - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(
    PipelineSizes, AnalyticGrid,
    ::testing::Values(std::pair{2, 1}, std::pair{2, 4}, std::pair{2, 7},
                      std::pair{3, 3}, std::pair{3, 6}, std::pair{3, 10},
                      std::pair{4, 4}, std::pair{4, 8}, std::pair{4, 16},
                      std::pair{5, 12}, std::pair{8, 8}, std::pair{8, 16},
                      std::pair{8, 24}, std::pair{8, 64}, std::pair{16, 32},
                      std::pair{16, 48}, std::pair{32, 64},
                      std::pair{32, 128}));

TEST(Baselines, ZbH1UsesOneCompleteOrderPerStage) {
  const Problem problem = Problem::Uniform(4, 1, 6, VirtualStageCost{}, 0);
  absl::StatusOr<Schedule> schedule = GenerateZbH1(problem);
  ASSERT_TRUE(schedule.ok());
  // Stage 3 (last) runs F B alternately and defers 3 W's to the end.
  std::string last;
  for (const Action& a : schedule->actions[3]) last += ActionToString(a) + " ";
  EXPECT_EQ(last,
            "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 "
            "3W3 3W4 3W5 ");
}

TEST(Baselines, RefusalsSayWhy) {
  const Problem two_chunks = Problem::Uniform(4, 2, 8, VirtualStageCost{}, 0);
  for (auto* generate : {&GenerateGPipe, &Generate1F1B, &GenerateZbH1,
                         &GenerateZbH2}) {
    absl::StatusOr<Schedule> s = generate(two_chunks);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()),
                HasSubstr("needs chunks = 1, got 2"));
  }
  absl::StatusOr<Schedule> h2 =
      GenerateZbH2(Problem::Uniform(4, 1, 7, VirtualStageCost{}, 0));
  EXPECT_EQ(h2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(h2.status().message()),
              HasSubstr("zb-h2 needs microbatches >= 2 * stages (8)"));
  absl::StatusOr<Schedule> interleaved =
      GenerateInterleaved1F1B(Problem::Uniform(4, 2, 6, VirtualStageCost{}, 0));
  EXPECT_THAT(std::string(interleaved.status().message()),
              HasSubstr("multiple of stages (4), got 6"));
  EXPECT_THAT(std::string(GenerateInterleaved1F1B(
                              Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0))
                              .status()
                              .message()),
              HasSubstr("needs chunks >= 2"));
}

}  // namespace
}  // namespace zbpp::sched
