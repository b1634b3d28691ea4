#include "coordinator/core/cost_model.h"

#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using sched::PassKind;
using ::testing::HasSubstr;

std::unique_ptr<CostModel> MustCreate(int stages, int window) {
  absl::StatusOr<std::unique_ptr<CostModel>> model =
      CostModel::Create({.num_virtual_stages = stages, .window_steps = window});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

sched::Problem Base(int stages) {
  return sched::Problem::Uniform(stages, 1, 8, sched::VirtualStageCost{}, 0.25);
}

TEST(Median, OddEvenAndEmpty) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({7}), 7);
  EXPECT_DOUBLE_EQ(Median({}), 0);
}

TEST(CostModel, BadOptionsAreRefused) {
  EXPECT_EQ(CostModel::Create({.num_virtual_stages = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CostModel::Create({.num_virtual_stages = 2, .window_steps = 0}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(CostModel, MedianIgnoresOneOutlierThatTheMeanWouldNot) {
  std::unique_ptr<CostModel> model = MustCreate(1, 8);
  const std::vector<double> f = {1.0, 1.1, 0.9, 100.0, 1.0, 1.05, 0.95};
  for (double seconds : f) {
    ASSERT_TRUE(model->AddVirtualStageTiming({0, seconds, 2 * seconds, 0.5}).ok());
  }
  absl::StatusOr<sched::Problem> problem = model->ToProblem(Base(1));
  ASSERT_TRUE(problem.ok()) << problem.status();
  const double mean = std::accumulate(f.begin(), f.end(), 0.0) / f.size();
  EXPECT_DOUBLE_EQ(problem->virtual_stages[0].f_seconds, 1.0);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[0].b_seconds, 2.0);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[0].w_seconds, 0.5);
  EXPECT_GT(mean, 10 * problem->virtual_stages[0].f_seconds);
}

TEST(CostModel, WindowSlidesOverTheLastSteps) {
  std::unique_ptr<CostModel> model = MustCreate(2, 3);
  for (double seconds : {1.0, 1.0, 1.0}) {
    ASSERT_TRUE(model->AddVirtualStageTiming({0, seconds, seconds, seconds}).ok());
    ASSERT_TRUE(model->AddVirtualStageTiming({1, 2, 2, 2}).ok());
  }
  // Stage 0 slows down: one slow step is an outlier, two are the new median,
  // three fill the window.
  std::vector<double> expected = {1.0, 3.0, 3.0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(model->AddVirtualStageTiming({0, 3, 3, 3}).ok());
    absl::StatusOr<sched::Problem> problem = model->ToProblem(Base(2));
    ASSERT_TRUE(problem.ok()) << problem.status();
    EXPECT_DOUBLE_EQ(problem->virtual_stages[0].f_seconds, expected[i]) << i;
    EXPECT_DOUBLE_EQ(problem->virtual_stages[1].f_seconds, 2.0);
  }
  EXPECT_EQ(model->SampleCount(0), 3);
  // Back to fast: the slow samples leave the window after two steps.
  ASSERT_TRUE(model->AddVirtualStageTiming({0, 1, 1, 1}).ok());
  EXPECT_DOUBLE_EQ(model->ToProblem(Base(2))->virtual_stages[0].f_seconds, 3.0);
  ASSERT_TRUE(model->AddVirtualStageTiming({0, 1, 1, 1}).ok());
  EXPECT_DOUBLE_EQ(model->ToProblem(Base(2))->virtual_stages[0].f_seconds, 1.0);
}

TEST(CostModel, MeasuredMemoryReplacesTheBaseUntilTheNextProfile) {
  std::unique_ptr<CostModel> model = MustCreate(2, 3);
  ASSERT_TRUE(model->AddVirtualStageTiming({0, 1, 1, 1}).ok());
  ASSERT_TRUE(model->AddVirtualStageTiming({1, 1, 1, 1}).ok());
  const sched::Problem base = Base(2);
  EXPECT_DOUBLE_EQ(model->ToProblem(base)->virtual_stages[0].m_b_bytes,
                   base.virtual_stages[0].m_b_bytes);
  ASSERT_TRUE(model->SetMeasuredMemory(0, 300, 100, 40).ok());
  ASSERT_TRUE(model->SetMeasuredMemory(0, 500, 200, 70).ok());  // The latest stands.
  const sched::Problem measured = *model->ToProblem(base);
  EXPECT_DOUBLE_EQ(measured.virtual_stages[0].m_b_bytes, 500);
  EXPECT_DOUBLE_EQ(measured.virtual_stages[0].m_w_bytes, 200);
  EXPECT_DOUBLE_EQ(measured.virtual_stages[0].transient_bytes, 70);
  EXPECT_DOUBLE_EQ(measured.virtual_stages[1].transient_bytes, 0);
  EXPECT_DOUBLE_EQ(measured.virtual_stages[1].m_b_bytes, base.virtual_stages[1].m_b_bytes);
  EXPECT_EQ(measured.memory_limit_bytes, base.memory_limit_bytes);
  // Refused, nothing changed: out of range, negative, M_W above M_B.
  EXPECT_EQ(model->SetMeasuredMemory(2, 1, 1, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->SetMeasuredMemory(1, -1, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->SetMeasuredMemory(1, 1, 2, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->SetMeasuredMemory(1, 2, 1, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(model->ToProblem(base)->virtual_stages[1].m_b_bytes,
                   base.virtual_stages[1].m_b_bytes);
}

TEST(CostModel, DriftComparesTheNewestHalfOfTheWindowWithTheOldest) {
  std::unique_ptr<CostModel> model = MustCreate(2, 8);
  ASSERT_NE(model, nullptr);
  EXPECT_DOUBLE_EQ(model->Drift(), 0);  // No samples.
  // Stage 1 steady at 3 s per F+B+W, stage 0 too until it slows down 2x.
  for (int step = 0; step < 8; ++step) {
    ASSERT_TRUE(model->AddVirtualStageTiming({1, 1, 1, 1}).ok());
    ASSERT_TRUE(model->AddVirtualStageTiming({0, 1, 1, 1}).ok());
  }
  EXPECT_DOUBLE_EQ(model->Drift(), 0);
  // Four slow steps: the newest half is all slow, the oldest all fast.
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(model->AddVirtualStageTiming({0, 2, 2, 2}).ok());
  }
  EXPECT_DOUBLE_EQ(model->Drift(), 1);
  // Seven of eight slow: both halves' medians are slow again.
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(model->AddVirtualStageTiming({0, 2, 2, 2}).ok());
  }
  EXPECT_DOUBLE_EQ(model->Drift(), 0);
}

TEST(CostModel, ToProblemNeedsEveryStageAndTheRightShape) {
  std::unique_ptr<CostModel> model = MustCreate(3, 4);
  ASSERT_TRUE(model->AddVirtualStageTiming({0, 1, 1, 1}).ok());
  ASSERT_TRUE(model->AddVirtualStageTiming({2, 1, 1, 1}).ok());
  absl::StatusOr<sched::Problem> problem = model->ToProblem(Base(3));
  EXPECT_EQ(problem.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(problem.status().message()),
              HasSubstr("no timing reported yet for virtual stage 1 of 3"));
  ASSERT_TRUE(model->AddVirtualStageTiming({1, 1, 1, 1}).ok());
  EXPECT_TRUE(model->ToProblem(Base(3)).ok());
  EXPECT_EQ(model->ToProblem(Base(2)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CostModel, KeepsMemoryAndAveragesHopMedians) {
  std::unique_ptr<CostModel> model = MustCreate(3, 4);
  for (int s = 0; s < 3; ++s)
    ASSERT_TRUE(model->AddVirtualStageTiming({s, 1, 1, 1}).ok());
  sched::Problem base = Base(3);
  base.virtual_stages[1].m_b_bytes = 7;
  base.memory_limit_bytes = {10, 11, 12};
  // No hop measured: the base's T_comm stays.
  EXPECT_DOUBLE_EQ(model->ToProblem(base)->comm_seconds, 0.25);
  for (double seconds : {0.1, 0.1, 5.0}) {
    ASSERT_TRUE(model->AddHopTiming({0, seconds}).ok());
  }
  ASSERT_TRUE(model->AddHopTiming({1, 0.3}).ok());
  absl::StatusOr<sched::Problem> problem = model->ToProblem(base);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_DOUBLE_EQ(problem->comm_seconds, (0.1 + 0.3) / 2);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[1].m_b_bytes, 7);
  EXPECT_EQ(problem->memory_limit_bytes, base.memory_limit_bytes);
}

TEST(CostModel, BadSamplesAreRefusedAndNotAdded) {
  std::unique_ptr<CostModel> model = MustCreate(2, 4);
  EXPECT_EQ(model->AddVirtualStageTiming({2, 1, 1, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->AddVirtualStageTiming({-1, 1, 1, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status negative = model->AddVirtualStageTiming({0, 1, -1, 1});
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(negative.message()), HasSubstr("stage 0 b_seconds"));
  EXPECT_EQ(model->AddVirtualStageTiming({0, 1, 1, std::nan("")}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->SampleCount(0), 0);
  EXPECT_EQ(model->AddHopTiming({1, 0.1}).code(),
            absl::StatusCode::kInvalidArgument);  // 2 stages: one hop
  EXPECT_TRUE(model->AddHopTiming({0, 0.1}).ok());
}

TEST(AverageStepPasses, AveragesPerStageAndSplitsFusedBackward) {
  sched::Problem base = Base(3);
  base.virtual_stages[1].b_seconds = 1;
  base.virtual_stages[1].w_seconds = 3;  // prior: W is 3/4 of BW
  const std::vector<MeasuredPass> passes = {
      {PassKind::kF, 0, 1.0}, {PassKind::kF, 0, 3.0},
      {PassKind::kB, 0, 2.0}, {PassKind::kB, 0, 2.0},
      {PassKind::kW, 0, 0.5}, {PassKind::kW, 0, 1.5},
      {PassKind::kF, 1, 1.0}, {PassKind::kBW, 1, 8.0},
      {PassKind::kF, 2, 1.0},  // no backward yet: left out
  };
  absl::StatusOr<std::vector<VirtualStageTiming>> timings =
      AverageStepPasses(passes, base);
  ASSERT_TRUE(timings.ok()) << timings.status();
  ASSERT_EQ(timings->size(), 2u);
  EXPECT_EQ((*timings)[0].virtual_stage, 0);
  EXPECT_DOUBLE_EQ((*timings)[0].f_seconds, 2.0);
  EXPECT_DOUBLE_EQ((*timings)[0].b_seconds, 2.0);
  EXPECT_DOUBLE_EQ((*timings)[0].w_seconds, 1.0);
  EXPECT_EQ((*timings)[1].virtual_stage, 1);
  EXPECT_DOUBLE_EQ((*timings)[1].b_seconds, 2.0);
  EXPECT_DOUBLE_EQ((*timings)[1].w_seconds, 6.0);

  const std::vector<MeasuredPass> bad = {{PassKind::kF, 3, 1.0}};
  EXPECT_EQ(AverageStepPasses(bad, base).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<MeasuredPass> negative = {{PassKind::kF, 0, -1.0}};
  EXPECT_EQ(AverageStepPasses(negative, base).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AverageStepPasses, AReductionTimesItsStage) {
  const std::vector<MeasuredPass> passes = {
      {PassKind::kF, 0, 1.0},      {PassKind::kB, 0, 1.0}, {PassKind::kW, 0, 1.0},
      {PassKind::kReduce, 0, 4.0}, {PassKind::kF, 1, 1.0}, {PassKind::kBW, 1, 2.0},
  };
  absl::StatusOr<std::vector<VirtualStageTiming>> timings = AverageStepPasses(passes, Base(2));
  ASSERT_TRUE(timings.ok()) << timings.status();
  ASSERT_EQ(timings->size(), 2u);
  ASSERT_TRUE((*timings)[0].reduce_seconds.has_value());
  EXPECT_DOUBLE_EQ(*(*timings)[0].reduce_seconds, 4.0);
  EXPECT_DOUBLE_EQ((*timings)[0].w_seconds, 1.0) << "the reduction is not a W";
  EXPECT_FALSE((*timings)[1].reduce_seconds.has_value());
}

TEST(CostModel, ReductionMedianReplacesTheEstimateOnceMeasured) {
  std::unique_ptr<CostModel> model = MustCreate(2, 3);
  sched::Problem base = Base(2);
  base.virtual_stages[0].reduce_seconds = 9.0;  // The bandwidth model's estimate.
  base.virtual_stages[1].reduce_seconds = 9.0;
  for (double reduce : {0.2, 50.0, 0.4, 0.3}) {
    VirtualStageTiming timing{0, 1, 1, 1, reduce};
    ASSERT_TRUE(model->AddVirtualStageTiming(timing).ok());
  }
  ASSERT_TRUE(model->AddVirtualStageTiming({1, 1, 1, 1, std::nullopt}).ok());
  absl::StatusOr<sched::Problem> problem = model->ToProblem(base);
  ASSERT_TRUE(problem.ok()) << problem.status();
  // The window of 3 holds 50, 0.4, 0.3.
  EXPECT_DOUBLE_EQ(problem->virtual_stages[0].reduce_seconds, 0.4);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[1].reduce_seconds, 9.0) << "none measured: the estimate";

  VirtualStageTiming bad{0, 1, 1, 1, -1.0};
  EXPECT_EQ(model->AddVirtualStageTiming(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->SampleCount(0), 3);
}

}  // namespace
}  // namespace zbpp::coordinator
