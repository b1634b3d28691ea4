// A failing store (tests/coordinator/core/faulty_store.h) through the whole core:
// failed writes are retried in order and nothing decided is lost; while
// they fail the jobs get no new steps and the failure is visible
// (StoreHealth, FlushStore, ListSteps); a deleted database file is a
// failure like any other; a job the store refused says why.

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class StoreFailureTest : public CoordinatorTest {
 protected:
  /// 12 steps of a 2-stage job with AUTO validation (mode switches are
  /// schedule versions) and a checkpoint every 2 steps (after odd steps:
  /// ReportStepOnAll); no re-solves.
  static v1::JobSpec Spec() {
    v1::JobSpec spec = TestSpec(2, 4, "zb-h1", kSteps);
    spec.mutable_schedule()->mutable_resolve()->set_min_improvement(0.9);
    spec.set_validation(v1::VALIDATION_MODE_AUTO);
    spec.mutable_checkpoint()->set_interval_steps(2);
    spec.mutable_checkpoint()->set_directory("/ckpt/{job_id}");  // One per job.
    return spec;
  }
  static constexpr int64_t kSteps = 12;

  /// Waits until the store writer has applied everything (its retries take
  /// milliseconds in this fixture).
  void AwaitStoreRecovered() {
    while (!coordinator_->FlushStore().ok()) absl::SleepFor(absl::Milliseconds(1));
  }

  /// Every summary, validation outcome and checkpoint of a job that ran
  /// steps [0, kSteps) is stored, in step order, and so is every version.
  void ExpectCompleteHistory(const std::string& job_id,
                             const std::vector<FakeWorker>& workers) {
    auto steps = store_->ListStepSummaries(job_id, 0, 1000);
    ASSERT_TRUE(steps.ok()) << steps.status();
    ASSERT_EQ(steps->size(), static_cast<size_t>(kSteps));
    for (int64_t i = 0; i < kSteps; ++i) EXPECT_EQ((*steps)[i].step(), i);
    auto outcomes = store_->ListValidationOutcomes(job_id);
    ASSERT_TRUE(outcomes.ok()) << outcomes.status();
    ASSERT_EQ(outcomes->size(), static_cast<size_t>(kSteps));
    for (int64_t i = 0; i < kSteps; ++i) EXPECT_EQ((*outcomes)[i].step(), i);
    auto stored = store_->LoadAll();
    ASSERT_TRUE(stored.ok()) << stored.status();
    std::vector<int64_t> checkpoints;
    for (const CheckpointRecord& c : stored->checkpoints) checkpoints.push_back(c.step);
    EXPECT_EQ(checkpoints, (std::vector<int64_t>{1, 3, 5, 7, 9, 11}));
    ASSERT_GE(workers[0].versions.size(), 2u) << "no mode switch was published";
    ASSERT_EQ(stored->schedule_versions.size(), workers[0].versions.size());
    for (size_t i = 0; i < workers[0].versions.size(); ++i) {
      EXPECT_EQ(stored->schedule_versions[i].version(), workers[0].versions[i].version());
    }
    auto job = store_->GetJob(job_id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
    EXPECT_EQ(job->steps_completed(), kSteps);
  }
};

TEST_F(StoreFailureTest, FailedWritesAreRetriedInOrderAndNothingIsLost) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(Spec(), &job_id);
  const sched::Problem truth = TrueCosts(Spec(), 1, 1.0);
  int64_t step = 0;
  for (; step < 3; ++step) ASSERT_TRUE(ReportStepOnAll(workers, truth, step));
  // The next 40 writes fail (a database unwritable for a while).
  faulty_store_->FailNextWrites(40);
  while (step < kSteps) {
    if (ReportStepOnAll(workers, truth, step)) {
      ++step;
    } else {
      AwaitStoreRecovered();  // Paused: the grants come back with the store.
    }
  }
  AwaitStoreRecovered();
  EXPECT_EQ(faulty_store_->failed(), 40);
  const StoreWriter::Health health = coordinator_->StoreHealth();
  EXPECT_TRUE(health.healthy);
  EXPECT_EQ(health.failed_attempts, 40);
  EXPECT_EQ(health.refused, 0);
  EXPECT_EQ(health.pending, 0);
  ExpectCompleteHistory(job_id, workers);
}

// The job's record (with its last step's timeline) is stored when it
// changes, once per completed step, not on each of the p·d reports.
TEST_F(StoreFailureTest, TheJobRecordIsStoredOncePerStepNotPerReport) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(Spec(), &job_id);
  const sched::Problem truth = TrueCosts(Spec(), 1, 1.0);
  ASSERT_TRUE(ReportStepOnAll(workers, truth, 0));  // RUNNING from here.
  AwaitStoreRecovered();
  const int64_t before = faulty_store_->stored("UpdateJob");
  constexpr int64_t kRun = 8;  // Steps 1..8 of 12: none is the last.
  for (int64_t step = 1; step <= kRun; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, truth, step));
  }
  AwaitStoreRecovered();
  const int64_t updates = faulty_store_->stored("UpdateJob") - before;
  EXPECT_GE(updates, kRun) << "each completed step changes the record";
  EXPECT_LE(updates, kRun + 2) << "p = 2 reports per step: not one write each";
  auto stored = store_->GetJob(job_id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->steps_completed(), kRun + 1);
}

TEST_F(StoreFailureTest, AStoreThatKeepsFailingPausesTheJobVisibly) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(Spec(), &job_id);
  const sched::Problem truth = TrueCosts(Spec(), 1, 1.0);
  ASSERT_TRUE(ReportStepOnAll(workers, truth, 0));
  faulty_store_->FailAllWrites(true);
  ASSERT_TRUE(ReportStepOnAll(workers, truth, 1));  // Queues its summary.
  const absl::Status flushed = coordinator_->FlushStore();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kUnavailable) << flushed;
  EXPECT_THAT(flushed.message(), HasSubstr("injected fault"));

  // No new grant from now on: the steps already granted complete, then the
  // job waits.
  for (FakeWorker& w : workers) w.Drain();
  const int64_t granted = workers[0].granted;
  int64_t step = 2;
  while (ReportStepOnAll(workers, truth, step)) ++step;
  for (const FakeWorker& w : workers) EXPECT_EQ(w.granted, granted);
  EXPECT_EQ(step, granted + 1);
  EXPECT_LT(step, kSteps);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->steps_completed(), granted + 1);
  EXPECT_THAT(job->state_message(),
              HasSubstr("paused: no new steps while the coordinator's store is failing"));

  const StoreWriter::Health health = coordinator_->StoreHealth();
  EXPECT_FALSE(health.healthy);
  EXPECT_GT(health.pending, 0);
  EXPECT_GT(health.failed_attempts, 0);
  EXPECT_THAT(health.last_error, HasSubstr("injected fault"));
  v1::ListStepsRequest list;
  list.set_job_id(job_id);
  EXPECT_EQ(coordinator_->ListSteps(list).status().code(), absl::StatusCode::kUnavailable);

  // The store comes back: the job resumes and its history is whole.
  faulty_store_->FailAllWrites(false);
  AwaitStoreRecovered();
  EXPECT_THAT(coordinator_->GetJob(job_id, {})->state_message(), Not(HasSubstr("paused")));
  while (step < kSteps) {
    ASSERT_TRUE(ReportStepOnAll(workers, truth, step)) << step;
    ++step;
  }
  AwaitStoreRecovered();
  EXPECT_TRUE(coordinator_->StoreHealth().healthy);
  ExpectCompleteHistory(job_id, workers);
}

// Outcomes are queued, not stored before ReportStep returns, so a step
// redone after a recovery is recognized in memory (validated_through): its
// outcome replaces the stored one, and a step clipped in both runs is
// counted once.
TEST_F(StoreFailureTest, AStepValidatedAgainAfterARecoveryIsRecordedOnce) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(Spec(), &job_id);
  const sched::Problem truth = TrueCosts(Spec(), 1, 1.0);
  for (int64_t step = 0; step <= 4; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, truth, step,
                                step == 4 ? v1::VALIDATION_DECISION_CLIPPED
                                          : v1::VALIDATION_DECISION_COMMITTED));
  }
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->clipped_steps_total(), 1);
  SilenceUntilLost(workers, 1);
  workers[1] = AddWorker(9);
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(workers[0].assignment->start_step(), 4) << "resumes after checkpoint 3";
  for (int64_t step = 4; step < kSteps; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, truth, step,
                                step == 4 ? v1::VALIDATION_DECISION_CLIPPED
                                          : v1::VALIDATION_DECISION_COMMITTED))
        << step;
  }
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->clipped_steps_total(), 1);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  EXPECT_EQ(coordinator_->StoreHealth().refused, 0) << "no duplicate reached the store";
  auto outcomes = store_->ListValidationOutcomes(job_id);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  ASSERT_EQ(outcomes->size(), static_cast<size_t>(kSteps));
  for (int64_t i = 0; i < kSteps; ++i) EXPECT_EQ((*outcomes)[i].step(), i);
}

// Workers that give up waiting for a grant while the store fails (their
// --comm-timeout) fail their attempt; the job recovers each time and does
// not go FAILED for max_recoveries_without_progress (3) of them.
TEST_F(StoreFailureTest, WorkerFailuresWhileTheStoreFailsDoNotFailTheJob) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(Spec(), &job_id);
  faulty_store_->FailAllWrites(true);
  // The writes of the submission may all be applied already; the Tick's
  // probe then is the failing write, so the store fails either way.
  coordinator_->Tick();
  ASSERT_FALSE(coordinator_->FlushStore().ok());
  for (int64_t attempt = 1; attempt <= 5; ++attempt) {
    ASSERT_NO_FATAL_FAILURE(
        RunThenFailAttempt(workers, job_id, attempt, 1, "no grant for step 0 within 2m"));
    ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RECOVERING)
        << "attempt " << attempt;
  }
  faulty_store_->FailAllWrites(false);
  AwaitStoreRecovered();
}

TEST_F(StoreFailureTest, ADeletedDatabaseFileIsAFailingStore) {
  const std::string path = NewDatabasePath();
  Start(path);
  auto job = coordinator_->SubmitJob(Spec());
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  ASSERT_EQ(::unlink(path.c_str()), 0);
  // Nothing else to write: the Tick's probe finds it.
  coordinator_->Tick();
  const absl::Status flushed = coordinator_->FlushStore();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kUnavailable) << flushed;
  EXPECT_THAT(flushed.message(), HasSubstr(path + " was deleted"));
  EXPECT_FALSE(coordinator_->StoreHealth().healthy);
  // A new job is refused with the reason.
  auto refused = coordinator_->SubmitJob(Spec());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(refused.status().message(), HasSubstr("storing job job-2: "));
  EXPECT_THAT(refused.status().message(), HasSubstr(path + " was deleted"));
}

TEST_F(StoreFailureTest, ASubmitTheStoreRefusesReturnsTheStoresError) {
  faulty_store_->FailAllWrites(true);
  auto refused = coordinator_->SubmitJob(Spec());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("storing job job-1: injected fault: CreateJob"));
  faulty_store_->FailAllWrites(false);
  auto stored = coordinator_->SubmitJob(Spec());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->id(), "job-1") << "a refused job takes no id";
}

}  // namespace
}  // namespace zbpp::coordinator::testing
