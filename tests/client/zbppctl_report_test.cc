// zbppctl report: the training report built from a job and its steps, its
// breakdown of where each stage's time went (client/zbppctl_breakdown.h),
// and the measured trace of the last step.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "api/schedule_proto.h"
#include "client/zbppctl_breakdown.h"
#include "client/zbppctl_json.h"
#include "client/zbppctl_report.h"
#include "client/zbppctl_schedule.h"
#include "nlohmann/json.hpp"
#include "tests/client/test_jobs.h"

namespace zbpp::ctl {
namespace {

using ctltest::TwoStageJob;

// Step i completes at t = 10 + 0.5 i seconds; losses fall 5 -> 3; rank 0's
// measured bubble is 0.9 on step 0 (warm-up) and 0.1 after, rank 1's 0.2.
std::vector<v1::StepSummary> Steps() {
  std::vector<v1::StepSummary> steps;
  for (int i = 0; i < 20; ++i) {
    v1::StepSummary s;
    s.set_step(i);
    s.set_loss(5.0 - 2.0 * i / 19);
    s.set_step_seconds(i == 0 ? 2.0 : 0.4);
    s.mutable_complete_time()->set_seconds(10 + i / 2);
    s.mutable_complete_time()->set_nanos(i % 2 ? 500000000 : 0);
    if (i % 5 == 0 || i == 19) s.set_eval_loss(6.0 - 0.1 * i);
    for (int r = 0; r < 2; ++r) {
      v1::StageStepStats* st = s.add_stages();
      st->set_stage(r);
      st->set_measured_bubble_rate(r == 0 ? (i < 2 ? 0.9 : 0.1) : 0.2);
      st->set_predicted_bubble_rate(r == 0 ? 0.12 : 0.18);
    }
    steps.push_back(s);
  }
  return steps;
}

TEST(Report, SummarisesTheRunOverTheWindowAfterWarmUp) {
  absl::StatusOr<TrainingReport> r = BuildReport(TwoStageJob(), Steps());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 20);
  EXPECT_DOUBLE_EQ(r->loss_start, 5.0);
  EXPECT_DOUBLE_EQ(r->loss_end, 3.0);
  EXPECT_DOUBLE_EQ(*r->eval_loss_start, 6.0);
  EXPECT_DOUBLE_EQ(*r->eval_loss, 6.0 - 1.9);
  // The first tenth (2 steps) is warm-up: not averaged.
  EXPECT_EQ(r->window_steps, 18);
  EXPECT_NEAR(r->bubble_rate_measured[0], 0.1, 1e-12);
  EXPECT_NEAR(r->bubble_rate_measured[1], 0.2, 1e-12);
  EXPECT_NEAR(r->bubble_rate_predicted[0], 0.12, 1e-12);
  // 17 step intervals of 0.5 s, 4096 tokens each.
  EXPECT_NEAR(r->tokens_per_second, 4096 / 0.5, 1e-6);
  EXPECT_DOUBLE_EQ(r->step_seconds, 0.4);
}

TEST(Report, DataParallelJobsCountEveryReplicaAndShowTheirReductions) {
  v1::Job job = TwoStageJob();
  job.mutable_spec()->mutable_pipeline()->set_data_parallel(3);
  std::vector<v1::StepSummary> steps = Steps();
  for (v1::StepSummary& s : steps) {
    for (v1::StageStepStats& stage : *s.mutable_stages()) {
      // Rank 1's last reduction ends 0.05 s after its passes; the warm-up
      // steps (not averaged) are slower.
      stage.set_reduce_seconds(s.step() < 2 ? 1.0 : 0.25 + 0.25 * stage.stage());
      stage.set_exposed_reduce_seconds(stage.stage() == 1 ? 0.05 : 0);
    }
  }
  TrainingReport r = *BuildReport(job, steps);
  EXPECT_EQ(r.stages, 2);
  EXPECT_EQ(r.replicas, 3);
  EXPECT_EQ(r.workers(), 6);
  // Three replicas of 4096 tokens per step, a step every 0.5 s.
  EXPECT_NEAR(r.tokens_per_second, 3 * 4096 / 0.5, 1e-6);
  ASSERT_EQ(r.reduce_seconds.size(), 2u);
  EXPECT_NEAR(r.reduce_seconds[0], 0.25, 1e-12);
  EXPECT_NEAR(r.reduce_seconds[1], 0.5, 1e-12);
  EXPECT_NEAR(r.exposed_reduce_seconds[0], 0, 1e-12);
  EXPECT_NEAR(r.exposed_reduce_seconds[1], 0.05, 1e-12);

  const std::string table = ReportTable(r);
  EXPECT_THAT(table, testing::HasSubstr(" on 6 workers, 8 microbatches per step and replica\n"));
  EXPECT_THAT(table, testing::HasSubstr("replicas:     3 data-parallel copies of the 2-stage "
                                        "pipeline (6 workers, 24 microbatches per step in all)\n"));
  EXPECT_THAT(table, testing::HasSubstr("DIFFERENCE  REDUCE_S  EXPOSED_REDUCE_S\n"));
  EXPECT_THAT(table, testing::HasSubstr("0.5000    0.0500"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  // Stages, replicas and workers separately: 2 stages x 3 replicas are 6 workers.
  EXPECT_EQ(json["stages"], 2);
  EXPECT_EQ(json["replicas"], 3);
  EXPECT_EQ(json["workers"], 6);
  EXPECT_DOUBLE_EQ(json["exposed_reduce_seconds"][1].get<double>(), 0.05);

  // One replica: the table is as before.
  TrainingReport single = *BuildReport(TwoStageJob(), Steps());
  EXPECT_EQ(single.replicas, 1);
  EXPECT_THAT(ReportTable(single), testing::Not(testing::HasSubstr("REDUCE_S")));
  EXPECT_THAT(ReportTable(single), testing::Not(testing::HasSubstr("replicas:")));
}

TEST(Report, JsonHasTheDemoContractKeys) {
  TrainingReport r = *BuildReport(TwoStageJob(), Steps());
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  for (const char* key : {"steps", "schedule", "stages", "replicas", "workers", "loss_start", "loss_end", "eval_loss",
                          "tokens_per_second", "bubble_rate_measured",
                          "bubble_rate_predicted", "recoveries", "validation_mode",
                          "rollbacks", "skipped_steps", "clipped_steps", "schedule_versions",
                          "param_checksum", "precision", "restarts", "degraded_steps",
                          "replicas_active"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["schedule"], "zb-h1");
  EXPECT_EQ(json["precision"], "FP32") << "unset means FP32";
  EXPECT_EQ(json["recoveries"], 1);
  EXPECT_EQ(json["restarts"], 0) << "Job.restarts_total, unset";
  EXPECT_EQ(json["bubble_rate_measured"].size(), 2u);
  EXPECT_THAT(ReportTable(r), testing::HasSubstr("train loss:   5.0000 -> 3.0000"));
}

TEST(Report, SaysWhenTheStoredHistoryIsIncomplete) {
  TrainingReport complete = *BuildReport(TwoStageJob(), Steps());
  EXPECT_TRUE(complete.history_complete);
  EXPECT_EQ(complete.missing_steps, 0);
  EXPECT_THAT(ReportTable(complete), testing::Not(testing::HasSubstr("history:")));

  // Steps 3, 4 and 11 of the 20 completed were never stored.
  std::vector<v1::StepSummary> stored;
  for (const v1::StepSummary& s : Steps()) {
    if (s.step() != 3 && s.step() != 4 && s.step() != 11) stored.push_back(s);
  }
  TrainingReport r = *BuildReport(TwoStageJob(), stored);
  EXPECT_FALSE(r.history_complete);
  EXPECT_EQ(r.missing_steps, 3);
  EXPECT_THAT(ReportTable(r),
              testing::HasSubstr("history:      INCOMPLETE: the coordinator's store holds no "
                                 "summary of 3 completed steps"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(json["history_complete"], false);
  EXPECT_EQ(json["missing_steps"], 3);

  // A resumed job ran from its resume step + 1: the steps before are not
  // missing.
  v1::Job resumed = TwoStageJob();
  resumed.mutable_spec()->mutable_checkpoint()->set_resume_step(9);
  const std::vector<v1::StepSummary> all = Steps();
  const std::vector<v1::StepSummary> after_resume(all.begin() + 10, all.end());
  EXPECT_TRUE(BuildReport(resumed, after_resume)->history_complete);
}

TEST(Report, CountsValidationOutcomesAndTheVersionsTheStepsRan) {
  v1::Job job = TwoStageJob();
  job.mutable_spec()->set_validation(v1::VALIDATION_MODE_AUTO);
  job.set_validation_mode(v1::VALIDATION_MODE_POST);
  job.set_rollbacks_total(12);
  job.set_skipped_steps_total(1);
  job.set_clipped_steps_total(11);
  // Version 4 was published but no step ran it (a recovery rewound first):
  // only 1, 2 and 3 count.
  job.set_schedule_version(4);
  job.set_param_checksum(-1234.5678901234567);
  job.mutable_spec()->set_precision(v1::PRECISION_BF16);
  std::vector<v1::StepSummary> steps = Steps();
  for (v1::StepSummary& s : steps) s.set_schedule_version(s.step() < 5 ? 1 : s.step() < 15 ? 2 : 3);
  TrainingReport r = *BuildReport(job, steps);
  EXPECT_EQ(r.schedule_versions, 3);

  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(json["validation_mode"], "POST");
  EXPECT_EQ(json["validation_policy"], "AUTO");
  EXPECT_EQ(json["precision"], "BF16");
  EXPECT_EQ(json["rollbacks"], 12);
  EXPECT_EQ(json["skipped_steps"], 1);
  EXPECT_EQ(json["clipped_steps"], 11);
  EXPECT_EQ(json["schedule_versions"], 3);
  EXPECT_EQ(json["last_step_schedule_version"], 3) << "not 4: no step ran it";
  // Every digit survives: two runs compare to ~1e-6 relative.
  EXPECT_EQ(json["param_checksum"].get<double>(), -1234.5678901234567);

  const std::string table = ReportTable(r);
  EXPECT_THAT(table, testing::HasSubstr(
                         "validation:   POST (policy AUTO): 12 rollbacks, 1 skipped, 11 clipped; "
                         "1 recovery (0 restarts); 3 schedule versions (the last step ran v3)\n"));
  EXPECT_THAT(table, testing::HasSubstr("checksum:     -1234.5678901234567"));
  EXPECT_THAT(table, testing::HasSubstr("precision:    BF16\n"));
}

TEST(Report, ShowsTheTransportAndWhy) {
  v1::Job job = TwoStageJob();
  job.mutable_spec()->set_transport(v1::TRANSPORT_AUTO);
  job.set_transport(v1::TRANSPORT_NCCL);
  job.set_transport_reason("auto: every worker has a GPU of its own");
  TrainingReport r = *BuildReport(job, Steps());
  EXPECT_THAT(ReportTable(r),
              testing::HasSubstr("transport:    NCCL (auto: every worker has a GPU of its own)\n"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(json["transport"], "NCCL");
  EXPECT_EQ(json["transport_reason"], "auto: every worker has a GPU of its own");
  // A job that never had an attempt: AUTO, no reason.
  job.clear_transport();
  job.clear_transport_reason();
  r = *BuildReport(job, Steps());
  EXPECT_THAT(ReportTable(r), testing::HasSubstr("transport:    AUTO\n"));
  EXPECT_EQ(nlohmann::json::parse(ReportJson(r))["transport_reason"], "");
}

TEST(Report, ShowsTheLayoutAndWhy) {
  v1::Job job = TwoStageJob();
  job.add_layout(6);
  job.add_layout(2);
  job.set_layout_reason("auto: [6, 2] predicts a step 1.23x shorter than the even split [4, 4]");
  TrainingReport r = *BuildReport(job, Steps());
  EXPECT_THAT(ReportTable(r),
              testing::HasSubstr("layout:       [6, 2] (auto: [6, 2] predicts a step 1.23x "
                                 "shorter than the even split [4, 4])\n"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(json["layout"], nlohmann::json::array({6, 2}));
  EXPECT_EQ(json["layout_reason"], job.layout_reason());
  // No drift report: no line, an empty layout in JSON.
  EXPECT_THAT(ReportTable(r), testing::Not(testing::HasSubstr("better layout")));
  EXPECT_EQ(json["better_layout"], nlohmann::json::array());
  job.add_better_layout(5);
  job.add_better_layout(3);
  job.set_better_layout_reason("measured: [5, 3] would predict a step 1.12x shorter than the "
                               "running [6, 2]");
  r = *BuildReport(job, Steps());
  EXPECT_THAT(ReportTable(r), testing::HasSubstr("better layout: [5, 3] (measured: [5, 3] would "
                                                 "predict a step 1.12x shorter than the running "
                                                 "[6, 2])\n"));
  json = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(json["better_layout"], nlohmann::json::array({5, 3}));
  EXPECT_EQ(json["better_layout_reason"], job.better_layout_reason());
  // A job stored before layouts were recorded.
  job.clear_layout();
  r = *BuildReport(job, Steps());
  EXPECT_THAT(ReportTable(r), testing::HasSubstr("layout:       -\n"));
}

TEST(Report, ARoundingErrorBelowZeroPrintsAsZero) {
  TrainingReport r = *BuildReport(TwoStageJob(), Steps());
  r.bubble_rate_predicted[1] = -1e-17;
  EXPECT_THAT(ReportTable(r), testing::HasSubstr("1      0.2000           0.0000  "));
}

TEST(Report, UnsetChecksumAndModeAreNull) {
  TrainingReport r = *BuildReport(TwoStageJob(), Steps());
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  EXPECT_TRUE(json["param_checksum"].is_null());
  EXPECT_TRUE(json["validation_mode"].is_null());
  // The spec left validation unset: AUTO.
  EXPECT_EQ(json["validation_policy"], "AUTO");
  EXPECT_EQ(json["rollbacks"], 0);
  // Every step ran version 0 (the fixture sets none): one version.
  EXPECT_EQ(json["schedule_versions"], 1);
  EXPECT_THAT(ReportTable(r), testing::HasSubstr("validation:   - (policy AUTO): 0 rollbacks"));
  EXPECT_THAT(ReportTable(r), testing::Not(testing::HasSubstr("checksum:")));
}

// Job.transitions: a lost worker, the degrade and the heal (docs/elastic.md),
// listed oldest first in the text (the time of day UTC, the message's
// control bytes escaped) and in the JSON.
TEST(Report, ListsTheStateChangesOldestFirst) {
  v1::Job job = TwoStageJob();
  struct Change {
    v1::JobState from, to;
    int64_t seconds, steps;
    const char* message;
  };
  for (const Change& c : std::vector<Change>{
           {v1::JOB_STATE_RUNNING, v1::JOB_STATE_RECOVERING, 1000000000, 15,
            "worker w-3 lost: no heartbeat for 10s\x1b[2J"},
           {v1::JOB_STATE_RECOVERING, v1::JOB_STATE_DEGRADED, 1000000002, 15,
            "degraded to 1 replicas at step 15"},
           {v1::JOB_STATE_DEGRADED, v1::JOB_STATE_RUNNING, 1000003600, 30, ""}}) {
    v1::JobTransition* t = job.add_transitions();
    t->set_from(c.from);
    t->set_to(c.to);
    t->mutable_time()->set_seconds(c.seconds);
    t->set_steps_completed(c.steps);
    t->set_message(c.message);
  }
  const TrainingReport r = *BuildReport(job, Steps());
  ASSERT_EQ(r.transitions.size(), 3u);
  EXPECT_THAT(ReportTable(r),
              testing::EndsWith(
                  "state changes:\n"
                  "  RUNNING -> RECOVERING at step 15 (01:46:40): worker w-3 lost: no heartbeat "
                  "for 10s\\x1b[2J\n"
                  "  RECOVERING -> DEGRADED at step 15 (01:46:42): degraded to 1 replicas at "
                  "step 15\n"
                  "  DEGRADED -> RUNNING at step 30 (02:46:40)\n"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  ASSERT_EQ(json["transitions"].size(), 3u);
  EXPECT_EQ(json["transitions"][1],
            nlohmann::json::parse(R"({"previous_state": "RECOVERING", "state": "DEGRADED",
                                      "time": "2001-09-09T01:46:42Z",
                                      "steps_completed": 15,
                                      "message": "degraded to 1 replicas at step 15"})"));
  EXPECT_EQ(json["transitions"][2]["message"], "");
  // A change without a time (none the coordinator records): no time.
  TrainingReport untimed = r;
  untimed.transitions[2].clear_time();
  EXPECT_THAT(ReportTable(untimed), testing::EndsWith("  DEGRADED -> RUNNING at step 30\n"));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(untimed))["transitions"][2]["time"].is_null());

  // None listed: no list in the text, an empty one in the JSON.
  const TrainingReport none = *BuildReport(TwoStageJob(), Steps());
  EXPECT_THAT(ReportTable(none), testing::Not(testing::HasSubstr("state changes:")));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(none))["transitions"].empty());
}

TEST(Report, NoStepYetIsFailedPrecondition) {
  absl::StatusOr<TrainingReport> r = BuildReport(TwoStageJob(), {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), testing::HasSubstr("no completed step"));
}

// Twenty 0.5 s steps. Stage 0: 0.4 s compute, 0.05 s input waits, 0.05 s
// overhead, and a 0.1 s gap before each step, 0.06 s of it waiting for the
// grant; predicted bubble 0.1. Stage 1: 0.3 s compute, 0.15 s input waits
// (0.3 of the step against a predicted 0.18), 0.05 s overhead, and a 0.1 s
// gap, 0.07 s of it validation.
std::vector<v1::StepSummary> BreakdownSteps() {
  std::vector<v1::StepSummary> steps;
  for (int i = 0; i < 20; ++i) {
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
  const ReportBreakdown b = BuildBreakdown(BreakdownSteps(), 2);
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

  EXPECT_NEAR(b.bubble_difference[0], 0.1, 1e-12);
  EXPECT_NEAR(b.bubble_difference[1], 0.22, 1e-12);
  const std::string text = BreakdownText(b, /*replicas=*/1);
  EXPECT_THAT(text, testing::HasSubstr("bubble excess: input waits on stage 1 (+0.1200 of the "
                                       "step, 0.1500 s), the largest part of the measured bubble "
                                       "beyond the predicted one (stage 1: +0.2200)\n"));
  EXPECT_THAT(text, testing::HasSubstr("between steps: 0.1000 s per step (16.7% of the wall clock), "
                              "most of it validation on stage 1 (0.0700 s"));
  EXPECT_THAT(text, testing::HasSubstr("STAGE  STEP    COMPUTE  INPUT_WAIT  SEND_WAIT  VALIDATION_CHECK"
                              "  OVERHEAD\n"));
  EXPECT_THAT(text, testing::HasSubstr("GRANT"));
  EXPECT_THAT(text, testing::Not(testing::HasSubstr("REDUCTION_WAIT")));  // One replica.
  EXPECT_THAT(BreakdownText(b, /*replicas=*/2), testing::HasSubstr("REDUCTION_WAIT"));
}

TEST(Breakdown, OverheadBeyondThePredictionIsNamedWhenItIsTheLargest) {
  std::vector<v1::StepSummary> steps = BreakdownSteps();
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
  std::vector<v1::StepSummary> steps = BreakdownSteps();
  for (v1::StepSummary& s : steps) {
    for (v1::StageStepStats& st : *s.mutable_stages()) {
      st.mutable_breakdown()->set_overhead_seconds(0);
      st.set_predicted_bubble_rate(0.5);
    }
  }
  ReportBreakdown b = BuildBreakdown(steps, 2);
  EXPECT_FALSE(b.bubble_excess.has_value());
  EXPECT_THAT(BreakdownText(b, 1), testing::HasSubstr("bubble excess: none"));

  // Overhead on stage 0, whose measured bubble (0.2) is still below the
  // predicted one: nothing to explain there.
  for (v1::StepSummary& s : steps) {
    s.mutable_stages(0)->mutable_breakdown()->set_overhead_seconds(0.05);
  }
  b = BuildBreakdown(steps, 2);
  EXPECT_FALSE(b.bubble_excess.has_value());
  EXPECT_NEAR(b.bubble_difference[0], 0.2 - 0.5, 1e-12);
}

TEST(Breakdown, InTheReportTableAndJson) {
  absl::StatusOr<TrainingReport> r = BuildReport(TwoStageJob(), BreakdownSteps());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(ReportTable(*r), testing::HasSubstr("bubble excess: input waits on stage 1 (+0.1200"));
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
  std::vector<v1::StepSummary> plain = BreakdownSteps();
  for (v1::StepSummary& s : plain) {
    for (v1::StageStepStats& st : *s.mutable_stages()) st.clear_breakdown();
  }
  TrainingReport old = *BuildReport(TwoStageJob(), plain);
  EXPECT_THAT(ReportTable(old), testing::Not(testing::HasSubstr("bubble excess")));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(old))["breakdown"].is_null());
}

TEST(MeasuredTrace, DrawsEveryRanksActionsWithTheVersionTheStepRan) {
  v1::Job job = TwoStageJob();
  v1::ScheduleVersion* version = job.mutable_schedule();
  version->set_version(3);
  v1::Schedule* s = version->mutable_schedule();
  s->set_name("gpipe");
  s->set_stages(2);
  s->set_chunks(1);
  s->set_microbatches(1);
  s->add_stage_of(0);
  s->add_stage_of(1);
  s->add_stage_actions()->add_actions("0F0");
  s->mutable_stage_actions(0)->add_actions("0B0");
  s->add_stage_actions()->add_actions("1F0");
  s->mutable_stage_actions(1)->add_actions("1B0");
  EXPECT_EQ(RenderMeasuredTrace(job, *version).status().code(),
            absl::StatusCode::kFailedPrecondition);

  v1::StepTimeline* timeline = job.mutable_last_step_timeline();
  timeline->set_step(19);
  timeline->set_schedule_version(3);
  for (int r = 0; r < 2; ++r) {
    v1::StageTimeline* rank = timeline->add_stages();
    rank->add_action_start_seconds(0.001 * r);
    rank->add_action_end_seconds(0.002 + 0.001 * r);
    rank->add_action_start_seconds(0.004);
    rank->add_action_end_seconds(0.006 + 0.001 * r);
  }
  // The version the step ran names its actions, whatever the job holds now
  // (a version published after the last step).
  const v1::ScheduleVersion ran = *version;
  version->set_version(4);
  version->mutable_schedule()->set_name("published-later");
  absl::StatusOr<std::string> trace = RenderMeasuredTrace(job, ran);
  ASSERT_TRUE(trace.ok()) << trace.status();
  nlohmann::json json = nlohmann::json::parse(*trace);
  int actions = 0;
  for (const auto& event : json["traceEvents"]) actions += event["ph"] == "X";
  EXPECT_EQ(actions, 4);
  EXPECT_THAT(*trace, testing::HasSubstr("gpipe v3 step 19 (measured)"));

  // With each stage's breakdown, the gap before the step is drawn phase by
  // phase, ending at the stage's step start, and the step moves right by
  // the longest gap.
  for (int r = 0; r < 2; ++r) {
    v1::StepBreakdown* b = timeline->mutable_stages(r)->mutable_breakdown();
    b->set_gap_seconds(r == 0 ? 0.010 : 0.004);
    b->set_validation_seconds(r == 0 ? 0.003 : 0.004);
    if (r == 0) b->set_grant_seconds(0.007);
  }
  trace = RenderMeasuredTrace(job, ran);
  ASSERT_TRUE(trace.ok()) << trace.status();
  json = nlohmann::json::parse(*trace);
  EXPECT_DOUBLE_EQ(json["otherData"]["gap_offset_seconds"].get<double>(), 0.010);
  std::vector<std::string> gap_slices;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const double ts = event["ts"].get<double>();
    const int tid = event["tid"].get<int>();
    if (event["cat"] != "between steps") {
      EXPECT_GE(ts, 10000 - 1e-6);  // Every action after the longest gap.
      continue;
    }
    gap_slices.push_back(std::to_string(tid) + " " + event["name"].get<std::string>());
    if (event["name"] == "grant latency") {
      EXPECT_NEAR(ts + event["dur"].get<double>(), 10000, 1e-6);
    }
    if (tid == 1) {
      EXPECT_NEAR(ts, 6000, 1e-6);  // Its 4 ms gap ends at 10 ms.
    }
  }
  EXPECT_THAT(gap_slices,
              testing::ElementsAre("0 validation", "0 grant latency", "1 validation"));

  // Only the version the step ran names its actions.
  v1::ScheduleVersion other = ran;
  other.set_version(2);
  EXPECT_THAT(std::string(RenderMeasuredTrace(job, other).status().message()),
              testing::HasSubstr("the last step (19) ran schedule version 3, not version 2"));
}

// A two-stage GPipe version `number` from `effective_step`, predicting a step
// of `step_seconds`.
v1::ScheduleVersion GpipeVersion(int64_t number, int64_t effective_step,
                                 v1::ScheduleChangeReason reason, double step_seconds) {
  v1::ScheduleVersion version;
  version.set_job_id("job-7");
  version.set_version(number);
  version.set_effective_step(effective_step);
  version.set_reason(reason);
  v1::Schedule* s = version.mutable_schedule();
  s->set_name(absl::StrCat("gpipe-", number));
  s->set_stages(2);
  s->set_chunks(1);
  s->set_microbatches(1);
  s->add_stage_of(0);
  s->add_stage_of(1);
  for (const char* stage : {"0", "1"}) {
    v1::StageActions* actions = s->add_stage_actions();
    actions->add_actions(absl::StrCat(stage, "F0"));
    actions->add_actions(absl::StrCat(stage, "B0"));
  }
  version.mutable_predicted()->set_step_seconds(step_seconds);
  version.mutable_predicted()->set_makespan_seconds(step_seconds - 0.01);
  version.mutable_predicted()->set_bubble_rate(0.25);
  return version;
}

// The end-of-job race: versions 1 (INITIAL) and 2 (CALIBRATION) share
// effective step 0, so version 2 ran step 0; a re-solve (3) ran steps 10 to
// 19; another (4) came out after the last step and is the job's latest. The
// report, the measured trace and the pictures show what ran: version 2 for
// the first step, version 3 for the last, each with its own prediction.
TEST(Report, ShowsTheVersionsThatRanWhateverWasPublishedAfterTheLastStep) {
  v1::Job job = TwoStageJob();
  const v1::ScheduleVersion initial =
      GpipeVersion(1, 0, v1::SCHEDULE_CHANGE_REASON_INITIAL, 0.02);
  const v1::ScheduleVersion calibrated =
      GpipeVersion(2, 0, v1::SCHEDULE_CHANGE_REASON_CALIBRATION, 0.5);
  const v1::ScheduleVersion ran = GpipeVersion(3, 10, v1::SCHEDULE_CHANGE_REASON_RESOLVE, 0.32);
  const v1::ScheduleVersion later = GpipeVersion(4, 20, v1::SCHEDULE_CHANGE_REASON_RESOLVE, 0.3);
  job.set_schedule_version(4);
  *job.mutable_schedule() = later;
  std::vector<v1::StepSummary> steps = Steps();  // 2.0 s at step 0, 0.4 s after.
  for (v1::StepSummary& s : steps) s.set_schedule_version(s.step() < 10 ? 2 : 3);
  steps[15].set_step_seconds(0.5);
  v1::StepTimeline* timeline = job.mutable_last_step_timeline();
  timeline->set_step(19);
  timeline->set_schedule_version(3);
  for (int r = 0; r < 2; ++r) {
    v1::StageTimeline* stage = timeline->add_stages();
    stage->add_action_start_seconds(0.1 * r);
    stage->add_action_end_seconds(0.1 * r + 0.1);
    stage->add_action_start_seconds(0.3 - 0.1 * r);
    stage->add_action_end_seconds(0.4 - 0.1 * r);
  }

  TrainingReport r = *BuildReport(job, steps, {later, ran, calibrated, initial});
  ASSERT_TRUE(r.first_step_version.has_value());
  ASSERT_TRUE(r.last_step_version.has_value());
  EXPECT_EQ(r.first_step_version->step, 0);
  EXPECT_EQ(r.first_step_version->version, 2) << "the later of the two at step 0";
  EXPECT_EQ(r.first_step_version->reason, "CALIBRATION");
  EXPECT_DOUBLE_EQ(r.first_step_version->predicted_step_seconds, 0.5);
  EXPECT_EQ(r.last_step_version->step, 19);
  EXPECT_EQ(r.last_step_version->version, 3) << "not 4, published after the last step";
  EXPECT_DOUBLE_EQ(r.last_step_version->predicted_step_seconds, 0.32);
  // Steps 10 to 19 ran version 3, all in the window: nine of 0.4 s, one of
  // 0.5 s.
  EXPECT_EQ(r.last_version_window_steps, 10);
  EXPECT_DOUBLE_EQ(r.last_version_step_seconds, 0.4);
  const std::string table = ReportTable(r);
  EXPECT_THAT(table, testing::HasSubstr(
                         "first step:   step 0 ran v2 (CALIBRATION, from step 0): predicted step "
                         "0.5000 s, makespan 0.4900 s, bubble rate 0.2500\n"));
  EXPECT_THAT(table, testing::HasSubstr(
                         "last step:    step 19 ran v3 (RESOLVE, from step 10): predicted step "
                         "0.3200 s, makespan 0.3100 s, bubble rate 0.2500; measured 0.4000 s "
                         "(median of its 10 steps in the window), 1.250x the prediction\n"));
  nlohmann::json json = nlohmann::json::parse(ReportJson(r));
  EXPECT_EQ(json["first_step_version"]["version"], 2);
  EXPECT_EQ(json["last_step_version"]["version"], 3);
  EXPECT_EQ(json["last_step_version"]["reason"], "RESOLVE");
  EXPECT_DOUBLE_EQ(json["last_step_version"]["predicted_step_seconds"].get<double>(), 0.32);
  EXPECT_DOUBLE_EQ(json["last_version_step_seconds"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(json["last_version_measured_prediction_seconds"].get<double>(), 0)
      << "summaries without the field";

  // Each summary's prediction under the costs measured as it ran: their
  // median (0.38 s) beside the version's own.
  for (v1::StepSummary& s : steps) s.set_predicted_step_seconds(s.step() == 12 ? 0.9 : 0.38);
  r = *BuildReport(job, steps, {later, ran, calibrated, initial});
  EXPECT_DOUBLE_EQ(r.last_version_measured_prediction_seconds, 0.38);
  EXPECT_THAT(ReportTable(r),
              testing::HasSubstr("1.250x the prediction; 1.053x its prediction under the "
                                 "measured costs (0.3800 s)\n"));
  json = nlohmann::json::parse(ReportJson(r));
  EXPECT_DOUBLE_EQ(json["last_version_measured_prediction_seconds"].get<double>(), 0.38);

  // The measured last step is drawn with version 3's actions, though the job
  // holds version 4 now.
  EXPECT_EQ(MeasuredLastStep(job, job.schedule()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::string> trace = RenderMeasuredTrace(job, ran);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_THAT(*trace, testing::HasSubstr("gpipe-3 v3 step 19 (measured)"));
  // Version 3 as planned is titled with its number, reason and prediction.
  absl::StatusOr<std::string> svg = RenderSchedule(ran, "svg");
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_THAT(*svg, testing::HasSubstr("gpipe-3 v3 (RESOLVE, from step 10) as planned: p=2"));

  // Without the versions (not read back) the report leaves them out.
  r = *BuildReport(job, steps);
  EXPECT_FALSE(r.last_step_version.has_value());
  EXPECT_THAT(ReportTable(r), testing::Not(testing::HasSubstr("last step:")));
  EXPECT_TRUE(nlohmann::json::parse(ReportJson(r))["last_step_version"].is_null());
}

}  // namespace
}  // namespace zbpp::ctl
