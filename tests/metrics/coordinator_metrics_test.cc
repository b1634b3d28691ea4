#include "metrics/coordinator_metrics.h"

#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;
using testing::FindSample;
using testing::Serialize;

// A step of a 2-stage job; stage 1 idles more than stage 0.
zbpp::v1::StepSummary TwoStageStep(int64_t step, double step_seconds) {
  zbpp::v1::StepSummary summary;
  summary.set_step(step);
  summary.set_schedule_version(3);
  summary.set_step_seconds(step_seconds);
  summary.set_tokens_per_second(4096 / step_seconds);
  summary.set_predicted_step_seconds(0.75 * step_seconds);
  summary.set_measured_bubble_rate(0.2);
  summary.set_predicted_bubble_rate(0.15);
  for (int stage = 0; stage < 2; ++stage) {
    zbpp::v1::StageStepStats* stats = summary.add_stages();
    stats->set_stage(stage);
    stats->set_worker_id(absl::StrCat("worker-", stage + 1));
    stats->set_measured_bubble_rate(stage == 0 ? 0.125 : 0.25);
    stats->set_predicted_bubble_rate(stage == 0 ? 0.1 : 0.2);
    stats->set_idle_seconds(stage == 0 ? 0.0625 : 0.125);
    stats->set_f_seconds(0.01 * (stage + 1));
    stats->set_b_seconds(0.02 * (stage + 1));
    stats->set_w_seconds(0.005 * (stage + 1));
    stats->set_reduce_seconds(0.25 * (stage + 1));
    stats->set_exposed_reduce_seconds(stage == 1 ? 0.125 : 0);
    stats->set_peak_activation_bytes(stage == 0 ? 3 << 20 : 1 << 20);
    stats->set_predicted_peak_activation_bytes(2 << 20);
    zbpp::v1::StepBreakdown* b = stats->mutable_breakdown();
    b->set_compute_seconds(0.25 * (stage + 1));
    b->set_input_wait_seconds(0.0625);
    b->set_reduction_wait_seconds(0.03125 * stage);
    b->set_grant_seconds(0.125);
    b->set_other_seconds(0.5);
  }
  return summary;
}

class CoordinatorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorMetrics::Options options;
    options.job_states = {"PENDING", "RUNNING", "FAILED"};
    options.worker_states = {"REGISTERED", "ASSIGNED", "LOST"};
    auto created = CoordinatorMetrics::Create(options, registry_);
    ASSERT_TRUE(created.ok()) << created.status();
    metrics_ = std::move(*created);
  }
  std::string Text() const { return Serialize(*registry_); }

  std::shared_ptr<prometheus::Registry> registry_ =
      std::make_shared<prometheus::Registry>();
  std::unique_ptr<CoordinatorMetrics> metrics_;
};

TEST_F(CoordinatorMetricsTest, StatesListedInOptionsStartAtZero) {
  const std::string text = Text();
  for (const char* state : {"PENDING", "RUNNING", "FAILED"}) {
    EXPECT_THAT(FindSample(text, "zbpp_jobs", {{"state", state}}),
                Optional(0.0));
  }
  for (const char* state : {"REGISTERED", "ASSIGNED", "LOST"}) {
    EXPECT_THAT(FindSample(text, "zbpp_workers", {{"state", state}}),
                Optional(0.0));
  }
  // No job yet: no per-job family has a series (families without series are
  // not exposed at all).
  EXPECT_THAT(text, Not(HasSubstr("job_id=")));
}

TEST_F(CoordinatorMetricsTest, RecordStepSetsEveryPerStepFamily) {
  metrics_->RecordStep("job-a", TwoStageStep(0, 0.5));
  metrics_->RecordStep("job-a", TwoStageStep(1, 2.0));
  const std::string text = Text();

  EXPECT_THAT(text, HasSubstr("# HELP zbpp_stage_measured_bubble_ratio "));
  EXPECT_THAT(text, HasSubstr("# TYPE zbpp_stage_measured_bubble_ratio gauge"));
  EXPECT_THAT(text, HasSubstr("# TYPE zbpp_step_duration_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("# TYPE zbpp_resolves_total counter"));

  EXPECT_THAT(FindSample(text, "zbpp_stage_measured_bubble_ratio",
                         {{"job_id", "job-a"}, {"stage", "0"}}),
              Optional(0.125));
  EXPECT_THAT(FindSample(text, "zbpp_stage_measured_bubble_ratio",
                         {{"job_id", "job-a"}, {"stage", "1"}}),
              Optional(0.25));
  EXPECT_THAT(FindSample(text, "zbpp_stage_predicted_bubble_ratio",
                         {{"job_id", "job-a"}, {"stage", "1"}}),
              Optional(0.2));
  EXPECT_THAT(FindSample(text, "zbpp_stage_idle_seconds",
                         {{"job_id", "job-a"}, {"stage", "1"}}),
              Optional(0.125));
  EXPECT_THAT(FindSample(text, "zbpp_stage_pass_seconds",
                         {{"job_id", "job-a"}, {"stage", "1"}, {"pass", "F"}}),
              Optional(::testing::DoubleEq(0.02)));
  EXPECT_THAT(FindSample(text, "zbpp_stage_pass_seconds",
                         {{"job_id", "job-a"}, {"stage", "1"}, {"pass", "B"}}),
              Optional(::testing::DoubleEq(0.04)));
  EXPECT_THAT(FindSample(text, "zbpp_stage_pass_seconds",
                         {{"job_id", "job-a"}, {"stage", "0"}, {"pass", "W"}}),
              Optional(::testing::DoubleEq(0.005)));
  EXPECT_THAT(text, HasSubstr("# TYPE zbpp_stage_reduce_seconds gauge"));
  EXPECT_THAT(FindSample(text, "zbpp_stage_reduce_seconds",
                         {{"job_id", "job-a"}, {"stage", "1"}}),
              Optional(0.5));
  EXPECT_THAT(FindSample(text, "zbpp_stage_exposed_reduce_seconds",
                         {{"job_id", "job-a"}, {"stage", "1"}}),
              Optional(0.125));
  EXPECT_THAT(FindSample(text, "zbpp_stage_exposed_reduce_seconds",
                         {{"job_id", "job-a"}, {"stage", "0"}}),
              Optional(0.0));

  // The histogram saw both steps; the gauges hold the last one.
  EXPECT_THAT(
      FindSample(text, "zbpp_step_duration_seconds_count", {{"job_id", "job-a"}}),
      Optional(2.0));
  EXPECT_THAT(
      FindSample(text, "zbpp_step_duration_seconds_sum", {{"job_id", "job-a"}}),
      Optional(2.5));
  EXPECT_THAT(FindSample(text, "zbpp_step_duration_seconds_bucket",
                         {{"job_id", "job-a"}, {"le", "0.5"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_step_duration_seconds_bucket",
                         {{"job_id", "job-a"}, {"le", "+Inf"}}),
              Optional(2.0));
  EXPECT_THAT(
      FindSample(text, "zbpp_job_tokens_per_second", {{"job_id", "job-a"}}),
      Optional(2048.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_predicted_step_seconds", {{"job_id", "job-a"}}),
              Optional(1.5));
  EXPECT_THAT(FindSample(text, "zbpp_job_last_step", {{"job_id", "job-a"}}),
              Optional(1.0));
  EXPECT_THAT(
      FindSample(text, "zbpp_job_schedule_version", {{"job_id", "job-a"}}),
      Optional(3.0));

  // Counters of a job exist at 0 from its first mention.
  EXPECT_THAT(FindSample(text, "zbpp_rollbacks_total", {{"job_id", "job-a"}}),
              Optional(0.0));
  EXPECT_THAT(
      FindSample(text, "zbpp_skipped_steps_total", {{"job_id", "job-a"}}),
      Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_resolves_total",
                         {{"job_id", "job-a"}, {"outcome", "published"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_resolves_total",
                         {{"job_id", "job-a"}, {"outcome", "kept"}}),
              Optional(0.0));
}

TEST_F(CoordinatorMetricsTest, RecordStepSetsActivationPeaksAndTheBreakdown) {
  metrics_->RecordStep("job-a", TwoStageStep(0, 1.0));
  const std::string text = Text();
  EXPECT_THAT(text, HasSubstr("# TYPE zbpp_stage_peak_activation_bytes gauge"));
  EXPECT_THAT(text, HasSubstr("# TYPE zbpp_stage_breakdown_seconds gauge"));
  // (family, stage, value) as TwoStageStep set them.
  const std::tuple<const char*, const char*, double> peaks[] = {
      {"zbpp_stage_peak_activation_bytes", "0", 3 << 20},
      {"zbpp_stage_peak_activation_bytes", "1", 1 << 20},
      {"zbpp_stage_predicted_peak_activation_bytes", "1", 2 << 20}};
  for (const auto& [family, stage, bytes] : peaks) {
    EXPECT_THAT(FindSample(text, family, {{"job_id", "job-a"}, {"stage", stage}}),
                Optional(bytes))
        << family << " stage " << stage;
  }
  // Every part of job.proto's StepBreakdown, span and gap, by its field's
  // name, and no part for the gap's total (it is their sum).
  EXPECT_THAT(CoordinatorMetrics::BreakdownPartLabels(),
              ::testing::ElementsAre("compute", "input_wait", "send_wait", "validation_check",
                                     "reduction_wait", "overhead", "drain", "validation",
                                     "embedding_exchange", "optimizer", "evaluation", "checkpoint", "report", "grant",
                                     "other"));
  for (const std::string& part : CoordinatorMetrics::BreakdownPartLabels()) {
    for (const char* stage : {"0", "1"}) {
      EXPECT_TRUE(FindSample(text, "zbpp_stage_breakdown_seconds",
                             {{"job_id", "job-a"}, {"stage", stage}, {"part", part}})
                      .has_value())
          << part << " on stage " << stage;
    }
  }
  // (stage, part, seconds) as TwoStageStep set them; unset parts are 0.
  const std::tuple<const char*, const char*, double> parts[] = {
      {"1", "compute", 0.5}, {"1", "reduction_wait", 0.03125}, {"0", "grant", 0.125},
      {"0", "other", 0.5},   {"0", "send_wait", 0}};
  for (const auto& [stage, part, seconds] : parts) {
    EXPECT_THAT(FindSample(text, "zbpp_stage_breakdown_seconds",
                           {{"job_id", "job-a"}, {"stage", stage}, {"part", part}}),
                Optional(seconds))
        << part << " on stage " << stage;
  }
  EXPECT_THAT(text, Not(HasSubstr("part=\"gap\"")));
}

TEST_F(CoordinatorMetricsTest, NoStepOrMicrobatchLabels) {
  metrics_->RecordStep("job-a", TwoStageStep(7, 1.0));
  const std::string text = Text();
  EXPECT_THAT(text, Not(HasSubstr("step=")));
  EXPECT_THAT(text, Not(HasSubstr("microbatch")));
  EXPECT_THAT(text, Not(HasSubstr("worker_id")));
}

TEST_F(CoordinatorMetricsTest, InvalidStepValuesAreNotObserved) {
  zbpp::v1::StepSummary summary = TwoStageStep(0, 1.0);
  summary.set_step_seconds(-1);
  summary.mutable_stages(1)->set_stage(-1);
  metrics_->RecordStep("job-a", summary);
  metrics_->RecordStep("", TwoStageStep(0, 1.0));
  const std::string text = Text();
  EXPECT_THAT(
      FindSample(text, "zbpp_step_duration_seconds_count", {{"job_id", "job-a"}}),
      Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_stage_idle_seconds",
                         {{"job_id", "job-a"}, {"stage", "0"}}),
              Optional(0.0625));
  EXPECT_THAT(text, Not(HasSubstr("stage=\"-1\"")));
  EXPECT_THAT(text, Not(HasSubstr("job_id=\"\"")));
}

TEST_F(CoordinatorMetricsTest, CountersAndStateGauges) {
  metrics_->SetPredicted("job-b", 2, 0.375);
  metrics_->SetScheduleVersion("job-b", 4);
  metrics_->RecordResolve("job-b", /*published=*/true);
  metrics_->RecordResolve("job-b", /*published=*/false);
  metrics_->RecordResolve("job-b", /*published=*/false);
  metrics_->AddRollbacks("job-b", 2);
  metrics_->AddRollbacks("job-b");
  metrics_->AddRollbacks("job-b", -5);  // ignored
  metrics_->AddSkippedSteps("job-b");
  metrics_->SetWorkers("ASSIGNED", 4);
  metrics_->SetWorkers("LOST", 1);
  metrics_->SetJobs("RUNNING", 1);
  metrics_->SetJobs("RECOVERING", 0);  // a state not listed in Options
  const std::string text = Text();

  EXPECT_THAT(FindSample(text, "zbpp_stage_predicted_bubble_ratio",
                         {{"job_id", "job-b"}, {"stage", "2"}}),
              Optional(0.375));
  EXPECT_THAT(
      FindSample(text, "zbpp_job_schedule_version", {{"job_id", "job-b"}}),
      Optional(4.0));
  EXPECT_THAT(FindSample(text, "zbpp_resolves_total",
                         {{"job_id", "job-b"}, {"outcome", "published"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_resolves_total",
                         {{"job_id", "job-b"}, {"outcome", "kept"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(text, "zbpp_rollbacks_total", {{"job_id", "job-b"}}),
              Optional(3.0));
  EXPECT_THAT(
      FindSample(text, "zbpp_skipped_steps_total", {{"job_id", "job-b"}}),
      Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_workers", {{"state", "ASSIGNED"}}),
              Optional(4.0));
  EXPECT_THAT(FindSample(text, "zbpp_workers", {{"state", "LOST"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_workers", {{"state", "REGISTERED"}}),
              Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_jobs", {{"state", "RUNNING"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_jobs", {{"state", "RECOVERING"}}),
              Optional(0.0));
  // A job that has only a predicted schedule has no measured gauges yet.
  EXPECT_EQ(FindSample(text, "zbpp_stage_measured_bubble_ratio",
                       {{"job_id", "job-b"}, {"stage", "2"}}),
            std::nullopt);
}

TEST_F(CoordinatorMetricsTest, RpcLatencyByMethodAndCode) {
  const std::string submit = "/zbpp.v1.JobService/SubmitJob";
  metrics_->ObserveRpc(submit, absl::StatusCode::kOk, 0.002);
  metrics_->ObserveRpc(submit, absl::StatusCode::kOk, 0.004);
  metrics_->ObserveRpc(submit, absl::StatusCode::kInvalidArgument, 0.0005);
  metrics_->ObserveRpc(submit, absl::StatusCode::kOk, -1);  // ignored
  const std::string text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_rpc_duration_seconds_count",
                         {{"method", submit}, {"code", "OK"}}),
              Optional(2.0));
  EXPECT_THAT(FindSample(text, "zbpp_rpc_duration_seconds_sum",
                         {{"method", submit}, {"code", "OK"}}),
              Optional(::testing::DoubleEq(0.006)));
  EXPECT_THAT(FindSample(text, "zbpp_rpc_duration_seconds_bucket",
                         {{"method", submit},
                          {"code", "INVALID_ARGUMENT"},
                          {"le", "0.0005"}}),
              Optional(1.0));
}

TEST_F(CoordinatorMetricsTest, RemoveJobDropsOnlyThatJobsSeries) {
  metrics_->RecordStep("job-a", TwoStageStep(0, 1.0));
  metrics_->SetPredicted("job-a", 5, 0.5);
  metrics_->RecordResolve("job-a", true);
  metrics_->AddRollbacks("job-a");
  metrics_->RecordStep("job-b", TwoStageStep(0, 1.0));
  metrics_->SetJobs("RUNNING", 2);

  metrics_->RemoveJob("job-a");
  metrics_->RemoveJob("no-such-job");
  std::string text = Text();
  EXPECT_THAT(text, Not(HasSubstr("job-a")));
  EXPECT_THAT(FindSample(text, "zbpp_stage_measured_bubble_ratio",
                         {{"job_id", "job-b"}, {"stage", "1"}}),
              Optional(0.25));
  EXPECT_THAT(FindSample(text, "zbpp_jobs", {{"state", "RUNNING"}}),
              Optional(2.0));

  // Naming the job again starts its series afresh.
  metrics_->AddRollbacks("job-a");
  text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_rollbacks_total", {{"job_id", "job-a"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_tokens_per_second",
                         {{"job_id", "job-a"}}),
              std::nullopt);

  metrics_->RemoveJob("job-a");
  metrics_->RemoveJob("job-b");
  EXPECT_THAT(Text(), Not(HasSubstr("job_id=")));
}

// One info series per job: a recovery over another transport replaces it
// (the counters keep their own, transport-free series).
TEST_F(CoordinatorMetricsTest, JobInfoCarriesTheTransportOfTheCurrentAttempt) {
  metrics_->AddRollbacks("job-a");
  metrics_->SetTransport("job-a", "nccl");
  metrics_->SetTransport("job-b", "gloo");
  std::string text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_job_info", {{"job_id", "job-a"}, {"transport", "nccl"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_info", {{"job_id", "job-b"}, {"transport", "gloo"}}),
              Optional(1.0));

  metrics_->SetTransport("job-a", "gloo");
  metrics_->SetTransport("job-a", "gloo");
  metrics_->SetTransport("", "gloo");
  metrics_->SetTransport("job-c", "");
  text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_job_info", {{"job_id", "job-a"}, {"transport", "nccl"}}),
              std::nullopt);
  EXPECT_THAT(FindSample(text, "zbpp_job_info", {{"job_id", "job-a"}, {"transport", "gloo"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_rollbacks_total", {{"job_id", "job-a"}}), Optional(1.0));
  EXPECT_THAT(text, Not(HasSubstr("job-c")));

  metrics_->RemoveJob("job-a");
  EXPECT_THAT(Text(), Not(HasSubstr("job-a")));
}

// One series per virtual stage of the current layout: a re-planned layout
// replaces the values, a shorter one drops the series it no longer has.
TEST_F(CoordinatorMetricsTest, LayoutBlocksFollowTheCurrentLayout) {
  metrics_->SetLayout("job-a", {4, 2, 1, 1});
  std::string text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_job_layout_blocks",
                         {{"job_id", "job-a"}, {"virtual_stage", "0"}}),
              Optional(4.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_layout_blocks",
                         {{"job_id", "job-a"}, {"virtual_stage", "3"}}),
              Optional(1.0));
  metrics_->SetLayout("job-a", {6, 2});
  metrics_->SetLayout("", {1});
  text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_job_layout_blocks",
                         {{"job_id", "job-a"}, {"virtual_stage", "0"}}),
              Optional(6.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_layout_blocks",
                         {{"job_id", "job-a"}, {"virtual_stage", "2"}}),
              std::nullopt);
  metrics_->RemoveJob("job-a");
  EXPECT_THAT(Text(), Not(HasSubstr("zbpp_job_layout_blocks{")));
}

// A degraded job (docs/elastic.md): fewer active replicas and its spare
// workers, one series each, gone with the job.
TEST_F(CoordinatorMetricsTest, ReplicasSayHowManyRunAndHowManyWorkersAreSpare) {
  metrics_->SetReplicas("job-a", 2, 0);
  metrics_->SetReplicas("job-a", 1, 1);
  metrics_->SetReplicas("", 5, 5);
  const std::string text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_job_replicas", {{"job_id", "job-a"}, {"state", "active"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_replicas", {{"job_id", "job-a"}, {"state", "spare"}}),
              Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_job_replicas", {{"job_id", ""}, {"state", "active"}}),
              std::nullopt);
  metrics_->RemoveJob("job-a");
  EXPECT_THAT(Text(), Not(HasSubstr("zbpp_job_replicas{")));
}

TEST_F(CoordinatorMetricsTest, StoreSeriesFollowTheStoreWriter) {
  std::string text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_store_healthy", {}), Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_pending_writes", {}), Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_failed_writes_total", {}), Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_refused_writes_total", {}), Optional(0.0));
  metrics_->SetStore(/*healthy=*/false, /*pending=*/7, /*failed_writes=*/5,
                     /*refused_writes=*/1);
  text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_store_healthy", {}), Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_pending_writes", {}), Optional(7.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_failed_writes_total", {}), Optional(5.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_refused_writes_total", {}), Optional(1.0));
  // Recovered; the totals only go up.
  metrics_->SetStore(true, 0, 9, 0);
  text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_store_healthy", {}), Optional(1.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_pending_writes", {}), Optional(0.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_failed_writes_total", {}), Optional(9.0));
  EXPECT_THAT(FindSample(text, "zbpp_store_refused_writes_total", {}), Optional(1.0));
}

TEST_F(CoordinatorMetricsTest, ConcurrentUpdatesAndRemovals) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      const std::string job = absl::StrCat("job-", t % 2);
      for (int i = 0; i < 200; ++i) {
        metrics_->RecordStep(job, TwoStageStep(i, 0.1));
        metrics_->AddRollbacks(job);
        metrics_->ObserveRpc("/zbpp.v1.WorkerService/ReportStep",
                             absl::StatusCode::kOk, 0.001);
        metrics_->SetWorkers("ASSIGNED", i);
        if (t == 3 && i % 50 == 0) metrics_->RemoveJob("job-1");
        if (i % 20 == 0) Text();  // scrapes race with updates
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = Text();
  EXPECT_THAT(FindSample(text, "zbpp_rollbacks_total", {{"job_id", "job-0"}}),
              Optional(400.0));
  EXPECT_THAT(FindSample(text, "zbpp_rpc_duration_seconds_count",
                         {{"method", "/zbpp.v1.WorkerService/ReportStep"},
                          {"code", "OK"}}),
              Optional(800.0));
}

TEST(CoordinatorMetricsCreateTest, RejectsBadOptions) {
  auto registry = std::make_shared<prometheus::Registry>();
  EXPECT_EQ(CoordinatorMetrics::Create({}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);

  CoordinatorMetrics::Options duplicate_state;
  duplicate_state.job_states = {"RUNNING", "RUNNING"};
  EXPECT_EQ(CoordinatorMetrics::Create(duplicate_state, registry).status().code(),
            absl::StatusCode::kInvalidArgument);

  CoordinatorMetrics::Options empty_state;
  empty_state.worker_states = {""};
  EXPECT_EQ(CoordinatorMetrics::Create(empty_state, registry).status().code(),
            absl::StatusCode::kInvalidArgument);

  CoordinatorMetrics::Options unsorted;
  unsorted.step_duration_buckets_seconds = {1, 0.5};
  auto status = CoordinatorMetrics::Create(unsorted, registry).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("step_duration_buckets_seconds"));

  CoordinatorMetrics::Options no_buckets;
  no_buckets.rpc_duration_buckets_seconds.clear();
  EXPECT_EQ(CoordinatorMetrics::Create(no_buckets, registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CoordinatorMetricsCreateTest, NameTakenByAnotherTypeIsAlreadyExists) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("zbpp_jobs").Help("clash").Register(*registry);
  auto created = CoordinatorMetrics::Create({}, registry);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kAlreadyExists)
      << created.status();
}

}  // namespace
}  // namespace zbpp::metrics
