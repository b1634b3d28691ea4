// AddVocabularyPasses (scheduler/vocabulary_passes.h): every registry
// schedule at p = 2 and 4 gets its S and T passes, stays well formed,
// deadlock-free over order-matched transports, and with a head-dominated
// last virtual stage runs shorter than with the head computed on one stage.

#include "scheduler/vocabulary_passes.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/comm_order.h"
#include "scheduler/problem.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;
using ::zbpp::sched::testing::ScheduleFromRows;

// The head-dominated model of these tests: blocks of F = B = W = 1 s, M_B =
// 1 byte, M_W = 0.5, one hop 0.1 s. The LM head and loss cost F 2 s, B 1 s and
// W 1 s: 4 s per microbatch, on the last virtual stage's stage when
// unsharded (`Unsharded`), or divided by vocabulary over the p stages as
// S = T = 2/p s each (`Sharded`, whose last virtual stage is a plain block),
// every stage's S holding 0.5 bytes until its T.
constexpr double kComm = 0.1;
constexpr double kHeadSeconds = 4;

Problem Sharded(int p, int v, int m) {
  Problem problem = Problem::Uniform(p, v, m, VirtualStageCost{1, 1, 1, 1, 0.5}, kComm);
  problem.vocabulary.assign(static_cast<size_t>(p),
                            VocabularyCost{kHeadSeconds / 2 / p, kHeadSeconds / 2 / p, 0.5, 0});
  return problem;
}

Problem Unsharded(int p, int v, int m) {
  Problem problem = Problem::Uniform(p, v, m, VirtualStageCost{1, 1, 1, 1, 0.5}, kComm);
  VirtualStageCost& head = problem.virtual_stages.back();
  head.f_seconds += 2;
  head.b_seconds += 1;
  head.w_seconds += 1;
  return problem;
}

TEST(AddVocabularyPasses, EveryRegistryScheduleGetsItsPassesAndRunsShorter) {
  std::set<std::string> names;
  for (const ScheduleTraits& traits : AllSchedules()) {
    for (int p : {2, 4}) {
      const int m = 2 * p, v = traits.default_chunks;
      const std::string name = absl::StrCat(traits.name, " p=", p, " m=", m);
      Problem unsharded = Unsharded(p, v, m);
      absl::StatusOr<Schedule> schedule = Generate(traits.name, unsharded);
      if (!schedule.ok()) continue;  // A size this schedule does not take.
      names.insert(traits.name);
      absl::StatusOr<SimulationResult> before = Simulate(unsharded, *schedule);
      ASSERT_TRUE(before.ok()) << name << ": " << before.status();

      const Problem sharded = Sharded(p, v, m);
      absl::StatusOr<Schedule> placed = AddVocabularyPasses(sharded, *schedule);
      ASSERT_TRUE(placed.ok()) << name << ": " << placed.status();
      EXPECT_TRUE(CheckSchedule(sharded, *placed).ok()) << name;
      // The other actions keep their order.
      for (Stage w : placed->AllStages()) {
        std::vector<Action> others;
        int vocabulary = 0;
        for (const Action& a : placed->ActionsOf(w)) {
          if (IsVocabularyPass(a.kind)) {
            ++vocabulary;
          } else {
            others.push_back(a);
          }
        }
        EXPECT_EQ(others, schedule->ActionsOf(w)) << name << ", stage " << w;
        EXPECT_EQ(vocabulary, 2 * m) << name << ", stage " << w;
      }
      absl::StatusOr<PairOrders> orders = DerivePairOrders(*placed);
      ASSERT_TRUE(orders.ok()) << name << ": " << orders.status();
      EXPECT_TRUE(CheckPairOrders(*placed, *orders).ok()) << name;

      absl::StatusOr<SimulationResult> after = Simulate(sharded, *placed);
      ASSERT_TRUE(after.ok()) << name << ": " << after.status();
      EXPECT_LT(after->makespan_seconds, before->makespan_seconds) << name;
      // Each stage's prefix ends at or before its first T.
      const std::vector<int> prefix = SpeculativePrefixLengths(*placed);
      for (Stage w : placed->AllStages()) {
        const std::vector<Action>& list = placed->ActionsOf(w);
        for (int i = 0; i < prefix[w.value()]; ++i) {
          EXPECT_NE(list[i].kind, PassKind::kT) << name << ", stage " << w;
        }
      }
    }
  }
  for (const char* expected : {"gpipe", "1f1b", "1f1b-interleaved", "zb-h1", "zb-h2", "zb-1p",
                               "zb-2p", "zb-v", "v-half"}) {
    EXPECT_TRUE(names.count(expected)) << expected << " was not checked";
  }
}

TEST(AddVocabularyPasses, KeepsTheReductionsAndTheMemoryLimit) {
  // 1F1B at p = 4 holds 4 M_B on stage 0; a limit of 4.5 bytes leaves room
  // for one S's 0.5 bytes there and no more.
  const int p = 4, m = 8;
  Problem unsharded = Unsharded(p, 1, m);
  absl::StatusOr<Schedule> schedule = Generate("1f1b", unsharded);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  for (VirtualStageCost& c : unsharded.virtual_stages) c.reduce_seconds = 2;
  schedule = PlaceReductions(unsharded, *schedule, ReducePlacement::kAfterLastBackward);
  ASSERT_TRUE(schedule.ok()) << schedule.status();

  Problem sharded = Sharded(p, 1, m);
  for (VirtualStageCost& c : sharded.virtual_stages) c.reduce_seconds = 2;
  sharded.memory_limit_bytes.assign(p, 4.5);
  absl::StatusOr<Schedule> placed = AddVocabularyPasses(sharded, *schedule);
  ASSERT_TRUE(placed.ok()) << placed.status();
  absl::StatusOr<SimulationResult> sim = Simulate(sharded, *placed);
  ASSERT_TRUE(sim.ok()) << sim.status();
  for (Stage w : placed->AllStages()) {
    EXPECT_LE(sim->peak_memory_bytes[w.value()], 4.5) << "stage " << w;
  }
  int reductions = 0;
  for (const std::vector<Action>& list : placed->actions) {
    for (const Action& a : list) reductions += a.kind == PassKind::kReduce;
  }
  EXPECT_EQ(reductions, p);
}

TEST(AddVocabularyPasses, ALimitNoPlacementKeepsIsResourceExhausted) {
  // 1F1B at p = 2 holds at most 2 bytes on each stage, within a 2-byte
  // limit; an S holding 3 bytes exceeds it wherever it stands.
  const int p = 2, m = 4;
  absl::StatusOr<Schedule> schedule = Generate("1f1b", Unsharded(p, 1, m));
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  Problem sharded = Sharded(p, 1, m);
  sharded.memory_limit_bytes.assign(p, 2.0);
  for (VocabularyCost& c : sharded.vocabulary) c.m_bytes = 3;
  absl::Status status = AddVocabularyPasses(sharded, *schedule).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("over its limit of 2 bytes"));
}

TEST(AddVocabularyPasses, RefusalsNameWhatIsWrong) {
  const Schedule plain = ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                          {{"0F0", "0I0", "0W0"}, {"1F0", "1I0", "1W0"}});
  absl::Status status = AddVocabularyPasses(Unsharded(2, 1, 1), plain).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("problem.vocabulary is empty"));

  const Schedule with = ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                         {{"0F0", "1S0", "1T0", "0I0", "0W0"},
                                          {"1F0", "1S0", "1T0", "1I0", "1W0"}});
  status = AddVocabularyPasses(Sharded(2, 1, 1), with).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("stage 0, action #1 (1S0): the schedule already holds vocabulary passes"));

  Problem bad = Sharded(2, 1, 1);
  bad.vocabulary[1].s_seconds = 0;
  status = AddVocabularyPasses(bad, plain).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("vocabulary[1].s_seconds"));
}

// p = 2, m = 1, every cost 1 s, S = T = 1 s, no hop: S and T go before the
// backward on both stages, where F of L has ended: 0F0 [0,1], 1F0 [1,2], S
// [2,3] on both, T [3,4], 1I0 [4,5], 1W0 and 0I0 [5,6], 0W0 [6,7].
TEST(AddVocabularyPasses, ATinyScheduleGetsTheHandPlacement) {
  Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{1, 1, 1, 1, 0.5}, 0);
  problem.vocabulary.assign(2, VocabularyCost{1, 1, 0, 0});
  const Schedule plain = ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                          {{"0F0", "0I0", "0W0"}, {"1F0", "1I0", "1W0"}});
  absl::StatusOr<Schedule> placed = AddVocabularyPasses(problem, plain);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(*placed, ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                      {{"0F0", "1S0", "1T0", "0I0", "0W0"},
                                       {"1F0", "1S0", "1T0", "1I0", "1W0"}}));
  absl::StatusOr<SimulationResult> sim = Simulate(problem, *placed);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_DOUBLE_EQ(sim->makespan_seconds, 7);
}

}  // namespace
}  // namespace zbpp::sched
