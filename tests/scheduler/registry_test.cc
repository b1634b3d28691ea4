#include "scheduler/registry.h"

#include <cmath>
#include <random>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/random_problem.h"

namespace zbpp::sched {
namespace {

using ::zbpp::sched::testing::RandomHeterogeneousProblem;

using ::testing::HasSubstr;

TEST(Registry, ListsEveryScheduleOfTheContract) {
  std::vector<std::string> names;
  for (const ScheduleTraits& traits : AllSchedules())
    names.push_back(traits.name);
  EXPECT_THAT(names,
              ::testing::ElementsAre("gpipe", "1f1b", "1f1b-interleaved",
                                     "zb-h1", "zb-h2", "zb-1p", "zb-2p",
                                     "zb-auto", "zb-v", "v-half", "v-min",
                                     "dualpipe-v"));
}

TEST(Registry, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<ScheduleTraits> traits = FindSchedule("zb-h3");
  EXPECT_EQ(traits.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(traits.status().message()),
              HasSubstr("unknown schedule \"zb-h3\"; known: gpipe 1f1b"));
  EXPECT_EQ(Generate("zb-h3", Problem::Uniform(2, 1, 2, VirtualStageCost{}, 0))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(Registry, FixedShapeOverAnExplicitLimitIsRefused) {
  Problem problem = Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0, 2.0);
  absl::StatusOr<Schedule> schedule = Generate("1f1b", problem);
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(schedule.status().message()),
              HasSubstr("1f1b needs 4 bytes of activations on stage 0"));
  problem.memory_limit_bytes.assign(4, 4.0);
  EXPECT_TRUE(Generate("1f1b", problem).ok());
}

TEST(Registry, WrongChunkCountIsRefused) {
  absl::StatusOr<Schedule> schedule =
      Generate("zb-v", Problem::Uniform(4, 1, 8, VirtualStageCost{}, 0));
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(schedule.status().message()),
              HasSubstr("zb-v needs chunks = 2, got 1"));
}

TEST(Registry, MbUnitFollowsPlacement) {
  Problem problem = Problem::Uniform(2, 2, 1, VirtualStageCost{}, 0);
  for (int s = 0; s < 4; ++s) problem.virtual_stages[s].m_b_bytes = 1 << s;
  EXPECT_THAT(MbUnitBytes(problem, Placement::kLoop),
              ::testing::ElementsAre(1 + 4, 2 + 8));
  EXPECT_THAT(MbUnitBytes(problem, Placement::kV),
              ::testing::ElementsAre(1 + 8, 2 + 4));
}

// Why a generator may refuse a problem; anything else is a failure.
bool RefusalIsDocumented(const std::string& name, int p, int m) {
  if (name == "zb-h2" || name == "dualpipe-v") return m < 2 * p;
  if (name == "1f1b-interleaved") return m % p != 0;
  return false;
}

TEST(RegistryProperty, EveryScheduleIsCompleteDeadlockFreeAndWithinItsLimit) {
  std::mt19937 rng(20261122);
  int generated = 0;
  for (int p : {2, 3, 4, 5, 7, 8, 13, 16, 32}) {
    std::set<int> ms = {1, 2, p - 1, p, p + 1, 2 * p, 3 * p + 1, 4 * p};
    for (int m : ms) {
      if (m < 1) continue;
      for (const ScheduleTraits& traits : AllSchedules()) {
        const Problem problem =
            RandomHeterogeneousProblem(p, traits.default_chunks, m, rng);
        SCOPED_TRACE(traits.name + " p=" + std::to_string(p) +
                     " m=" + std::to_string(m));
        absl::StatusOr<Schedule> schedule = Generate(traits.name, problem);
        if (!schedule.ok()) {
          EXPECT_EQ(schedule.status().code(),
                    absl::StatusCode::kInvalidArgument);
          EXPECT_TRUE(RefusalIsDocumented(traits.name, p, m))
              << schedule.status();
          continue;
        }
        ++generated;
        absl::StatusOr<SimulationResult> result = Simulate(problem, *schedule);
        ASSERT_TRUE(result.ok()) << result.status();
        EXPECT_GE(result->bubble_rate, 0.0);
        EXPECT_LT(result->bubble_rate, 1.0);
        const double limit_m_b = traits.default_limit_m_b(p, m);
        if (traits.limit_is_input && !std::isinf(limit_m_b)) {
          const std::vector<double> unit =
              MbUnitBytes(problem, traits.placement);
          for (int w = 0; w < p; ++w) {
            EXPECT_LE(result->peak_memory_bytes[w],
                      limit_m_b * unit[w] * (1 + 1e-9))
                << "stage " << w;
          }
        }
      }
    }
  }
  EXPECT_GT(generated, 500);
}

}  // namespace
}  // namespace zbpp::sched
