// Bounds of the coordinator's core: finished jobs beyond the retention are
// deleted (never a running one), a replayed step report changes nothing,
// reported times are bounded, and the rendezvous holds a bounded total.

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/core/step_report_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TestSpec;
using testing::TrueCosts;

/// Counts what the zbpp_step_* metrics would count.
class CountingObserver : public CoordinatorObserver {
 public:
  void OnStep(const std::string&, const zbpp::v1::StepSummary&) override { ++steps; }
  std::atomic<int> steps{0};
};

class RetentionTest : public testing::CoordinatorTest {
 protected:
  void TearDown() override { coordinator_.reset(); }

  /// Submits a job and cancels it at once: a finished job.
  std::string FinishedJob() {
    absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(TestSpec(2, 4));
    EXPECT_TRUE(job.ok()) << job.status();
    EXPECT_TRUE(coordinator_->CancelJob(job->id(), "").ok());
    return job->id();
  }

  CountingObserver counter_;
};

TEST_F(RetentionTest, OldestFinishedJobsBeyondTheRetentionAreDeletedNeverARunningOne) {
  const std::string path = NewDatabasePath();
  retained_finished_jobs_ = 2;
  Start(path);
  std::string running;
  std::vector<testing::FakeWorker> workers = AssignedPipeline(TestSpec(2, 4, "zb-1p", 50), &running);
  HeartbeatAll(workers);
  ASSERT_EQ(coordinator_->GetJob(running, {})->state(), v1::JOB_STATE_RUNNING);
  RunSteps(workers, TrueCosts(TestSpec(2, 4), 1, 1.0), 2);
  std::vector<std::string> finished;
  for (int i = 0; i < 4; ++i) finished.push_back(FinishedJob());
  coordinator_->Tick();
  ASSERT_TRUE(coordinator_->FlushStore().ok());

  // The two oldest finished jobs are gone, from memory and the store (with
  // their records); the running one, older still, and the two newest stay.
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(absl::IsNotFound(coordinator_->GetJob(finished[i], {}).status())) << finished[i];
    EXPECT_TRUE(absl::IsNotFound(store_->GetJob(finished[i]).status())) << finished[i];
  }
  for (int i = 2; i < 4; ++i) EXPECT_TRUE(coordinator_->GetJob(finished[i], {}).ok());
  EXPECT_EQ(coordinator_->GetJob(running, {})->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(store_->ListStepSummaries(running, 0, 100)->size(), 3u);
  v1::ListJobsResponse listed = *coordinator_->ListJobs({});
  EXPECT_EQ(listed.jobs_size(), 3);
  EXPECT_EQ(coordinator_->StoreHealth().refused, 0);

  // A new submission applies it too, and numbers go on (no id reused).
  const std::string fifth = FinishedJob();
  coordinator_->Tick();
  EXPECT_TRUE(absl::IsNotFound(coordinator_->GetJob(finished[2], {}).status()));
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  Start(path);  // A restart keeps the same jobs and numbering.
  listed = *coordinator_->ListJobs({});
  ASSERT_EQ(listed.jobs_size(), 3);
  EXPECT_EQ(listed.jobs(0).id(), fifth);
  EXPECT_EQ(listed.jobs(1).id(), finished[3]);
  EXPECT_EQ(listed.jobs(2).id(), running);
  EXPECT_EQ(coordinator_->SubmitJob(TestSpec(2, 4))->id(), "job-7");
  std::remove(path.c_str());
}

// 1,001 submit-and-cancel pairs once evicted every finished job's record
// (report, checksum): jobs that never ran a step go first now.
TEST_F(RetentionTest, JobsThatNeverRanAStepDoNotPushOutJobsThatDid) {
  retained_finished_jobs_ = 2;
  Start(":memory:");
  std::string trained;
  std::vector<testing::FakeWorker> workers =
      AssignedPipeline(TestSpec(2, 4, "zb-1p", 3), &trained);
  HeartbeatAll(workers);
  RunSteps(workers, TrueCosts(TestSpec(2, 4), 1, 1.0), 2);
  ASSERT_EQ(coordinator_->GetJob(trained, {})->state(), v1::JOB_STATE_SUCCEEDED);
  std::vector<std::string> flood;
  for (int i = 0; i < 10; ++i) flood.push_back(FinishedJob());
  coordinator_->Tick();
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const absl::StatusOr<v1::Job> kept = coordinator_->GetJob(trained, {});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->has_param_checksum() || kept->has_last_step());
  EXPECT_TRUE(store_->GetJob(trained).ok());
  EXPECT_EQ(store_->ListStepSummaries(trained, 0, 100)->size(), 3u);
  // The flood keeps its newest job only (the retention holds two).
  EXPECT_EQ(coordinator_->ListJobs({})->jobs_size(), 2);
  EXPECT_TRUE(coordinator_->GetJob(flood.back(), {}).ok());
  EXPECT_TRUE(absl::IsNotFound(coordinator_->GetJob(flood.front(), {}).status()));
}

// Submissions past the burst (100 by default) are refused until the rate
// (10 per second) gives a token back: the clock moves, nothing sleeps.
TEST_F(RetentionTest, SubmissionsPastTheRateAreRefusedNamingTheLimit) {
  // 1F1B: planned without a solver, so 100 submissions stay cheap.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(coordinator_->SubmitJob(TestSpec(2, 4, "1f1b")).ok()) << i;
  }
  const absl::StatusOr<v1::Job> refused = coordinator_->SubmitJob(TestSpec(2, 4, "1f1b"));
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("max_submissions_per_second"));
  EXPECT_EQ(coordinator_->ListJobs({})->jobs_size(), 100);
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_TRUE(coordinator_->SubmitJob(TestSpec(2, 4, "1f1b")).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(coordinator_->SubmitJob(TestSpec(2, 4, "1f1b")).status()));
}

TEST_F(RetentionTest, ReplayedReportOfACompletedStepChangesNothing) {
  observer_ = &counter_;
  Start(":memory:");
  std::string job_id;
  std::vector<testing::FakeWorker> workers = AssignedPipeline(TestSpec(2, 4, "zb-1p", 20), &job_id);
  HeartbeatAll(workers);
  const sched::Problem truth = TrueCosts(TestSpec(2, 4), 1, 1.0);
  RunSteps(workers, truth, 2);
  ASSERT_EQ(counter_.steps, 3);
  // Every rank sends its report of step 1 again (a retry whose answer was
  // lost, or a replay): acknowledged, and nothing moves.
  for (testing::FakeWorker& w : workers) {
    const absl::Status replayed = coordinator_->ReportStep(w.Report(1, truth));
    EXPECT_TRUE(replayed.ok()) << replayed;
  }
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  EXPECT_EQ(counter_.steps, 3);
  const v1::Job job = *coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job.steps_completed(), 3);
  EXPECT_EQ(job.last_step().step(), 2);
  EXPECT_EQ(coordinator_->StoreHealth().refused, 0);
  // The job goes on from where it was.
  RunSteps(workers, truth, 4);
  EXPECT_EQ(counter_.steps, 5);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->last_step().step(), 4);
}

TEST_F(RetentionTest, TimesBeyondADayAreRefusedNamingTheField) {
  std::string job_id;
  std::vector<testing::FakeWorker> workers = AssignedPipeline(TestSpec(2, 4, "zb-1p", 20), &job_id);
  HeartbeatAll(workers);
  for (auto& w : workers) w.Drain();
  const sched::Problem truth = TrueCosts(TestSpec(2, 4), 1, 1.0);
  v1::ReportStepRequest report = workers[0].Report(0, truth);
  report.set_step_seconds(1e308);
  absl::Status refused = coordinator_->ReportStep(report);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("step_seconds: must be at most 86400 s, got 1e+308"));
  report = workers[0].Report(0, truth);
  v1::HopLatency* hop = report.add_hop_latencies();
  hop->set_to_stage(1);
  hop->set_one_way_seconds(1e308);
  refused = coordinator_->ReportStep(report);
  EXPECT_THAT(refused.message(), HasSubstr("hop_latencies[0].one_way_seconds"));
  // Nothing was kept: the honest report is the step's first.
  EXPECT_TRUE(coordinator_->ReportStep(workers[0].Report(0, truth)).ok());
  EXPECT_TRUE(coordinator_->ReportStep(workers[1].Report(0, truth)).ok());
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 1);
  EXPECT_LT(coordinator_->GetJob(job_id, {})->last_step().step_seconds(), kMaxReportedSeconds);
}

TEST(RendezvousTotalTest, ScopesTogetherStayUnderTheTotalCap) {
  RendezvousStore::Options options;
  options.max_scope_bytes = 1 << 20;
  options.max_total_bytes = 5 << 19;  // Two and a half scopes.
  std::unique_ptr<RendezvousStore> kv = *RendezvousStore::Create(options);
  const std::string value((1 << 20) - 16, 'v');
  EXPECT_TRUE(kv->Set("job-1/attempt-1", "k", value).ok());
  EXPECT_TRUE(kv->Set("job-2/attempt-1", "k", value).ok());
  const absl::Status refused = kv->Set("job-3/attempt-1", "k", value);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("in all scopes"));
  EXPECT_LE(kv->total_bytes(), options.max_total_bytes);
  // Replacing a value by a smaller one, deleting a key or a scope frees room.
  EXPECT_TRUE(kv->Set("job-1/attempt-1", "k", "small").ok());
  EXPECT_TRUE(kv->Set("job-3/attempt-1", "k", value).ok());
  kv->DeleteScope("job-2/attempt-1");
  EXPECT_TRUE(kv->Delete("job-3/attempt-1", "k"));
  EXPECT_EQ(kv->total_bytes(), std::string("k").size() + std::string("small").size());
}

}  // namespace
}  // namespace zbpp::coordinator
