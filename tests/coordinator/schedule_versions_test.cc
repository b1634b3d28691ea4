#include "coordinator/core/schedule_versions.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;

sched::Schedule Named(const std::string& name) {
  sched::Schedule schedule;
  schedule.name = name;
  schedule.workers = 4;
  return schedule;
}

std::unique_ptr<ScheduleVersions> MustCreate(Clock* clock, int64_t lead) {
  absl::StatusOr<std::unique_ptr<ScheduleVersions>> versions =
      ScheduleVersions::Create({.clock = clock, .switch_lead_steps = lead});
  EXPECT_TRUE(versions.ok()) << versions.status();
  return versions.ok() ? *std::move(versions) : nullptr;
}

TEST(ScheduleVersions, BadOptionsAreRefused) {
  FakeClock clock;
  EXPECT_EQ(ScheduleVersions::Create({.clock = nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScheduleVersions::Create({.clock = &clock, .switch_lead_steps = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ScheduleVersions, FirstVersionAtOnceLaterOnesAfterTheLead) {
  FakeClock clock;
  std::unique_ptr<ScheduleVersions> versions = MustCreate(&clock, 2);
  EXPECT_EQ(versions->ScheduleForStep(0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(versions->Latest().status().code(), absl::StatusCode::kNotFound);

  absl::StatusOr<ScheduleVersion> v1 =
      versions->Publish(Named("zb-1p"), PredictedStats{38, 38, 0.2, 4}, 0);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(v1->number, 1);
  EXPECT_EQ(v1->effective_step, 0);
  EXPECT_EQ(v1->published_at, clock.Now());

  clock.Advance(absl::Seconds(30));
  absl::StatusOr<ScheduleVersion> v2 =
      versions->Publish(Named("zb-1p'"), PredictedStats{36, 36, 0.1, 4}, 10);
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->number, 2);
  EXPECT_EQ(v2->effective_step, 12);
  EXPECT_DOUBLE_EQ(v2->predicted.makespan_seconds, 36);

  // Two publications at the same step still get distinct boundaries.
  absl::StatusOr<ScheduleVersion> v3 =
      versions->Publish(Named("third"), PredictedStats{}, 10);
  ASSERT_TRUE(v3.ok()) << v3.status();
  EXPECT_EQ(v3->effective_step, 13);

  EXPECT_EQ(versions->ScheduleForStep(11)->number, 1);
  EXPECT_EQ(versions->ScheduleForStep(12)->number, 2);
  EXPECT_EQ(versions->ScheduleForStep(13)->number, 3);
  EXPECT_EQ(versions->ScheduleForStep(1000)->schedule.name, "third");
  EXPECT_EQ(versions->Latest()->number, 3);
  std::vector<int64_t> steps;
  for (const ScheduleVersion& v : versions->History()) {
    steps.push_back(v.effective_step);
  }
  EXPECT_THAT(steps, ElementsAre(0, 12, 13));
  EXPECT_EQ(versions->Publish(Named("x"), PredictedStats{}, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Four workers progress at different speeds and look up their schedule when
// each step begins; the coordinator publishes whenever it likes, passing the
// highest step seen. Every step must run one version on every worker.
TEST(ScheduleVersions, AllWorkersSwitchAtTheSameStep) {
  FakeClock clock;
  std::unique_ptr<ScheduleVersions> versions = MustCreate(&clock, 2);
  ASSERT_TRUE(versions->Publish(Named("v1"), PredictedStats{}, 0).ok());
  constexpr int kWorkers = 4;
  constexpr int64_t kSteps = 30;
  // Worker r begins a step on ticks where tick % (r + 1) == 0: worker 0 runs
  // ahead, worker 3 lags (in a real pipeline they stay within a step or
  // two of each other; the rule must hold for any gap <= the lead).
  std::vector<int64_t> next_step(kWorkers, 0);
  std::map<int64_t, std::vector<int64_t>> version_of_step;  // per worker
  int published = 1;
  for (int tick = 0; tick < 200; ++tick) {
    for (int r = 0; r < kWorkers; ++r) {
      if (next_step[r] >= kSteps || tick % (r + 1) != 0) continue;
      // Keep the workers within the lead of each other, as the pipeline's
      // data dependencies do.
      const int64_t slowest =
          *std::min_element(next_step.begin(), next_step.end());
      if (next_step[r] > slowest + 1) continue;
      absl::StatusOr<ScheduleVersion> v =
          versions->ScheduleForStep(next_step[r]);
      ASSERT_TRUE(v.ok()) << v.status();
      version_of_step[next_step[r]].push_back(v->number);
      ++next_step[r];
    }
    if (tick % 7 == 3 && published < 5) {
      // The highest step a worker has begun (it may still be inside it).
      const int64_t highest_started =
          *std::max_element(next_step.begin(), next_step.end()) - 1;
      ASSERT_TRUE(versions
                      ->Publish(Named("next"), PredictedStats{},
                                std::max<int64_t>(0, highest_started))
                      .ok());
      ++published;
    }
  }
  ASSERT_EQ(version_of_step.size(), static_cast<size_t>(kSteps));
  std::vector<int64_t> switches;
  int64_t previous = 1;
  for (const auto& [step, numbers] : version_of_step) {
    ASSERT_EQ(numbers.size(), static_cast<size_t>(kWorkers)) << step;
    for (int64_t number : numbers) {
      EXPECT_EQ(number, numbers[0]) << "step " << step << " mixes versions";
    }
    if (numbers[0] != previous) switches.push_back(step);
    previous = numbers[0];
  }
  EXPECT_EQ(switches.size(), 4u);  // every published version was used
}

TEST(ScheduleVersions, RestoreRebuildsHistoryOnce) {
  FakeClock clock;
  std::unique_ptr<ScheduleVersions> versions = MustCreate(&clock, 2);
  ScheduleVersion v1{1, 0, Named("a"), {}, clock.Now()};
  ScheduleVersion v2{2, 9, Named("b"), {}, clock.Now()};
  ScheduleVersion bad_step{2, 0, Named("b"), {}, clock.Now()};
  EXPECT_EQ(versions->Restore({v2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(versions->Restore({v1, bad_step}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(versions->Restore({v1, v2}).ok());
  EXPECT_EQ(versions->ScheduleForStep(8)->schedule.name, "a");
  EXPECT_EQ(versions->ScheduleForStep(9)->schedule.name, "b");
  EXPECT_EQ(versions->Restore({v1}).code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<ScheduleVersion> v3 =
      versions->Publish(Named("c"), PredictedStats{}, 5);
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->number, 3);
  EXPECT_EQ(v3->effective_step, 10);
}

}  // namespace
}  // namespace zbpp::coordinator
