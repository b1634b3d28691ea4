#include "coordinator/core/step_summary.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

StageReport Report(const std::string& worker, double step, double span,
                   double busy, double idle, double w, double reduce,
                   double exposed) {
  StageReport report;
  report.worker_id = worker;
  report.step_seconds = step;
  report.span_seconds = span;
  report.busy_seconds = busy;
  report.idle_seconds = idle;
  report.comm_seconds = 0.5;
  report.f_seconds = 1;
  report.b_seconds = 2;
  report.w_seconds = w;
  report.reduce_seconds = reduce;
  report.exposed_reduce_seconds = exposed;
  return report;
}

// p = 2 stages, d = 2 replicas; worker index = replica * 2 + rank.
StepReports TwoByTwo() {
  StepReports step;
  step.step = 7;
  step.version = 3;
  step.stages = 2;
  step.replicas = 2;
  step.tokens_per_replica = 1000;
  step.predicted_bubble_rate = 0.1;
  step.predicted_stage_bubble_rate = {0.2, 0.3};
  step.reports[0] = Report("w0", 10, 9, 6, 3, 3, 0.4, 0.1);
  step.reports[1] = Report("w1", 10.5, 10, 8, 2, 4, 0.2, 0);
  step.reports[2] = Report("w2", 9, 8, 4, 4, 1, 0.6, 0.3);
  step.reports[3] = Report("w3", 10, 9.5, 8, 1.5, 2, 0.2, 0.1);
  step.reports[1].loss = 2.0;
  step.reports[1].eval_loss = 1.8;
  step.reports[3].loss = 3.0;
  step.reports[0].parameter_sum = 1.5;
  step.reports[1].parameter_sum = 2.5;
  step.reports[2].parameter_sum = 99;  // A replica's copy: not counted.
  step.reports[0].checkpoint_written = true;
  step.reports[1].checkpoint_written = true;
  return step;
}

TEST(SummarizeStep, AggregatesRanksAndReplicasAsDocumented) {
  const StepOutcome outcome = SummarizeStep(TwoByTwo());
  const v1::StepSummary& s = outcome.summary;
  EXPECT_EQ(s.step(), 7);
  EXPECT_EQ(s.schedule_version(), 3);
  EXPECT_DOUBLE_EQ(s.step_seconds(), 10.5);            // The slowest rank.
  EXPECT_DOUBLE_EQ(s.tokens_per_second(), 2 * 1000 / 10.5);
  // 1 - Σ busy / (p d cost) = 1 - 26 / (4 * 10), cost = the largest span.
  EXPECT_DOUBLE_EQ(s.measured_bubble_rate(), 0.35);
  EXPECT_DOUBLE_EQ(s.predicted_bubble_rate(), 0.1);
  EXPECT_DOUBLE_EQ(s.loss(), 2.5);       // Mean of the replicas' last stages.
  EXPECT_DOUBLE_EQ(s.eval_loss(), 1.8);  // Only one reported one.
  ASSERT_EQ(s.stages_size(), 2);
  // Rank 0: mean busy (6 + 4) / 2 = 5 of the cost 10.
  EXPECT_EQ(s.stages(0).worker_id(), "w0");
  EXPECT_DOUBLE_EQ(s.stages(0).measured_bubble_rate(), 0.5);
  EXPECT_DOUBLE_EQ(s.stages(0).predicted_bubble_rate(), 0.2);
  EXPECT_DOUBLE_EQ(s.stages(0).idle_seconds(), 3.5);
  EXPECT_DOUBLE_EQ(s.stages(0).w_seconds(), 2);
  EXPECT_DOUBLE_EQ(s.stages(0).reduce_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(s.stages(0).exposed_reduce_seconds(), 0.2);
  // Rank 1: mean busy 8.
  EXPECT_EQ(s.stages(1).worker_id(), "w1");
  EXPECT_DOUBLE_EQ(s.stages(1).measured_bubble_rate(), 0.2);
  EXPECT_DOUBLE_EQ(s.stages(1).idle_seconds(), 1.75);
  EXPECT_DOUBLE_EQ(s.stages(1).w_seconds(), 3);
  EXPECT_DOUBLE_EQ(s.stages(1).exposed_reduce_seconds(), 0.05);
  ASSERT_TRUE(outcome.param_checksum.has_value());
  EXPECT_DOUBLE_EQ(*outcome.param_checksum, 4.0);  // Replica 0's ranks.
  EXPECT_THAT(outcome.checkpointed_stages, ::testing::ElementsAre(0, 1));
}

TEST(SummarizeStep, MissingOrNonFiniteInputsLeaveTheirFieldsHonest) {
  StepReports step = TwoByTwo();
  step.reports[1].parameter_sum.reset();
  step.reports[1].loss = std::nan("");
  step.reports[3].loss = 3.0;
  step.reports[1].checkpoint_written = false;
  for (auto& [index, report] : step.reports) report.span_seconds = 0;
  const StepOutcome outcome = SummarizeStep(step);
  EXPECT_FALSE(outcome.param_checksum.has_value());
  EXPECT_TRUE(std::isnan(outcome.summary.loss()));  // Diverged: recorded.
  EXPECT_EQ(outcome.summary.measured_bubble_rate(), 0);  // No span measured.
  EXPECT_EQ(outcome.summary.stages(0).measured_bubble_rate(), 0);
  EXPECT_THAT(outcome.checkpointed_stages, ::testing::ElementsAre(0));
}

// The breakdown of a stage is the mean of its replicas', field by field
// (ReportStepRequest.breakdown as CopyReportFacts keeps it).
TEST(SummarizeStep, BreakdownIsTheMeanOverTheReplicas) {
  StepReports step = TwoByTwo();
  for (auto& [index, report] : step.reports) {
    v1::StepBreakdown* b = report.timeline.mutable_breakdown();
    b->set_compute_seconds(1 + index);
    b->set_input_wait_seconds(0.5 * index);
    b->set_gap_seconds(0.25 * index);
    b->set_grant_seconds(0.25 * index);
  }
  const v1::StepSummary s = SummarizeStep(step).summary;
  // Stage 0 = worker indexes 0 and 2, stage 1 = 1 and 3.
  EXPECT_DOUBLE_EQ(s.stages(0).breakdown().compute_seconds(), 2);
  EXPECT_DOUBLE_EQ(s.stages(0).breakdown().input_wait_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(s.stages(1).breakdown().compute_seconds(), 3);
  EXPECT_DOUBLE_EQ(s.stages(1).breakdown().gap_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(s.stages(1).breakdown().grant_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(s.stages(1).breakdown().report_seconds(), 0);
}

// A rank's measured peak is its fullest replica's (the memory the rank must
// fit), not the mean; the predicted peak is the simulation's entry for it.
TEST(SummarizeStep, PeakActivationIsTheLargestReplicasNextToThePrediction) {
  StepReports step = TwoByTwo();
  step.reports[0].peak_activation_bytes = 3e6;  // Stage 0, replica 0.
  step.reports[2].peak_activation_bytes = 5e6;  // Stage 0, replica 1.
  step.reports[1].peak_activation_bytes = 2e6;  // Stage 1, replica 0.
  step.reports[3].peak_activation_bytes = 1e6;  // Stage 1, replica 1.
  step.predicted_peak_activation_bytes = {4e6, 2.5e6};
  const v1::StepSummary s = SummarizeStep(step).summary;
  EXPECT_DOUBLE_EQ(s.stages(0).peak_activation_bytes(), 5e6);
  EXPECT_DOUBLE_EQ(s.stages(1).peak_activation_bytes(), 2e6);
  EXPECT_DOUBLE_EQ(s.stages(0).predicted_peak_activation_bytes(), 4e6);
  EXPECT_DOUBLE_EQ(s.stages(1).predicted_peak_activation_bytes(), 2.5e6);

  // Unmeasured (a worker that predates it) and unpredicted stay 0.
  step = TwoByTwo();
  step.predicted_peak_activation_bytes = {4e6};
  const v1::StepSummary unmeasured = SummarizeStep(step).summary;
  EXPECT_EQ(unmeasured.stages(0).peak_activation_bytes(), 0);
  EXPECT_EQ(unmeasured.stages(1).predicted_peak_activation_bytes(), 0);
}

}  // namespace
}  // namespace zbpp::coordinator
