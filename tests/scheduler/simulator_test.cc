#include "scheduler/simulator.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::zbpp::sched::testing::ScheduleFromRows;

std::vector<double> Starts(const std::vector<ActionTiming>& timings) {
  std::vector<double> starts;
  for (const ActionTiming& t : timings) starts.push_back(t.start_seconds);
  return starts;
}

TEST(Simulator, FusedBackwardWithCommunicationHandComputed) {
  // F=1, B=2, W=3, one hop = 0.5: 0F0 [0,1], 1F0 [1.5,2.5], 1B0 [2.5,7.5],
  // 0B0 [8,13].
  Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{1, 2, 3, 1, 0.5}, 0.5);
  Schedule schedule = ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                       {{"0F0", "0B0"}, {"1F0", "1B0"}});
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Starts(result->timings[0]), ElementsAre(0, 8));
  EXPECT_THAT(Starts(result->timings[1]), ElementsAre(1.5, 2.5));
  EXPECT_DOUBLE_EQ(result->timings[0][1].end_seconds, 13);
  EXPECT_DOUBLE_EQ(result->makespan_seconds, 13);  // stage 0's span
  EXPECT_DOUBLE_EQ(result->step_seconds, 13);
  EXPECT_THAT(result->busy_seconds, ElementsAre(6, 6));
  EXPECT_THAT(result->idle_seconds, ElementsAre(7, 7));
  EXPECT_DOUBLE_EQ(result->bubble_rate, 1 - 12.0 / 26.0);
  EXPECT_THAT(result->peak_memory_bytes, ElementsAre(1, 1));
}

// p = 2, m = 1 with vocabulary passes: F=1, B=2, W=3, one hop 0.5 s;
// stage 0's S 0.5 s, T 1 s, holding 2 bytes (4 transient), stage 1's S 1 s,
// T 0.5 s, holding 3 bytes.
Problem VocabularyProblem() {
  Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{1, 2, 3, 1, 0.5}, 0.5);
  problem.vocabulary = {VocabularyCost{0.5, 1, 2, 4}, VocabularyCost{1, 0.5, 3, 0}};
  return problem;
}

Schedule VocabularySchedule() {
  return ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                          {{"0F0", "1S0", "1T0", "0I0", "0W0"},
                           {"1F0", "1S0", "1T0", "1I0", "1W0"}});
}

TEST(Simulator, VocabularyPassesHandComputed) {
  // 0F0 [0,1]; 1F0 [1.5,2.5]; S: stage 1 at once [2.5,3.5], stage 0 one hop
  // later [3,3.5]; T: each waits for the other stage's S (3.5 + 0.5): stage
  // 0 [4,5], stage 1 [4,4.5]; 1I0 waits for stage 0's T (5 + 0.5) [5.5,7.5],
  // 1W0 [7.5,10.5]; 0I0 [8,10], 0W0 [10,13].
  absl::StatusOr<SimulationResult> result = Simulate(VocabularyProblem(), VocabularySchedule());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Starts(result->timings[0]), ElementsAre(0, 3, 4, 8, 10));
  EXPECT_THAT(Starts(result->timings[1]), ElementsAre(1.5, 2.5, 4, 5.5, 7.5));
  EXPECT_DOUBLE_EQ(result->timings[0][2].end_seconds, 5);
  EXPECT_DOUBLE_EQ(result->timings[1][2].end_seconds, 4.5);
  EXPECT_DOUBLE_EQ(result->makespan_seconds, 13);
  EXPECT_THAT(result->busy_seconds, ElementsAre(7.5, 7.5));
  // Held: stage 0 F 1, S +2 = 3, T back to 1; stage 1 F 1, S +3 = 4. Running:
  // stage 0's S and T add their 4 transient bytes to 3.
  EXPECT_THAT(result->peak_memory_bytes, ElementsAre(3, 4));
  EXPECT_THAT(result->peak_running_memory_bytes, ElementsAre(7, 4));
  // In units of the stage's M_B (1 byte), as without vocabulary passes.
  EXPECT_THAT(result->peak_memory_m_b, ElementsAre(3, 4));
}

TEST(Simulator, VocabularyPassesAndVocabularyCostsComeTogether) {
  Problem without = VocabularyProblem();
  without.vocabulary.clear();
  absl::Status status = Simulate(without, VocabularySchedule()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no vocabulary costs"));

  Schedule plain = ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                    {{"0F0", "0I0", "0W0"}, {"1F0", "1I0", "1W0"}});
  status = Simulate(VocabularyProblem(), plain).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("the LM head's cost would be lost"));
}

TEST(Simulator, AVocabularyDeadlockNamesTheMissingInput) {
  // Stage 0 runs S and T of microbatch 1 before S of 0; stage 1 runs T of
  // 0 before F of L for 1: stage 0's 1S1 waits for 1F1, behind stage 1's
  // 1T0, which waits for stage 0's 1S0.
  Problem problem = Problem::Uniform(2, 1, 2, VirtualStageCost{}, 0);
  problem.vocabulary.assign(2, VocabularyCost{1, 1, 0, 0});
  Schedule schedule = ScheduleFromRows(
      "hand", 2, 1, 2, Placement::kLoop,
      {{"0F0", "0F1", "1S1", "1T1", "1S0", "1T0", "0I0", "0W0", "0I1", "0W1"},
       {"1F0", "1S0", "1T0", "1F1", "1S1", "1T1", "1I0", "1W0", "1I1", "1W1"}});
  absl::Status status = Simulate(problem, schedule).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("deadlock: stage 0, action #2 (1S1) waits for 1F1 on stage 1; stage 1, "
                        "action #2 (1T0) waits for 1S0 on stage 0"));
}

TEST(CheckSchedule, VocabularyPassRefusals) {
  struct Case {
    std::vector<std::vector<std::string>> rows;
    const char* message;
  };
  const Case cases[] = {
      {{{"0F0", "0S0", "1T0", "0I0", "0W0"}, {"1F0", "1S0", "1T0", "1I0", "1W0"}},
       "stage 0, action #1 (0S0): a vocabulary pass belongs to the last virtual stage (1), got 0"},
      {{{"0F0", "1S0", "0I0", "0W0"}, {"1F0", "1S0", "1T0", "1I0", "1W0"}},
       "stage 0: missing 1T0"},
      {{{"0F0", "0I0", "0W0"}, {"1F0", "1S0", "1T0", "1I0", "1W0"}}, "stage 0: missing 1S0"},
      {{{"0F0", "1S0", "1S0", "1T0", "0I0", "0W0"}, {"1F0", "1S0", "1T0", "1I0", "1W0"}},
       "stage 0, action #2 (1S0): duplicate pass"},
      {{{"0F0", "1T0", "1S0", "0I0", "0W0"}, {"1F0", "1S0", "1T0", "1I0", "1W0"}},
       "stage 0, action #1 (1T0): T before its S (1S0)"},
      {{{"0F0", "1S0", "1T0", "0I0", "0W0"}, {"1S0", "1F0", "1T0", "1I0", "1W0"}},
       "stage 1, action #0 (1S0): S before its F (1F0)"},
      {{{"0F0", "1S0", "1T0", "0I0", "0W0"}, {"1F0", "1S0", "1I0", "1T0", "1W0"}},
       "stage 1, action #2 (1I0): backward of the last virtual stage before its stage's T "
       "(1T0)"},
  };
  const Problem problem = VocabularyProblem();
  for (const Case& c : cases) {
    absl::Status status =
        CheckSchedule(problem, ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop, c.rows));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
  EXPECT_TRUE(CheckSchedule(problem, VocabularySchedule()).ok());
}

TEST(Simulator, VPlacementHandsOffLocallyAndCountsMemoryPerChunk) {
  // Virtual stages 0..3 on stages 0,1,1,0; every pass 1 s, one hop 0.5 s. The
  // hand-offs 1->2 (stage 1) and 3->... (stage 0) cost nothing.
  Problem problem = Problem::Uniform(2, 2, 1, VirtualStageCost{1, 1, 1, 1, 0.5}, 0.5);
  Schedule schedule =
      ScheduleFromRows("hand", 2, 2, 1, Placement::kV,
                       {{"0F0", "3F0", "3I0", "3W0", "0I0", "0W0"},
                        {"1F0", "2F0", "2I0", "1I0", "2W0", "1W0"}});
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Starts(result->timings[0]), ElementsAre(0, 4, 5, 6, 9, 10));
  EXPECT_THAT(Starts(result->timings[1]),
              ElementsAre(1.5, 2.5, 6.5, 7.5, 8.5, 9.5));
  EXPECT_DOUBLE_EQ(result->makespan_seconds, 11);
  // Stage 0 holds both chunks' M_B (2 bytes) after 3F0: one unit of M_B.
  EXPECT_THAT(result->peak_memory_bytes, ElementsAre(2, 2));
  EXPECT_THAT(result->peak_memory_m_b, ElementsAre(1, 1));
  EXPECT_DOUBLE_EQ(result->max_peak_memory_m_b, 1);
}

TEST(Simulator, SplitBackwardReleasesMemoryInTwoSteps) {
  // One stage, two microbatches: F F B W B W with M_B = 4, M_W = 1.
  Problem problem = Problem::Uniform(1, 1, 2, VirtualStageCost{1, 1, 1, 4, 1}, 0);
  Schedule a = ScheduleFromRows("hand", 1, 1, 2, Placement::kLoop,
                                {{"0F0", "0F1", "0I0", "0W0", "0I1", "0W1"}});
  Schedule b = ScheduleFromRows("hand", 1, 1, 2, Placement::kLoop,
                                {{"0F0", "0I0", "0F1", "0I1", "0W0", "0W1"}});
  EXPECT_DOUBLE_EQ(Simulate(problem, a)->peak_memory_bytes[0], 8);
  // After 0I0 only M_W = 1 stays: 1 + 4 = 5.
  EXPECT_DOUBLE_EQ(Simulate(problem, b)->peak_memory_bytes[0], 5);
  // Without working memory the running peak is the held one.
  EXPECT_DOUBLE_EQ(Simulate(problem, b)->peak_running_memory_bytes[0], 5);
  EXPECT_DOUBLE_EQ(Simulate(problem, b)->bubble_rate, 0);
}

TEST(Simulator, TransientMemoryAddsToTheLargerEndOfTheRunningPass) {
  // Schedule b above (F I F I W W, M_B = 4, M_W = 1) with 3 bytes of working
  // memory per pass. Held before/after each pass: 0F0 0/4, 0I0 4/1, 0F1 1/5,
  // 0I1 5/2, 0W0 2/1, 0W1 1/0; the running peak is the largest end plus 3:
  // 0F1 or 0I1 at 5 + 3 = 8; the held peak stays 5.
  VirtualStageCost cost{1, 1, 1, 4, 1};
  cost.transient_bytes = 3;
  Problem problem = Problem::Uniform(1, 1, 2, cost, 0);
  Schedule b = ScheduleFromRows("hand", 1, 1, 2, Placement::kLoop,
                                {{"0F0", "0I0", "0F1", "0I1", "0W0", "0W1"}});
  absl::StatusOr<SimulationResult> result = Simulate(problem, b);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->peak_running_memory_bytes[0], 8);
  EXPECT_DOUBLE_EQ(result->peak_memory_bytes[0], 5);
  // F I W with 10 bytes of working memory peaks in F (and I) at
  // max(0, 4) + 10 = 14, not at its held 4.
  cost.transient_bytes = 10;
  Problem one = Problem::Uniform(1, 1, 1, cost, 0);
  Schedule single = ScheduleFromRows("hand", 1, 1, 1, Placement::kLoop, {{"0F0", "0I0", "0W0"}});
  EXPECT_DOUBLE_EQ(Simulate(one, single)->peak_running_memory_bytes[0], 14);
  EXPECT_DOUBLE_EQ(Simulate(one, single)->peak_memory_bytes[0], 4);
}

struct Malformed {
  const char* what;
  std::vector<std::vector<std::string>> rows;
  const char* message;
};

TEST(Simulator, RejectsMalformedSchedulesNamingTheAction) {
  const Malformed cases[] = {
      {"missing W", {{"0F0", "0I0"}, {"1F0", "1B0"}}, "missing W of virtual stage 0"},
      {"missing F", {{"0F0", "0B0"}, {"1B0"}}, "missing F of virtual stage 1"},
      {"duplicate",
       {{"0F0", "0F0", "0B0"}, {"1F0", "1B0"}},
       "stage 0, action #1 (0F0): duplicate pass"},
      {"fused and split",
       {{"0F0", "0B0", "0W0"}, {"1F0", "1B0"}},
       "(0W0): duplicate pass"},
      {"W before B",
       {{"0F0", "0W0", "0I0"}, {"1F0", "1B0"}},
       "stage 0, action #1 (0W0): W before its B (0I0)"},
      {"B before F",
       {{"0B0", "0F0"}, {"1F0", "1B0"}},
       "stage 0, action #0 (0B0): B before its F (0F0)"},
      {"wrong stage",
       {{"0F0", "1F0", "0B0"}, {"1B0"}},
       "(1F0): virtual stage 1 is held by stage 1"},
      {"virtual stage range",
       {{"0F0", "5F0", "0B0"}, {"1F0", "1B0"}},
       "virtual stage out of range"},
      {"microbatch range",
       {{"0F0", "0F3", "0B0"}, {"1F0", "1B0"}},
       "microbatch out of range"},
      {"row count", {{"0F0", "0B0"}}, "one list per stage"},
  };
  Problem problem = Problem::Uniform(2, 1, 1, VirtualStageCost{}, 0);
  for (const Malformed& c : cases) {
    absl::StatusOr<SimulationResult> result = Simulate(
        problem, ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop, c.rows));
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << c.what;
    EXPECT_THAT(std::string(result.status().message()), HasSubstr(c.message))
        << c.what;
  }
}

TEST(Simulator, RejectsScheduleForAnotherProblem) {
  Problem problem = Problem::Uniform(2, 1, 2, VirtualStageCost{}, 0);
  Schedule schedule = ScheduleFromRows("hand", 2, 1, 1, Placement::kLoop,
                                       {{"0F0", "0B0"}, {"1F0", "1B0"}});
  EXPECT_EQ(Simulate(problem, schedule).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Simulator, DetectsCrossStageDeadlock) {
  // Stage 1 wants microbatch 1 first, but stage 0 sends it only after
  // microbatch 0's backward, which needs stage 1's.
  Problem problem = Problem::Uniform(2, 1, 2, VirtualStageCost{}, 0);
  Schedule schedule = ScheduleFromRows(
      "hand", 2, 1, 2, Placement::kLoop,
      {{"0F0", "0B0", "0F1", "0B1"}, {"1F1", "1F0", "1B0", "1B1"}});
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("stage 0, action #1 (0B0) waits for 1I0 on stage 1"));
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("stage 1, action #0 (1F1) waits for 0F1 on stage 0"));
}

TEST(Simulator, DetectsBBeforeNextVirtualStagesBOnOneStage) {
  // V placement: stage 0 runs virtual stage 0's B before virtual stage 3's, whose
  // gradient it needs (through stages 1 and back).
  Problem problem = Problem::Uniform(2, 2, 1, VirtualStageCost{}, 0);
  Schedule schedule =
      ScheduleFromRows("hand", 2, 2, 1, Placement::kV,
                       {{"0F0", "3F0", "0I0", "3I0", "3W0", "0W0"},
                        {"1F0", "2F0", "2I0", "1I0", "2W0", "1W0"}});
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("(0I0) waits for 1I0"));
}

TEST(Simulator, HeterogeneousVirtualStagesUseTheirOwnCosts) {
  // Virtual stage 1 is three times slower: the step is bound by it.
  Problem problem = Problem::Uniform(2, 1, 2, VirtualStageCost{1, 1, 1, 1, .5}, 0);
  problem.virtual_stages[1] = VirtualStageCost{3, 3, 3, 1, .5};
  Schedule schedule = ScheduleFromRows(
      "hand", 2, 1, 2, Placement::kLoop,
      {{"0F0", "0F1", "0B0", "0B1"}, {"1F0", "1B0", "1F1", "1B1"}});
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  ASSERT_TRUE(result.ok()) << result.status();
  // 1F0 [1,4], 1B0 [4,10], 1F1 [10,13], 1B1 [13,19]; 0B0 [10,12],
  // 0B1 [19,21].
  EXPECT_THAT(Starts(result->timings[1]), ElementsAre(1, 4, 10, 13));
  EXPECT_THAT(Starts(result->timings[0]), ElementsAre(0, 1, 10, 19));
  EXPECT_DOUBLE_EQ(result->makespan_seconds, 21);
  EXPECT_THAT(result->busy_seconds, ElementsAre(6, 18));
  EXPECT_DOUBLE_EQ(result->bubble_rate, 1 - 24.0 / 42.0);
}

}  // namespace
}  // namespace zbpp::sched
