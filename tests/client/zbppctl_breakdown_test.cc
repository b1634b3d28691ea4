// zbppctl report's breakdown (client/zbppctl_breakdown.h): where each
// stage's time went, the part that most makes the measured bubble exceed
// the predicted one, the gap between steps; and the gap's phases in the
// measured trace.

#include "client/zbppctl_breakdown.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/zbppctl_json.h"
#include "client/zbppctl_report.h"
#include "client/zbppctl_schedule.h"
#include "nlohmann/json.hpp"

namespace zbpp::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Job TwoStageJob() {
  v1::Job job;
  job.set_id("job-3");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_steps_completed(10);
  v1::JobSpec* spec = job.mutable_spec();
  spec->mutable_schedule()->set_name("zb-2p");
  spec->mutable_pipeline()->set_stages(2);
  spec->mutable_pipeline()->set_microbatches(4);
  spec->mutable_pipeline()->set_microbatch_size(1);
  spec->mutable_model()->set_seq_len(64);
  return job;
}

// Ten 0.5 s steps. Stage 0: 0.4 s compute, 0.05 s input waits, 0.05 s
// overhead, and a 0.1 s gap before each step, 0.06 s of it waiting for the
// grant; predicted bubble 0.1. Stage 1: 0.3 s compute, 0.15 s input waits
// (0.3 of the step against a predicted 0.18), 0.05 s overhead, and a 0.1 s
// gap, 0.07 s of it validation.
std::vector<v1::StepSummary> Steps() {
  std::vector<v1::StepSummary> steps;
  for (int i = 0; i < 10; ++i) {
    v1::StepSummary s;
    s.set_step(i);
    s.set_step_seconds(0.5);
    s.mutable_complete_time()->set_seconds(100 + i);
    for (int r = 0; r < 2; ++r) {
      v1::StageStepStats* st = s.add_stages();
      st->set_stage(r);
      st->set_predicted_bubble_rate(r == 0 ? 0.1 : 0.18);
      st->set_measured_bubble_rate(r == 0 ? 0.2 : 0.4);
      v1::StepBreakdown* b = st->mutable_breakdown();
      b->set_compute_seconds(r == 0 ? 0.4 : 0.3);
      b->set_input_wait_seconds(r == 0 ? 0.05 : 0.15);
      b->set_overhead_seconds(0.05);
      b->set_gap_seconds(0.1);
      b->set_report_seconds(0.01);
      if (r == 0) {
        b->set_grant_seconds(0.06);
        b->set_validation_seconds(0.03);
      } else {
        b->set_grant_seconds(0.02);
        b->set_validation_seconds(0.07);
      }
    }
    steps.push_back(s);
  }
  return steps;
}

TEST(Breakdown, NamesTheLargestExcessOverThePredictionAndTheGapsLargestPart) {
  const ReportBreakdown b = BuildBreakdown(Steps(), 2);
  ASSERT_TRUE(b.measured);
  ASSERT_EQ(b.stages.size(), 2u);
  EXPECT_NEAR(b.stages[1].input_wait_seconds(), 0.15, 1e-12);
  EXPECT_NEAR(b.stages[0].grant_seconds(), 0.06, 1e-12);
  // Stage 1's input waits: 0.3 of the step, 0.18 predicted: +0.12, more
  // than either stage's overhead (0.1) or stage 0's waits (0.1 - 0.1).
  ASSERT_TRUE(b.bubble_excess.has_value());
  EXPECT_EQ(b.bubble_excess->part, "input waits");
  EXPECT_EQ(b.bubble_excess->stage, 1);
  EXPECT_NEAR(b.bubble_excess->share, 0.12, 1e-12);
  EXPECT_NEAR(b.bubble_excess->seconds, 0.15, 1e-12);
  // 0.1 s between 0.5 s steps: a sixth of the wall clock; the largest part
  // is stage 1's validation.
  EXPECT_NEAR(b.gap_seconds, 0.1, 1e-12);
  EXPECT_NEAR(b.gap_share, 0.1 / 0.6, 1e-12);
  ASSERT_TRUE(b.largest_gap_part.has_value());
  EXPECT_EQ(b.largest_gap_part->part, "validation");
  EXPECT_EQ(b.largest_gap_part->stage, 1);
  EXPECT_NEAR(b.largest_gap_part->share, 0.14, 1e-12);

  const std::string text = BreakdownText(b, /*replicas=*/1);
  EXPECT_THAT(text, HasSubstr("bubble excess: input waits on stage 1 (+0.1200 of the step, "
                              "0.1500 s)"));
  EXPECT_THAT(text, HasSubstr("between steps: 0.1000 s per step (16.7% of the wall clock), "
                              "most of it validation on stage 1 (0.0700 s"));
  EXPECT_THAT(text, HasSubstr("STAGE  STEP    COMPUTE  INPUT_WAIT  SEND_WAIT  VALIDATION_CHECK"
                              "  OVERHEAD\n"));
  EXPECT_THAT(text, HasSubstr("GRANT"));
  EXPECT_THAT(text, Not(HasSubstr("REDUCTION_WAIT")));  // One replica.
  EXPECT_THAT(BreakdownText(b, /*replicas=*/2), HasSubstr("REDUCTION_WAIT"));
}

TEST(Breakdown, OverheadBeyondThePredictionIsNamedWhenItIsTheLargest) {
  std::vector<v1::StepSummary> steps = Steps();
  for (v1::StepSummary& s : steps) {
    // Stage 1 waits as predicted; stage 0's executor overhead is 0.2 s.
    s.mutable_stages(1)->mutable_breakdown()->set_input_wait_seconds(0.09);
    s.mutable_stages(0)->mutable_breakdown()->set_overhead_seconds(0.2);
  }
  const ReportBreakdown b = BuildBreakdown(steps, 2);
  ASSERT_TRUE(b.bubble_excess.has_value());
  EXPECT_EQ(b.bubble_excess->part, "executor overhead");
  EXPECT_EQ(b.bubble_excess->stage, 0);
  EXPECT_NEAR(b.bubble_excess->share, 0.4, 1e-12);
}

TEST(Breakdown, NoExcessWhenEveryWaitIsPredicted) {
  std::vector<v1::StepSummary> steps = Steps();
  for (v1::StepSummary& s : steps) {
    for (v1::StageStepStats& st : *s.mutable_stages()) {
      st.mutable_breakdown()->set_overhead_seconds(0);
      st.set_predicted_bubble_rate(0.5);
    }
  }
  const ReportBreakdown b = BuildBreakdown(steps, 2);
  EXPECT_FALSE(b.bubble_excess.has_value());
  EXPECT_THAT(BreakdownText(b, 1), HasSubstr("bubble excess: none"));
}

TEST(Breakdown, InTheReportTableAndJson) {
  absl::StatusOr<TrainingReport> r = BuildReport(TwoStageJob(), Steps());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(ReportTable(*r), HasSubstr("bubble excess: input waits on stage 1 (+0.1200"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(*r));
  const nlohmann::json& b = json["breakdown"];
  ASSERT_TRUE(b.is_object()) << json.dump();
  EXPECT_EQ(b["bubble_excess"]["part"], "input waits");
  EXPECT_EQ(b["bubble_excess"]["stage"], 1);
  EXPECT_NEAR(b["stages"][1]["input_wait_seconds"].get<double>(), 0.15, 1e-12);
  EXPECT_NEAR(b["stages"][0]["grant_seconds"].get<double>(), 0.06, 1e-12);
  EXPECT_NEAR(b["gap_share"].get<double>(), 0.1 / 0.6, 1e-12);
  EXPECT_EQ(b["largest_gap_part"]["part"], "validation");

  // Steps from a coordinator without breakdowns: nothing said, null.
  std::vector<v1::StepSummary> plain = Steps();
  for (v1::StepSummary& s : plain) {
    for (v1::StageStepStats& st : *s.mutable_stages()) st.clear_breakdown();
  }
  TrainingReport old = *BuildReport(TwoStageJob(), plain);
  EXPECT_THAT(ReportTable(old), Not(HasSubstr("bubble excess")));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(old))["breakdown"].is_null());
}

// The measured trace draws each stage's gap before its step start, phase by
// phase, and moves the step right by the longest gap.
TEST(MeasuredTrace, DrawsTheGapsPhasesBeforeEachStagesStep) {
  v1::Job job = TwoStageJob();
  v1::ScheduleVersion* version = job.mutable_schedule();
  version->set_version(1);
  v1::Schedule* s = version->mutable_schedule();
  s->set_name("gpipe");
  s->set_stages(2);
  s->set_chunks(1);
  s->set_microbatches(1);
  s->add_stage_of(0);
  s->add_stage_of(1);
  s->add_stage_actions()->add_actions("0F0");
  s->add_stage_actions()->add_actions("1F0");
  v1::StepTimeline* timeline = job.mutable_last_step_timeline();
  timeline->set_step(9);
  timeline->set_schedule_version(1);
  for (int r = 0; r < 2; ++r) {
    v1::StageTimeline* stage = timeline->add_stages();
    stage->add_action_start_seconds(0.001);
    stage->add_action_end_seconds(0.002);
    v1::StepBreakdown* b = stage->mutable_breakdown();
    b->set_gap_seconds(r == 0 ? 0.010 : 0.004);
    b->set_validation_seconds(r == 0 ? 0.003 : 0.004);
    if (r == 0) b->set_grant_seconds(0.007);
  }
  absl::StatusOr<std::string> trace = RenderMeasuredTrace(job, *version);
  ASSERT_TRUE(trace.ok()) << trace.status();
  nlohmann::json json = nlohmann::json::parse(*trace);
  EXPECT_DOUBLE_EQ(json["otherData"]["gap_offset_seconds"].get<double>(), 0.010);
  std::vector<std::string> gap_slices;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const double ts = event["ts"].get<double>();
    const double dur = event["dur"].get<double>();
    const int tid = event["tid"].get<int>();
    if (event["cat"] == "between steps") {
      gap_slices.push_back(absl::StrCat(tid, " ", event["name"].get<std::string>()));
      // Each stage's gap ends at its step start (the longest gap, 10 ms).
      if (event["name"] == "grant latency") EXPECT_NEAR(ts + dur, 10000, 1e-6);
      if (tid == 1) EXPECT_NEAR(ts, 6000, 1e-6);
    } else {
      EXPECT_NEAR(ts, 11000, 1e-6);  // The action started 1 ms into the step.
    }
  }
  EXPECT_THAT(gap_slices, ::testing::ElementsAre("0 validation", "0 grant latency",
                                                 "1 validation"));
}

}  // namespace
}  // namespace zbpp::ctl
