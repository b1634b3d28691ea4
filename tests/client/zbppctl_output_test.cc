// What zbppctl prints, without a server: status JSON, tables, watch lines
// and progress bar, and schedules rendered.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "client/zbppctl_json.h"
#include "client/zbppctl_schedule.h"
#include "client/zbppctl_tables.h"
#include "client/zbppctl_watch.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/test_jobs.h"

namespace zbpp::ctl {
namespace {

using ctltest::RunningJob;
using ctltest::StateEvent;
using ctltest::StepEvent;
using ctltest::ZbVScheduleVersion;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(ZbppctlJson, StatusHoldsStateStepLossStagesAndVersion) {
  absl::StatusOr<std::string> text = JobStatusJson(RunningJob("job-7"));
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json json = nlohmann::json::parse(*text);
  EXPECT_EQ(json["id"], "job-7");
  EXPECT_EQ(json["state"], "JOB_STATE_RUNNING");
  EXPECT_EQ(json["step"], 50);
  EXPECT_EQ(json["steps"], 100);
  EXPECT_EQ(json["schedule_version"], 2);
  EXPECT_DOUBLE_EQ(json["loss"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(json["measured_bubble_rate"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(json["predicted_bubble_rate"].get<double>(), 0.1);
  ASSERT_EQ(json["stages"].size(), 4u);
  EXPECT_EQ(json["stages"][3]["stage"], 3);
  EXPECT_EQ(json["stages"][3]["worker_id"], "w-3");
  EXPECT_DOUBLE_EQ(json["stages"][3]["measured_bubble_rate"].get<double>(),
                   0.25);
  EXPECT_DOUBLE_EQ(json["stages"][3]["predicted_bubble_rate"].get<double>(),
                   0.1);
  // The schedule's version and prediction stay; its action lists do not.
  EXPECT_EQ(json["schedule"]["effective_step"], "40");
  EXPECT_TRUE(json["schedule"].contains("predicted"));
  EXPECT_FALSE(json["schedule"].contains("schedule"));
  EXPECT_THAT(*text, Not(HasSubstr("0F0")));
}

TEST(ZbppctlJson, StillParsesAsAJob) {
  absl::StatusOr<std::string> text = JobStatusJson(RunningJob("job-7"));
  ASSERT_TRUE(text.ok());
  v1::Job job;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(*text, &job, options).ok());
  EXPECT_EQ(job.steps_completed(), 50);
  EXPECT_EQ(job.schedule_version(), 2);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
}

TEST(ZbppctlJson, BeforeTheFirstStepStagesComeFromThePrediction) {
  v1::Job job = RunningJob("job-8");
  job.clear_last_step();
  job.set_steps_completed(0);
  absl::StatusOr<std::string> text = JobStatusJson(job);
  ASSERT_TRUE(text.ok());
  const nlohmann::json json = nlohmann::json::parse(*text);
  EXPECT_TRUE(json["loss"].is_null());
  EXPECT_TRUE(json["measured_bubble_rate"].is_null());
  EXPECT_DOUBLE_EQ(json["predicted_bubble_rate"].get<double>(),
                   job.schedule().predicted().bubble_rate());
  ASSERT_EQ(json["stages"].size(), 4u);
  EXPECT_TRUE(json["stages"][0]["measured_bubble_rate"].is_null());
  EXPECT_EQ(json["stages"][1]["worker_id"], "w-1");
}

TEST(ZbppctlJson, PendingJobPrintsZerosAndNoStages) {
  v1::Job job;
  job.set_id("job-1");
  job.set_state(v1::JOB_STATE_PENDING);
  absl::StatusOr<std::string> text = JobStatusJson(job);
  ASSERT_TRUE(text.ok());
  const nlohmann::json json = nlohmann::json::parse(*text);
  EXPECT_EQ(json["state"], "JOB_STATE_PENDING");
  EXPECT_EQ(json["step"], 0);
  EXPECT_EQ(json["schedule_version"], 0);
  EXPECT_TRUE(json["stages"].empty());
  EXPECT_FALSE(json.contains("schedule"));
}

TEST(ZbppctlTables, JobsTableHasAHeaderAndOneRowPerJob) {
  v1::Job pending;
  pending.set_id("job-2");
  pending.set_state(v1::JOB_STATE_PENDING);
  const std::string table = JobsTable({RunningJob("job-1"), pending},
                                      absl::FromUnixSeconds(1000000000 + 300));
  EXPECT_THAT(table, StartsWith("ID     NAME     STATE    STEP"));
  EXPECT_THAT(table, HasSubstr("job-1  gpt-kjv  RUNNING  50/100  zb-v v2"));
  EXPECT_THAT(table, HasSubstr("2.5000"));
  EXPECT_THAT(table, HasSubstr("5m"));
  EXPECT_THAT(table, HasSubstr("job-2  -        PENDING  0/0"));
}

// A diverged loss (or a forged one) of 1e308 under "%.4f" would print 309
// digits; past 1e9 a number prints in %.4g, its unit kept.
TEST(ZbppctlTables, HugeNumbersPrintShort) {
  v1::Job job = RunningJob("job-1");
  job.mutable_last_step()->set_loss(1e308);
  job.mutable_last_step()->set_tokens_per_second(3e12);
  const std::string listed = JobsTable({job}, absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(listed, HasSubstr("1e+308"));
  const std::string status = JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(status, HasSubstr("1e+308"));
  EXPECT_THAT(status, HasSubstr("3e+12"));
  for (const std::string& text : {listed, status}) {
    size_t run = 0, longest = 0;
    for (char c : text) longest = std::max(longest, run = std::isdigit(c) ? run + 1 : 0);
    EXPECT_LT(longest, 20u) << text;
  }
  EXPECT_EQ(Number("%.3f s", 2e10), "2e+10 s");
  EXPECT_EQ(Number("%.3f s", 2.5), "2.500 s");
  EXPECT_EQ(Number("%.4f", std::nan("")), "-");
}

TEST(ZbppctlTables, StatusTableShowsTheJobAndItsStages) {
  const std::string table =
      JobStatusTable(RunningJob("job-1"), absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(table, HasSubstr("state:"));
  EXPECT_THAT(table, HasSubstr("RUNNING"));
  EXPECT_THAT(table, HasSubstr("50/100"));
  EXPECT_THAT(table, HasSubstr("0.200 measured, 0.100 predicted"));
  EXPECT_THAT(table,
              HasSubstr("zb-v v2 (from step 40, RESOLVE: stage 2 1.48x slower than modeled)"));
  EXPECT_THAT(table, HasSubstr("STAGE  WORKER  BUBBLE"));
  EXPECT_THAT(table, HasSubstr("3      w-3     0.250"));
  EXPECT_THAT(
      table,
      HasSubstr(
          "validation:   - (policy AUTO): 0 rollbacks, 0 skipped, 0 clipped"));
  EXPECT_THAT(table, Not(HasSubstr("checksum:")));
}

TEST(ZbppctlTables, StatusTableShowsReplicasAndTheirReductions) {
  v1::Job job = RunningJob("job-1");
  job.mutable_spec()->mutable_pipeline()->set_stages(4);
  const std::string single = JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(single, HasSubstr("pipeline:     4 stages x 1 replica (4 workers)\n"));
  EXPECT_THAT(single, Not(HasSubstr("REDUCE_S")));
  job.mutable_spec()->mutable_pipeline()->set_data_parallel(2);
  for (v1::StageStepStats& stage : *job.mutable_last_step()->mutable_stages()) {
    stage.set_reduce_seconds(0.125 * (stage.stage() + 1));
    stage.set_exposed_reduce_seconds(stage.stage() == 3 ? 0.0625 : 0);
  }
  const std::string table = JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(table, HasSubstr("pipeline:     4 stages x 2 replicas (8 workers)\n"));
  EXPECT_THAT(table, HasSubstr("W_S     REDUCE_S  EXPOSED_S"));
  EXPECT_THAT(table, HasSubstr("0.5000    0.0625"));
}

// A degraded job (docs/elastic.md): how many replicas run, and what its
// recoveries cost.
TEST(ZbppctlTables, StatusTableShowsADegradedJobsReplicasAndRestarts) {
  v1::Job job = RunningJob("job-1");
  job.mutable_spec()->mutable_pipeline()->set_data_parallel(2);
  job.set_recoveries_total(2);
  job.set_restarts_total(1);
  const std::string running = JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(running, HasSubstr("recoveries:   2 (1 restart)\n"));
  EXPECT_THAT(running, Not(HasSubstr("replicas:")));
  job.set_state(v1::JOB_STATE_DEGRADED);
  job.set_replicas_active(1);
  job.set_degraded_steps(3);
  const std::string degraded = JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  EXPECT_THAT(degraded, HasSubstr("state:        DEGRADED\n"));
  EXPECT_THAT(degraded, HasSubstr("replicas:     1 of 2 running (degraded: the same global batch)"));
  EXPECT_THAT(degraded, HasSubstr("recoveries:   2 (1 restart, 3 steps degraded)\n"));
}

// The newest state change (Job.transitions), and how many the report lists.
TEST(ZbppctlTables, StatusTableShowsTheNewestStateChange) {
  v1::Job job = RunningJob("job-1");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              Not(HasSubstr("last change:")));
  v1::JobTransition* first = job.add_transitions();
  first->set_from(v1::JOB_STATE_PENDING);
  first->set_to(v1::JOB_STATE_ASSIGNING);
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("last change:  PENDING -> ASSIGNING at step 0\n"));
  v1::JobTransition* lost = job.add_transitions();
  lost->set_from(v1::JOB_STATE_RUNNING);
  lost->set_to(v1::JOB_STATE_RECOVERING);
  lost->mutable_time()->set_seconds(1000000000);
  lost->set_steps_completed(15);
  lost->set_message("worker w-3 lost");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("last change:  RUNNING -> RECOVERING at step 15 (01:46:40): worker w-3 "
                        "lost (the newest of 2; zbppctl report lists them)\n"));
  // The JSON is the whole Job: every change.
  nlohmann::json json = nlohmann::json::parse(*JobStatusJson(job));
  ASSERT_EQ(json["transitions"].size(), 2u);
  EXPECT_EQ(json["transitions"][1]["to"], "JOB_STATE_RECOVERING");
  EXPECT_EQ(json["transitions"][1]["steps_completed"], "15");
}

// A job name and message are the submitter's and the coordinator's text: no
// escape sequence of theirs reaches the terminal (one cleared the screen and
// set the window title).
TEST(ZbppctlTables, ControlBytesInNamesAndMessagesAreEscaped) {
  v1::Job job = RunningJob("job-1");
  job.mutable_spec()->set_name("evil\x1b]0;pwned\x07\x1b[2J");
  job.set_state_message("line one\nline two \x1b[31mred");
  const std::string list = JobsTable({job}, absl::FromUnixSeconds(1000000000));
  const std::string status = JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  for (const std::string* text : {&list, &status}) {
    EXPECT_EQ(text->find('\x1b'), std::string::npos) << *text;
    EXPECT_EQ(text->find('\x07'), std::string::npos) << *text;
  }
  EXPECT_THAT(list, HasSubstr("evil\\x1b]0;pwned\\x07\\x1b[2J"));
}

TEST(ZbppctlTables, StatusTableShowsValidationOnOneLine) {
  v1::Job job = RunningJob("job-1");
  job.mutable_spec()->set_validation(v1::VALIDATION_MODE_POST);
  job.set_validation_mode(v1::VALIDATION_MODE_POST);
  job.set_rollbacks_total(1);
  job.set_skipped_steps_total(1);
  job.set_clipped_steps_total(3);
  job.set_param_checksum(42.25);
  const std::string table =
      JobStatusTable(job, absl::FromUnixSeconds(1000000000));
  // The policy is left out where it is the mode in force.
  EXPECT_THAT(
      table,
      HasSubstr("validation:   POST: 1 rollback, 1 skipped, 3 clipped\n"));
  EXPECT_THAT(table, HasSubstr("checksum:     42.25\n"));
  EXPECT_THAT(table, HasSubstr("precision:    FP32\n"));
  job.mutable_spec()->set_precision(v1::PRECISION_FP16);
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("precision:    FP16\n"));
  job.mutable_spec()->set_validation(v1::VALIDATION_MODE_AUTO);
  job.set_validation_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("validation:   SYNCHRONOUS (policy AUTO): 1 rollback"));
}

TEST(ZbppctlTables, StatusTableShowsTheTransportAndWhy) {
  v1::Job job = RunningJob("job-1");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("transport:    AUTO (decided when workers are assigned)\n"));
  job.mutable_spec()->set_transport(v1::TRANSPORT_NCCL);
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("transport:    NCCL (decided when workers are assigned)\n"));
  job.mutable_spec()->set_transport(v1::TRANSPORT_AUTO);
  job.set_transport(v1::TRANSPORT_NCCL);
  job.set_transport_reason("auto: every worker has a GPU of its own");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("transport:    NCCL (auto: every worker has a GPU of its own)\n"));
  job.set_transport(v1::TRANSPORT_GLOO);
  job.set_transport_reason("auto: worker-3 (stage 1) has no GPU (device cpu)");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("transport:    GLOO (auto: worker-3 (stage 1) has no GPU (device cpu))\n"));
  // `status --format json` carries both fields (the Job's JSON mapping).
  absl::StatusOr<std::string> text = JobStatusJson(job);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json json = nlohmann::json::parse(*text);
  EXPECT_EQ(json["transport"], "TRANSPORT_GLOO");
  EXPECT_EQ(json["transport_reason"], "auto: worker-3 (stage 1) has no GPU (device cpu)");
}

TEST(ZbppctlTables, StatusTableShowsTheLayoutAndWhy) {
  v1::Job job = RunningJob("job-1");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("layout:       -\n"));
  for (int blocks : {5, 3}) job.add_layout(blocks);
  job.set_layout_reason("given");
  EXPECT_THAT(JobStatusTable(job, absl::FromUnixSeconds(1000000000)),
              HasSubstr("layout:       [5, 3] (given)\n"));
}

TEST(ZbppctlTables, WorkersTable) {
  v1::Worker w;
  w.set_worker_id("w-1");
  w.mutable_description()->set_host("node-a");
  w.mutable_description()->set_device_kind(v1::DEVICE_KIND_CUDA);
  w.mutable_description()->set_device_index(3);
  w.mutable_description()->set_memory_bytes(80ull << 30);
  w.set_state(v1::WORKER_STATE_RUNNING);
  w.set_job_id("job-1");
  w.set_stage(2);
  w.set_replica(1);
  w.set_phase(v1::WORKER_PHASE_RUNNING);
  w.mutable_last_heartbeat_time()->set_seconds(100);
  const std::string table = WorkersTable({w}, absl::FromUnixSeconds(103));
  EXPECT_THAT(
      table,
      HasSubstr("w-1  -     node-a  CUDA:3  80.0GiB  RUNNING  job-1  2      1        RUNNING"));
  EXPECT_THAT(table, HasSubstr("STAGE  REPLICA  PHASE"));
  EXPECT_THAT(table, HasSubstr("3s"));
}

TEST(ZbppctlTables, Ages) {
  const absl::Time now = absl::FromUnixSeconds(1000000);
  EXPECT_EQ(Age(absl::InfinitePast(), now), "-");
  EXPECT_EQ(Age(now - absl::Seconds(59), now), "59s");
  EXPECT_EQ(Age(now - absl::Minutes(90), now), "90m");
  EXPECT_EQ(Age(now - absl::Hours(5), now), "5h");
  EXPECT_EQ(Age(now - absl::Hours(72), now), "3d");
}

TEST(ZbppctlWatch, PlainLinesOnePerEvent) {
  v1::JobEvent snapshot;
  *snapshot.mutable_snapshot() = RunningJob("job-1");
  snapshot.set_job_id("job-1");
  EXPECT_EQ(EventLine(snapshot, 100),
            "snapshot job=job-1 state=RUNNING step=50/100 schedule_version=2");
  v1::JobEvent step = StepEvent(50, 2.25);
  step.set_job_id("job-1");
  EXPECT_EQ(EventLine(step, 100),
            "step job=job-1 step=51/100 loss=2.2500 tokens_per_second=1234.5 "
            "bubble_rate=0.1250 predicted_bubble_rate=0.1000 "
            "step_seconds=0.5320 schedule_version=2");
  v1::JobEvent failed = StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED,
                                   "worker \"w-3\" lost");
  failed.set_job_id("job-1");
  EXPECT_EQ(EventLine(failed, 100),
            "state job=job-1 state=FAILED previous=RUNNING "
            "message=\"worker \\\"w-3\\\" lost\"");
  v1::JobEvent schedule;
  schedule.set_job_id("job-1");
  *schedule.mutable_schedule_change() = ZbVScheduleVersion("job-1");
  EXPECT_THAT(EventLine(schedule, 100),
              StartsWith("schedule job=job-1 schedule_version=2 "
                         "effective_step=40 reason=RESOLVE name=zb-v "));
  v1::JobEvent validation;
  validation.set_job_id("job-1");
  validation.mutable_validation()->set_step(7);
  validation.mutable_validation()->set_decision(
      v1::VALIDATION_DECISION_CLIPPED);
  validation.mutable_validation()->set_global_grad_norm(1.5);
  validation.mutable_validation()->add_rolled_back_stages(1);
  validation.mutable_validation()->add_rolled_back_stages(2);
  validation.mutable_validation()->set_clip_coefficient(2.0 / 3);
  validation.mutable_validation()->set_rollback_seconds(0.012);
  EXPECT_EQ(EventLine(validation, 100),
            "validation job=job-1 step=7 decision=CLIPPED "
            "global_grad_norm=1.5000 clip_coefficient=0.6667 "
            "rolled_back_stages=1,2 rollback_seconds=0.0120");
  v1::JobEvent skipped;
  skipped.set_job_id("job-1");
  v1::ValidationOutcome* o = skipped.mutable_validation();
  o->set_step(20);
  o->set_decision(v1::VALIDATION_DECISION_SKIPPED);
  o->set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
  o->set_global_grad_norm(std::nan(""));
  o->set_found_inf_nan(true);
  EXPECT_EQ(EventLine(skipped, 100),
            "validation job=job-1 step=20 decision=SKIPPED mode=SYNCHRONOUS "
            "global_grad_norm=nan inf_nan=true");
}

TEST(ZbppctlWatch, PrinterStopsAtATerminalState) {
  std::ostringstream out;
  WatchPrinter printer(out, /*terminal=*/false);
  v1::JobEvent snapshot;
  *snapshot.mutable_snapshot() = RunningJob("job-1");
  EXPECT_TRUE(printer.OnEvent(snapshot));
  EXPECT_TRUE(printer.OnEvent(StepEvent(50, 2.0)));
  EXPECT_FALSE(printer.OnEvent(
      StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)));
  printer.Finish();
  EXPECT_EQ(printer.progress().state, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(printer.progress().steps_completed, 51);
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_THAT(text, Not(HasSubstr("\r")));
}

TEST(ZbppctlWatch, TerminalModeRedrawsOneBar) {
  std::ostringstream out;
  WatchPrinter printer(out, /*terminal=*/true);
  v1::JobEvent snapshot;
  *snapshot.mutable_snapshot() = RunningJob("job-1");
  printer.OnEvent(snapshot);
  printer.OnEvent(StepEvent(50, 2.0));
  printer.OnEvent(StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED));
  printer.Finish();
  const std::string text = out.str();
  // Steps only redraw; the state change is a line above the bar.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_THAT(text, HasSubstr("\r\x1b[K"));
  EXPECT_THAT(text, HasSubstr("state=SUCCEEDED previous=RUNNING\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "51/100  loss 2.0000  1234 tok/s  bubble 12.5% (pred 10.0%)  v2"));
}

TEST(ZbppctlWatch, ProgressBarFillsWithSteps) {
  WatchProgress progress;
  progress.state = v1::JOB_STATE_RUNNING;
  progress.steps = 100;
  progress.steps_completed = 50;
  EXPECT_EQ(ProgressLine(progress),
            "RUNNING [###############...............] 50/100");
  progress.steps_completed = 100;
  progress.schedule_version = 3;
  EXPECT_EQ(ProgressLine(progress),
            "RUNNING [##############################] 100/100  v3");
}

TEST(ZbppctlSchedule, RendersEveryFormat) {
  v1::ScheduleVersion version = ZbVScheduleVersion("job-1");
  absl::StatusOr<std::string> table = RenderSchedule(version, "table");
  ASSERT_TRUE(table.ok());
  EXPECT_THAT(
      *table,
      HasSubstr("job job-1 schedule v2 from step 40 (RESOLVE: stage 2"));
  EXPECT_THAT(*table, HasSubstr("zb-v: 4 stages x 2 chunks, 8 microbatches"));
  EXPECT_THAT(*table, HasSubstr("stage 0: 0F0 "));
  absl::StatusOr<std::string> svg = RenderSchedule(version, "svg");
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_THAT(*svg, HasSubstr("<svg"));
  absl::StatusOr<std::string> trace = RenderSchedule(version, "chrome-trace");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_NO_THROW(nlohmann::json::parse(*trace));
  // Without costs the order is still drawn, with unit costs.
  version.clear_cost_model();
  EXPECT_TRUE(RenderSchedule(version, "svg").ok());
  EXPECT_FALSE(RenderSchedule(version, "png").ok());
}

}  // namespace
}  // namespace zbpp::ctl
