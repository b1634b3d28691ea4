// MeasureStepReport (coordinator/core/step_report_check.h) on hand-made
// schedules: what a report's timings measure (partial passes of gradient
// buckets, reductions beside the passes), which hops a latency samples
// under a V placement, and the refusal of timings that do not match the
// stage's actions; the range checks of a report's step breakdown
// (CheckReportRanges; the others are exercised through the Coordinator in
// tests/coordinator/core/coordinator_steps_test.cc).

#include "coordinator/core/step_report_check.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::Field;

/// One stage, one microbatch, its weights in two gradient buckets: F, B,
/// then W@0, REDUCE_GRAD@0, W@1, REDUCE_GRAD@1.
sched::Schedule BucketedSchedule() {
  sched::Schedule schedule;
  schedule.name = "hand";
  schedule.stages = 1;
  schedule.microbatches = 1;
  schedule.stage_of = {0};
  schedule.actions.resize(1);
  for (const char* text : {"0F0", "0I0", "0W0@0", "0REDUCE_GRAD@0", "0W0@1", "0REDUCE_GRAD@1"}) {
    schedule.actions[0].push_back(*sched::ParseAction(text));
  }
  return schedule;
}

/// A report of `stage` at step 0 with the given action times, the step
/// ending at the last of them.
v1::ReportStepRequest Report(int stage, const std::vector<double>& starts,
                             const std::vector<double>& ends) {
  v1::ReportStepRequest report;
  report.set_worker_id("worker-1");
  report.set_stage(stage);
  double last = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    report.add_action_start_seconds(starts[i]);
    report.add_action_end_seconds(ends[i]);
    last = std::max(last, ends[i]);
  }
  report.set_step_seconds(last);
  return report;
}

TEST(MeasureStepReport, PartialPassesStandForTheWholeAndReductionsAreNotBusyTime) {
  const sched::Problem base = sched::Problem::Uniform(1, 1, 1, {}, 0);
  // F 1 s, B 1 s, each half W 0.5 s, each half reduction 1 s running
  // beside the next W and after the last one.
  v1::ReportStepRequest report = Report(0, {0, 1, 2, 2.5, 2.5, 3.5}, {1, 2, 2.5, 3.5, 3, 4.5});
  report.set_loss(2.5);
  absl::StatusOr<MeasuredReport> measured =
      MeasureStepReport(report, BucketedSchedule(), 3, base, /*start_step=*/0);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const StageReport& stage = measured->stage;
  EXPECT_DOUBLE_EQ(stage.f_seconds, 1);
  EXPECT_DOUBLE_EQ(stage.b_seconds, 1);
  EXPECT_DOUBLE_EQ(stage.w_seconds, 1);       // Each half counts twice.
  EXPECT_DOUBLE_EQ(stage.reduce_seconds, 2);  // Likewise.
  EXPECT_DOUBLE_EQ(stage.busy_seconds, 3);    // F + B + both halves of W.
  EXPECT_DOUBLE_EQ(stage.span_seconds, 4.5);
  EXPECT_DOUBLE_EQ(stage.exposed_reduce_seconds, 1.5);  // After the last W ends at 3.
  ASSERT_EQ(stage.timings.size(), 1u);
  EXPECT_DOUBLE_EQ(stage.timings[0].w_seconds, 1);
  ASSERT_TRUE(stage.timings[0].reduce_seconds.has_value());
  EXPECT_DOUBLE_EQ(*stage.timings[0].reduce_seconds, 2);
  EXPECT_EQ(stage.worker_id, "worker-1");
  EXPECT_EQ(stage.loss, 2.5);
  EXPECT_EQ(stage.timeline.action_end_seconds_size(), 6);
  EXPECT_TRUE(measured->hops.empty());
}

// ZB-V places virtual stages 0..3 on stages 0, 1, 1, 0: the one link
// between the two stages carries hops 0 (0 -> 1) and 2 (2 -> 3), both ways;
// hop 1 stays on stage 1.
TEST(MeasureStepReport, ALatencySamplesEveryHopItsLinkCarries) {
  const sched::Problem problem = sched::Problem::Uniform(2, 2, 4, {}, 0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate("zb-v", problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  ASSERT_EQ(schedule->stage_of, (std::vector<int>{0, 1, 1, 0}));
  absl::StatusOr<sched::SimulationResult> sim = sched::Simulate(problem, *schedule);
  ASSERT_TRUE(sim.ok()) << sim.status();
  for (int stage : {0, 1}) {
    std::vector<double> starts, ends;
    for (const sched::ActionTiming& t : sim->timings[stage]) {
      starts.push_back(t.start_seconds);
      ends.push_back(t.end_seconds);
    }
    v1::ReportStepRequest report = Report(stage, starts, ends);
    v1::HopLatency* hop = report.add_hop_latencies();
    hop->set_to_stage(1 - stage);
    hop->set_one_way_seconds(0.25);
    absl::StatusOr<MeasuredReport> measured = MeasureStepReport(report, *schedule, 1, problem, 0);
    ASSERT_TRUE(measured.ok()) << measured.status();
    auto sample = [](int h) {
      return AllOf(Field(&HopTiming::hop, h), Field(&HopTiming::seconds, DoubleEq(0.25)));
    };
    EXPECT_THAT(measured->hops, ElementsAre(sample(0), sample(2))) << "stage " << stage;
    // Two chunks on one stage hand off without a hop.
    hop->set_to_stage(stage);
    EXPECT_EQ(MeasureStepReport(report, *schedule, 1, problem, 0).status().message(),
              absl::StrCat("hop_latencies[0].to_stage: stage ", stage,
                           " is not a pipeline neighbour of stage ", stage));
  }
}

TEST(MeasureStepReport, TimingsThatDoNotMatchTheStagesActionsAreRefused) {
  const sched::Problem base = sched::Problem::Uniform(1, 1, 1, {}, 0);
  const v1::ReportStepRequest report = Report(0, {0, 1}, {1, 2});
  const absl::Status refused =
      MeasureStepReport(report, BucketedSchedule(), 3, base, 0).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "action_start_seconds/action_end_seconds: 2/2 timings for 6 actions of stage 0 in "
            "version 3");
  // An action that ends before it starts names itself.
  const absl::Status backwards =
      MeasureStepReport(Report(0, {0, 1, 2, 2.5, 3, 3.5}, {1, 2, 2.5, 3.5, 2.9, 4.5}),
                        BucketedSchedule(), 3, base, 0)
          .status();
  EXPECT_EQ(backwards.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backwards.message()),
              ::testing::StartsWith("action_end_seconds[4]: action 0W0@1"));
}

v1::ReportStepRequest ReportWithBreakdown() {
  v1::ReportStepRequest r;
  r.set_step_seconds(1.0);
  v1::StepBreakdown* b = r.mutable_breakdown();
  b->set_compute_seconds(0.6);
  b->set_input_wait_seconds(0.3);
  b->set_overhead_seconds(0.1);
  b->set_gap_seconds(0.2);
  b->set_validation_seconds(0.15);
  b->set_report_seconds(0.05);
  return r;
}

// A breakdown's parts are times within their whole; anything else is
// refused naming the field, before it reaches a summary.
TEST(CheckReportRanges, BreakdownPartsAreTimesWithinTheirWhole) {
  EXPECT_TRUE(CheckReportRanges(ReportWithBreakdown()).ok());
  struct Case {
    void (*edit)(v1::StepBreakdown&);
    const char* message;
  };
  const Case cases[] = {
      {[](v1::StepBreakdown& b) { b.set_input_wait_seconds(-0.1); },
       "breakdown.input_wait_seconds: must be a finite time >= 0"},
      {[](v1::StepBreakdown& b) { b.set_overhead_seconds(std::nan("")); },
       "breakdown.overhead_seconds: must be a finite time >= 0"},
      {[](v1::StepBreakdown& b) { b.set_compute_seconds(2); },
       "breakdown.compute_seconds: 2 is longer than step_seconds (1)"},
      {[](v1::StepBreakdown& b) { b.set_gap_seconds(1e9); },
       "breakdown.gap_seconds: must be at most 86400 s"},
      {[](v1::StepBreakdown& b) { b.set_grant_seconds(0.5); },
       "breakdown.grant_seconds: 0.5 is longer than breakdown.gap_seconds (0.2)"},
      {[](v1::StepBreakdown& b) { b.set_drain_seconds(-1); },
       "breakdown.drain_seconds: must be a finite time >= 0"},
  };
  for (const Case& c : cases) {
    v1::ReportStepRequest r = ReportWithBreakdown();
    c.edit(*r.mutable_breakdown());
    const absl::Status st = CheckReportRanges(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace zbpp::coordinator
