// Where a rank's time goes (worker/runtime/step_timeline.h): the gap clock
// counts each instant of a gap once, in the phase that was running; a
// step's span splits into compute, waits and overhead without counting an
// instant twice, measured by the real executor under synthetic compute.

#include "worker/runtime/step_timeline.h"

#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/runtime/synthetic_pipeline.h"

namespace zbpp::worker {
namespace {

using Clock = GapClock::Clock;
using std::chrono::milliseconds;

double Sum(const StepGap& gap) {
  double sum = 0;
  for (double seconds : gap.phase_seconds) sum += seconds;
  return sum;
}

TEST(GapClock, EachInstantGoesToThePhaseThatEndedThere) {
  GapClock clock;
  const Clock::time_point t0 = Clock::now();
  // No gap before the first step: marks and Close are nothing.
  clock.Mark(GapPhase::kGrant, t0 + milliseconds(1));
  EXPECT_FALSE(clock.Close(t0 + milliseconds(2)).has_value());

  clock.Open(t0);
  clock.Mark(GapPhase::kDrain, t0 + milliseconds(1));
  clock.Mark(GapPhase::kValidation, t0 + milliseconds(4));
  clock.Mark(GapPhase::kOptimizer, t0 + milliseconds(6));
  clock.Mark(GapPhase::kValidation, t0 + milliseconds(7));  // Accumulates.
  clock.Mark(GapPhase::kReport, t0 + milliseconds(10));
  clock.Mark(GapPhase::kGrant, t0 + milliseconds(30));
  std::optional<StepGap> gap = clock.Close(t0 + milliseconds(32));
  ASSERT_TRUE(gap.has_value());
  EXPECT_NEAR(gap->total_seconds, 0.032, 1e-12);
  EXPECT_NEAR(gap->seconds(GapPhase::kDrain), 0.001, 1e-12);
  EXPECT_NEAR(gap->seconds(GapPhase::kValidation), 0.004, 1e-12);
  EXPECT_NEAR(gap->seconds(GapPhase::kOptimizer), 0.002, 1e-12);
  EXPECT_NEAR(gap->seconds(GapPhase::kReport), 0.003, 1e-12);
  EXPECT_NEAR(gap->seconds(GapPhase::kGrant), 0.020, 1e-12);
  EXPECT_NEAR(gap->seconds(GapPhase::kOther), 0.002, 1e-12);  // Grant to the step's start.
  EXPECT_EQ(gap->seconds(GapPhase::kEvaluation), 0);
  EXPECT_NEAR(Sum(*gap), gap->total_seconds, 1e-12);
  // Closed: the next step has no gap until one is opened.
  EXPECT_FALSE(clock.Close(t0 + milliseconds(40)).has_value());

  // A new gap starts from nothing.
  clock.Open(t0 + milliseconds(50));
  clock.Mark(GapPhase::kCheckpoint, t0 + milliseconds(55));
  gap = clock.Close(t0 + milliseconds(55));
  ASSERT_TRUE(gap.has_value());
  EXPECT_NEAR(gap->seconds(GapPhase::kCheckpoint), 0.005, 1e-12);
  EXPECT_EQ(gap->seconds(GapPhase::kGrant), 0);
  EXPECT_NEAR(Sum(*gap), gap->total_seconds, 1e-12);
}

TEST(BreakDownSpan, ComputeIsThePassesAndReductionWaitsFollowTheLastPass) {
  StepTimeline t;
  t.step_seconds = 1.0;
  t.input_wait_seconds = 0.05;
  t.send_wait_seconds = 0.02;
  t.validation_check_seconds = 0.03;
  // F 0.1-0.3, B 0.4-0.6, REDUCE 0.5-1.0 (ends 0.3 after the last pass).
  t.action_start_seconds = {0.1, 0.4, 0.5};
  t.action_end_seconds = {0.3, 0.7, 1.0};
  const std::vector<sched::Action> actions = {
      {sched::PassKind::kF, VirtualStage(0), 0}, {sched::PassKind::kB, VirtualStage(0), 0}, {sched::PassKind::kReduce, VirtualStage(0), 0}};
  const SpanBreakdown b = BreakDownSpan(t, actions);
  EXPECT_NEAR(b.compute_seconds, 0.5, 1e-12);
  EXPECT_NEAR(b.reduction_wait_seconds, 0.3, 1e-12);
  EXPECT_NEAR(b.overhead_seconds, 1.0 - 0.5 - 0.05 - 0.02 - 0.03 - 0.3, 1e-12);
  // Without a reduction the tail is the executor's.
  const SpanBreakdown plain = BreakDownSpan(t, {actions[0], actions[1], actions[0]});
  EXPECT_EQ(plain.reduction_wait_seconds, 0);
}

// Two stages of 1F1B where stage 0's forwards take 20x the other passes:
// stage 1 mostly waits for its inputs. The executor's waits and the passes
// never cover the same instant (their sum stays within the span), and the
// waits are where the stage lost its time.
TEST(StepBreakdown, ASlowFirstStageShowsAsInputWaitsOnTheNext) {
  constexpr int kMicrobatches = 4;
  sched::VirtualStageCost fast;
  fast.f_seconds = 0.002;
  fast.b_seconds = 0.002;
  fast.w_seconds = 0.002;
  sched::Problem problem = sched::Problem::Uniform(2, 1, kMicrobatches, fast, 0.0);
  problem.virtual_stages[0].f_seconds = 0.04;
  absl::StatusOr<sched::Schedule> schedule = sched::Generate("1f1b", problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  SyntheticCompute synthetic;
  synthetic.stages = problem.virtual_stages;

  std::vector<std::unique_ptr<Communicator>> group = CreateInProcessGroup(2);
  absl::StatusOr<std::vector<std::vector<StepTimeline>>> steps = RunSyntheticPipeline(
      *schedule, synthetic, {group[0].get(), group[1].get()}, 2, SyntheticShape{1, 4, 8});
  ASSERT_TRUE(steps.ok()) << steps.status();
  for (const std::vector<StepTimeline>& step : *steps) {
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(r);
      const StepTimeline& t = step[r];
      const SpanBreakdown b = BreakDownSpan(t, schedule->actions[r]);
      EXPECT_GT(b.compute_seconds, 0);
      EXPECT_LE(b.compute_seconds + b.input_wait_seconds + b.send_wait_seconds +
                    b.validation_check_seconds + b.reduction_wait_seconds,
                t.step_seconds + 1e-9);
      EXPECT_NEAR(b.compute_seconds + b.input_wait_seconds + b.send_wait_seconds +
                      b.validation_check_seconds + b.reduction_wait_seconds + b.overhead_seconds,
                  t.step_seconds, 1e-9);
      EXPECT_EQ(b.validation_check_seconds, 0);  // No check was asked for.
      EXPECT_EQ(b.reduction_wait_seconds, 0);    // One replica.
    }
    // Stage 1 waits for each of stage 0's slow forwards: the first one's
    // 40 ms and most of the others' (its own passes take 4 x 6 ms); stage 0
    // never waits long (stage 1's gradients come back during its next slow
    // forward). Generous bounds: sleeps overshoot on a loaded machine.
    const SpanBreakdown last = BreakDownSpan(step[1], schedule->actions[1]);
    EXPECT_GT(last.input_wait_seconds, 0.1);
    EXPECT_GT(last.input_wait_seconds, last.compute_seconds);
    const SpanBreakdown first = BreakDownSpan(step[0], schedule->actions[0]);
    EXPECT_LT(first.input_wait_seconds, last.input_wait_seconds);
  }
}

}  // namespace
}  // namespace zbpp::worker
