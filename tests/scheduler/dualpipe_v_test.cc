// DualPipeV (DeepSeek-V3 technical report §3.2.1, "cut in half" as
// deepseek-ai/DualPipe and PyTorch's ScheduleDualPipeV run it); the phases
// are those listed in scheduler/dualpipe_v.h.
#include "scheduler/dualpipe_v.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/random_problem.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;
using ::zbpp::sched::testing::RandomHeterogeneousProblem;

// Two chunks per stage; every pass of a chunk takes `t` seconds and a
// chunk's M_B is 1/2 byte, so one M_B unit (a stage's two chunks) is 1.
Problem UniformV(int p, int m, double t, double m_w_share) {
  return Problem::Uniform(p, 2, m, VirtualStageCost{t, t, t, 0.5, 0.5 * m_w_share},
                          0);
}

std::string Order(const std::vector<Action>& actions) {
  std::string text;
  for (const Action& a : actions) {
    if (!text.empty()) text += ' ';
    text += ActionToString(a);
  }
  return text;
}

TEST(DualPipeV, OrdersFollowThePhasesOfTheHeader) {
  // p = 2, m = 4, stage 0 holds virtual stages 0 and 3, stage 1 virtual stages 1 and 2.
  // Written out by hand from the eight phases (I = input gradient, B = fused
  // backward, as PyTorch writes them). Stage 0 (r = 0: 2 warm-up F's,
  // 1 pair, 1 zero-bubble triple, m-2p+1 = 1 steady iteration, 1 phase-5
  // triple, 2 phase-6 backwards of which the last is split, 1 (W, I_0),
  // 1 W). Stage 1 (r = 1: no phase 1, 3, 5 or 7; 2 pairs, 2 steady
  // iterations, 4 phase-6 backwards of which the last two are split).
  const absl::StatusOr<Schedule> schedule =
      GenerateDualPipeV(UniformV(2, 4, 1, 0.5));
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  EXPECT_EQ(Order(schedule->actions[0]),
            "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 "
            "0W2 0I3 0W3");
  EXPECT_EQ(Order(schedule->actions[1]),
            "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 "
            "2W3 1W3");
  EXPECT_EQ(schedule->stage_of, PlaceVirtualStages(Placement::kV, 2, 2));
}

TEST(DualPipeV, SplitsBackwardOnlyInItsZeroBubblePhases) {
  // Stage r splits p-1-r backwards of chunk 1 in phase 3, r+1 in phase 6
  // and p-1-r of chunk 0 in phase 7: 2p-1-r in all, each followed later by
  // its W; the other 2m-(2p-1-r) backwards are fused.
  for (int p : {1, 2, 3, 5, 8}) {
    const int m = 3 * p + 1;
    const absl::StatusOr<Schedule> schedule =
        GenerateDualPipeV(UniformV(p, m, 1, 0.5));
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    for (int r = 0; r < p; ++r) {
      std::map<PassKind, int> count;
      for (const Action& a : schedule->actions[r]) ++count[a.kind];
      SCOPED_TRACE("p=" + std::to_string(p) + " r=" + std::to_string(r));
      EXPECT_EQ(count[PassKind::kF], 2 * m);
      EXPECT_EQ(count[PassKind::kB], 2 * p - 1 - r);
      EXPECT_EQ(count[PassKind::kW], 2 * p - 1 - r);
      EXPECT_EQ(count[PassKind::kBW], 2 * m - (2 * p - 1 - r));
    }
  }
}

TEST(DualPipeV, CompleteAndDeadlockFreeForHeterogeneousCostsAndLatency) {
  // The simulator refuses missing or duplicate passes, W before its B and
  // virtual stages on the wrong stage, and reports deadlocks.
  std::mt19937 rng(20261125);
  for (int p : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (int m : {2 * p, 2 * p + 1, 3 * p, 4 * p + 3}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const Problem problem = RandomHeterogeneousProblem(p, 2, m, rng);
      const absl::StatusOr<Schedule> schedule = GenerateDualPipeV(problem);
      ASSERT_TRUE(schedule.ok()) << schedule.status();
      EXPECT_TRUE(Simulate(problem, *schedule).ok());
    }
  }
}

TEST(DualPipeV, BubbleAndMemoryOfItsShapeForEqualPasses) {
  // T_F = T_B = T_W = T per chunk, no communication. Each stage runs
  // 2m(T_F+T_B+T_W) = 6mT of passes. Stage r receives its first input
  // after the r forwards of the stages before it (it starts at rT) and
  // from then on idles only in phase 5. Chunk 0's input gradients climb
  // from stage p-1, which emits one per steady iteration (F_0, B_1, F_1,
  // B_0: 6T) for microbatches 0 .. m-p-1 (its m-p phase-4 iterations);
  // stage r's phase 5 consumes microbatches m-2p+r+1 .. m-p-1 of them, all
  // in that range, at one per (B_1, F_1, B_0): 5T of passes, so each of its
  // p-1-r phase-5 iterations idles T. Every stage ends at
  // rT + 6mT + (p-1-r)T, so the makespan (stage 0's span) is
  // 6mT + (p-1)T and the bubble rate (p-1)/(6m+p-1). DualPipe's README gives (PP/2-1)(F&B+B-3W) for
  // overlapped F&B chunks; zbpp runs them one after the other.
  //
  // Memory (units of M_B, a stage's two chunks; one chunk is 1/2): after
  // phases 1-2 stage r holds 2(p-1-r) + 2(r+1) = 2p chunk activations;
  // phase 3 frees one (I then W) per one it adds (F_1); phase 4's first F_0
  // adds the (2p+1)-th before its fused B_1 frees one. Peak (2p+1)/2 =
  // p + 1/2 on every stage, whatever M_W is (I frees M_B - M_W, its W the
  // rest, both before the next F).
  for (double m_w_share : {0.5, 1.0}) {
    for (int p : {1, 2, 3, 4, 6, 8, 16}) {
      for (int m : {2 * p, 3 * p, 4 * p + 1}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " M_W/M_B=" + std::to_string(m_w_share));
        const double t = 0.5;
        const Problem problem = UniformV(p, m, t, m_w_share);
        const absl::StatusOr<Schedule> schedule = GenerateDualPipeV(problem);
        ASSERT_TRUE(schedule.ok()) << schedule.status();
        const absl::StatusOr<SimulationResult> sim =
            Simulate(problem, *schedule);
        ASSERT_TRUE(sim.ok()) << sim.status();
        EXPECT_NEAR(sim->makespan_seconds, 6 * m * t + (p - 1) * t, 1e-9);
        EXPECT_NEAR(sim->bubble_rate,
                    (p - 1) / static_cast<double>(6 * m + p - 1), 1e-12);
        for (int r = 0; r < p; ++r) {
          EXPECT_NEAR(sim->peak_memory_m_b[r], p + 0.5, 1e-9) << "stage " << r;
        }
      }
    }
  }
}

TEST(DualPipeV, NeedsTwoChunksAndTwiceAsManyMicrobatchesAsStages) {
  absl::StatusOr<Schedule> schedule = GenerateDualPipeV(UniformV(4, 7, 1, 0.5));
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(schedule.status().message()),
              HasSubstr("dualpipe-v needs microbatches >= 2 * stages (8), got 7"));
  schedule = GenerateDualPipeV(Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0));
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(schedule.status().message()),
              HasSubstr("dualpipe-v needs chunks = 2, got 1"));
}

TEST(DualPipeV, RegisteredAsAFixedVShape) {
  const absl::StatusOr<ScheduleTraits> traits = FindSchedule("dualpipe-v");
  ASSERT_TRUE(traits.ok()) << traits.status();
  EXPECT_EQ(traits->default_chunks, 2);
  EXPECT_TRUE(traits->chunks_fixed);
  EXPECT_EQ(traits->placement, Placement::kV);
  EXPECT_FALSE(traits->limit_is_input);
  // A fixed shape is only checked against a limit: p + 1/2 M_B fits,
  // anything below is refused naming the need.
  Problem problem = UniformV(4, 8, 1, 0.5);
  problem.memory_limit_bytes.assign(4, 4.5);
  const absl::StatusOr<Schedule> fits = Generate("dualpipe-v", problem);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->name, "dualpipe-v");
  problem.memory_limit_bytes.assign(4, 4.4);
  const absl::StatusOr<Schedule> refused = Generate("dualpipe-v", problem);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("dualpipe-v needs 4.5 bytes"));
}

}  // namespace
}  // namespace zbpp::sched
