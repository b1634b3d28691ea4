#include "coordinator/core/resolve_policy.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/core/data_parallel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

constexpr int kStages = 4;
constexpr int kMicrobatches = 8;

sched::Problem Uniform() {
  return sched::Problem::Uniform(kStages, 1, kMicrobatches,
                                 sched::VirtualStageCost{1, 1, 1, 1, 0.5}, 0.1);
}

// The straggler: stage 2 of 4 runs every pass 1.5x slower.
sched::Problem Straggler() {
  sched::Problem problem = Uniform();
  sched::VirtualStageCost& slow = problem.virtual_stages[2];
  slow.f_seconds *= 1.5;
  slow.b_seconds *= 1.5;
  slow.w_seconds *= 1.5;
  return problem;
}

sched::Schedule MustGenerate(const std::string& name,
                             const sched::Problem& problem) {
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return schedule.ok() ? *std::move(schedule) : sched::Schedule{};
}

double MakespanOf(const sched::Problem& problem,
                  const sched::Schedule& schedule) {
  absl::StatusOr<sched::SimulationResult> result =
      sched::Simulate(problem, schedule);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->makespan_seconds : -1;
}

// Every reading moves time on by one millisecond, so a solve measured
// between two readings takes exactly 1 ms.
class TickingClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    now_ += absl::Milliseconds(1);
    return now_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
};

class ResolvePolicyTest : public ::testing::Test {
 protected:
  std::unique_ptr<ResolvePolicy> MakePolicy(double fraction = 0.02) {
    absl::StatusOr<std::unique_ptr<ResolvePolicy>> policy =
        ResolvePolicy::Create(
            {.clock = &clock_, .min_improvement_fraction = fraction});
    EXPECT_TRUE(policy.ok()) << policy.status();
    return policy.ok() ? *std::move(policy) : nullptr;
  }

  TickingClock clock_;
};

TEST_F(ResolvePolicyTest, BadOptionsAreRefused) {
  EXPECT_EQ(ResolvePolicy::Create({.clock = nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (double fraction : {-0.1, 1.0, std::nan("")}) {
    EXPECT_EQ(ResolvePolicy::Create(
                  {.clock = &clock_, .min_improvement_fraction = fraction})
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument)
        << fraction;
  }
  EXPECT_EQ(ResolvePolicy::Create(
                {.clock = &clock_, .max_cost_drift_fraction = -0.1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ResolvePolicyTest, BadDataParallelismIsRefused) {
  EXPECT_EQ(ResolvePolicy::Create({.clock = &clock_, .data_parallel = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// With replicas the candidate gets its reductions before it is compared
// with the current schedule, which has them too.
TEST_F(ResolvePolicyTest, ReplicatedCandidateCarriesOneReductionPerStage) {
  absl::StatusOr<std::unique_ptr<ResolvePolicy>> policy =
      ResolvePolicy::Create({.clock = &clock_, .data_parallel = 2});
  ASSERT_TRUE(policy.ok()) << policy.status();
  sched::Problem measured = Straggler();
  for (sched::VirtualStageCost& stage : measured.virtual_stages) stage.reduce_seconds = 0.5;
  absl::StatusOr<sched::Schedule> current = GenerateSchedule("zb-1p", Uniform(), 2);
  ASSERT_TRUE(current.ok()) << current.status();
  absl::StatusOr<ResolveDecision> decision =
      (*policy)->Decide("zb-1p", *current, 1, measured);
  ASSERT_TRUE(decision.ok()) << decision.status();
  std::vector<int> reduced;
  for (const std::vector<sched::Action>& actions : decision->candidate.actions) {
    for (const sched::Action& action : actions) {
      if (sched::IsVirtualStageReduction(action)) reduced.push_back(action.virtual_stage.value());
    }
  }
  std::sort(reduced.begin(), reduced.end());
  std::vector<int> every_stage(kStages);
  for (int s = 0; s < kStages; ++s) every_stage[s] = s;
  EXPECT_EQ(reduced, every_stage);
  EXPECT_DOUBLE_EQ(decision->new_makespan_seconds, MakespanOf(measured, decision->candidate));
}

// Hysteresis: a straggler that appeared inside the window leaves medians
// that mix both regimes; the policy waits for the window to settle.
TEST_F(ResolvePolicyTest, CostsStillMovingKeepTheVersionUntilTheySettle) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  const sched::Schedule current = MustGenerate("zb-1p", Uniform());
  absl::StatusOr<ResolveDecision> moving =
      policy->Decide("zb-1p", current, 3, Straggler(), /*cost_drift=*/0.8);
  ASSERT_TRUE(moving.ok()) << moving.status();
  EXPECT_FALSE(moving->publish);
  EXPECT_THAT(moving->reason, HasSubstr("still moving"));
  EXPECT_THAT(moving->reason, HasSubstr("keeping version 3"));
  EXPECT_EQ(moving->solve_seconds, 0);
  EXPECT_GT(moving->old_makespan_seconds, 0);

  absl::StatusOr<ResolveDecision> settled =
      policy->Decide("zb-1p", current, 3, Straggler(), /*cost_drift=*/0.1);
  ASSERT_TRUE(settled.ok()) << settled.status();
  EXPECT_TRUE(settled->publish) << settled->reason;
}

TEST_F(ResolvePolicyTest, StragglerIsReSolvedIntoAShorterSchedule) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  const sched::Schedule current = MustGenerate("zb-1p", Uniform());
  const sched::Problem measured = Straggler();
  absl::StatusOr<ResolveDecision> decision =
      policy->Decide("zb-1p", current, 1, measured);
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_TRUE(decision->publish) << decision->reason;
  // The figures are the simulator's, under the measured costs, for both.
  EXPECT_DOUBLE_EQ(decision->old_makespan_seconds,
                   MakespanOf(measured, current));
  EXPECT_DOUBLE_EQ(decision->new_makespan_seconds,
                   MakespanOf(measured, decision->candidate));
  EXPECT_LT(decision->new_makespan_seconds,
            decision->old_makespan_seconds * (1 - 0.02));
  EXPECT_GT(decision->improvement_fraction, 0.02);
  ASSERT_TRUE(decision->candidate_simulation.has_value());
  EXPECT_DOUBLE_EQ(decision->candidate_simulation->makespan_seconds,
                   decision->new_makespan_seconds);
  EXPECT_DOUBLE_EQ(decision->current_simulation.makespan_seconds,
                   decision->old_makespan_seconds);
  EXPECT_EQ(decision->current_version, 1);
  EXPECT_EQ(decision->policy, "zb-1p");
  EXPECT_DOUBLE_EQ(decision->solve_seconds, 0.001);
  EXPECT_THAT(decision->reason, HasSubstr("publish"));
  // The candidate still honours zb-1p's limit of p·M_B.
  EXPECT_LE(decision->candidate_simulation->max_peak_memory_m_b, kStages + 1e-9);
  EXPECT_EQ(decision->candidate.stage_of, current.stage_of);
}

TEST_F(ResolvePolicyTest, ZbAutoWithAMemoryLimitAlsoAdaptsToTheStraggler) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  sched::Problem base = Uniform();
  base.memory_limit_bytes.assign(kStages, kStages * 1.0);  // p·M_B
  sched::Problem measured = Straggler();
  measured.memory_limit_bytes = base.memory_limit_bytes;
  const sched::Schedule current = MustGenerate("zb-auto", base);
  absl::StatusOr<ResolveDecision> decision =
      policy->Decide("zb-auto", current, 3, measured);
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_TRUE(decision->publish) << decision->reason;
  EXPECT_LT(MakespanOf(measured, decision->candidate),
            MakespanOf(measured, current));
}

TEST_F(ResolvePolicyTest, UnchangedCostsPublishNothing) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  for (const char* name : {"zb-1p", "zb-2p", "zb-auto"}) {
    const sched::Schedule current = MustGenerate(name, Uniform());
    absl::StatusOr<ResolveDecision> decision =
        policy->Decide(name, current, 1, Uniform());
    ASSERT_TRUE(decision.ok()) << decision.status();
    EXPECT_FALSE(decision->publish) << name << ": " << decision->reason;
    EXPECT_LE(decision->improvement_fraction, 0.02) << name;
    EXPECT_THAT(decision->reason, HasSubstr("keep"));
  }
}

TEST_F(ResolvePolicyTest, ImprovementBelowTheThresholdIsKept) {
  // The straggler's gain (38 s -> 36 s here, about 5%) is below 6%.
  std::unique_ptr<ResolvePolicy> strict = MakePolicy(0.06);
  absl::StatusOr<ResolveDecision> decision =
      strict->Decide("zb-1p", MustGenerate("zb-1p", Uniform()), 1, Straggler());
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_GT(decision->improvement_fraction, 0.02);
  EXPECT_LT(decision->improvement_fraction, 0.06);
  EXPECT_FALSE(decision->publish) << decision->reason;
}

TEST_F(ResolvePolicyTest, RecoveredStragglerIsReSolvedBack) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  const sched::Schedule tuned = MustGenerate("zb-1p", Straggler());
  absl::StatusOr<ResolveDecision> decision =
      policy->Decide("zb-1p", tuned, 2, Uniform());
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_TRUE(decision->publish) << decision->reason;
  EXPECT_LT(MakespanOf(Uniform(), decision->candidate),
            MakespanOf(Uniform(), tuned) * (1 - 0.02));
}

TEST_F(ResolvePolicyTest, FixedScheduleOnlyRefreshesThePrediction) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  const sched::Schedule current = MustGenerate("1f1b", Uniform());
  absl::StatusOr<ResolveDecision> decision =
      policy->Decide("1f1b", current, 1, Straggler());
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_FALSE(decision->publish);
  EXPECT_DOUBLE_EQ(decision->old_makespan_seconds,
                   MakespanOf(Straggler(), current));
  EXPECT_GT(decision->old_makespan_seconds, MakespanOf(Uniform(), current));
  EXPECT_DOUBLE_EQ(decision->new_makespan_seconds,
                   decision->old_makespan_seconds);
  EXPECT_DOUBLE_EQ(decision->solve_seconds, 0);
  EXPECT_THAT(decision->reason, HasSubstr("fixed schedule 1f1b"));
  EXPECT_TRUE(decision->candidate.actions.empty());
}

TEST_F(ResolvePolicyTest, SolverRefusalKeepsTheCurrentVersion) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  const sched::Schedule current = MustGenerate("zb-1p", Uniform());
  sched::Problem measured = Straggler();
  measured.memory_limit_bytes.assign(kStages, 0.5);  // below one M_B
  absl::StatusOr<ResolveDecision> decision =
      policy->Decide("zb-1p", current, 4, measured);
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_FALSE(decision->publish);
  EXPECT_THAT(decision->reason,
              HasSubstr("re-solve failed, keeping version 4"));
  EXPECT_THAT(decision->reason, HasSubstr("RESOURCE_EXHAUSTED"));
}

TEST_F(ResolvePolicyTest, BadInputsAreErrors) {
  std::unique_ptr<ResolvePolicy> policy = MakePolicy();
  const sched::Schedule current = MustGenerate("zb-1p", Uniform());
  EXPECT_EQ(policy->Decide("zb-h3", current, 1, Uniform()).status().code(),
            absl::StatusCode::kNotFound);
  // A job's "auto" is resolved once, by PlanJob (planning.h), never here.
  EXPECT_EQ(policy->Decide("auto", current, 1, Uniform()).status().code(),
            absl::StatusCode::kNotFound);
  sched::Problem other = Uniform();
  other.microbatches = 4;  // the schedule runs 8
  EXPECT_EQ(policy->Decide("zb-1p", current, 1, other).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zbpp::coordinator
