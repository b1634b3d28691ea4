// JobTable (coordinator/core/job_table.h) with JobHarness's context: new
// ids, recovery from the store (numbers kept, states restored and stored
// through the writer, versions and validation counts back), and the
// retention of finished jobs (oldest first, never an active one, no id
// given twice).

#include "coordinator/core/job_table.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/core/schedule_versions.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/core/job_harness.h"
#include "testing/fake_pipeline.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;
using testing::TestSpec;

class JobTableTest : public testing::JobHarness {
 protected:
  /// The ids of the table's jobs, oldest first.
  static std::vector<std::string> Ids(const JobTable& table) {
    std::vector<std::string> ids;
    table.ForEach([&ids](Job& job) {
      ids.push_back(job.id());
      return true;
    });
    return ids;
  }

  /// Stores a job `id` in `state` as an earlier coordinator left it.
  void StoreJob(const std::string& id, v1::JobState state) {
    v1::Job proto;
    proto.set_id(id);
    *proto.mutable_spec() = TestSpec(2);
    proto.set_state(state);
    proto.set_last_checkpoint_step(-1);
    ASSERT_TRUE(store_->CreateJob(proto).ok());
  }
};

TEST_F(JobTableTest, NewJobsAreNumberedAndAResumedSpecStartsAfterItsCheckpoint) {
  JobTable table(context_);
  const absl::Time now = absl::FromUnixSeconds(1000);
  v1::Job first = table.NewJob(TestSpec(), now);
  EXPECT_EQ(first.id(), "job-1");
  EXPECT_EQ(first.state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(first.last_checkpoint_step(), -1);
  EXPECT_EQ(first.create_time().seconds(), 1000);
  EXPECT_EQ(table.NewJob(TestSpec(), now).id(), "job-1");  // Not added yet.
  table.Add(first);
  v1::JobSpec resumed = TestSpec();
  resumed.mutable_checkpoint()->set_resume_step(9);
  v1::Job second = table.NewJob(resumed, now);
  EXPECT_EQ(second.id(), "job-2");
  EXPECT_EQ(second.last_checkpoint_step(), 9);
  EXPECT_EQ(second.steps_completed(), 10);
  EXPECT_NE(table.Find("job-1"), nullptr);
  EXPECT_EQ(table.Find("job-2"), nullptr);
}

TEST_F(JobTableTest, RecoverKeepsNumbersRestoresStatesAndDecidesStoringThem) {
  StoreJob("job-3", v1::JOB_STATE_RUNNING);
  StoreJob("job-5", v1::JOB_STATE_SUCCEEDED);
  StoreJob("job-7", v1::JOB_STATE_ASSIGNING);
  StoreJob("imported", v1::JOB_STATE_PENDING);
  const sched::Problem problem = sched::Problem::Uniform(2, 1, 4, {}, 0);
  const sched::Schedule schedule = *sched::Generate("zb-1p", problem);
  v1::ScheduleVersion version =
      BuildVersion("job-3", schedule, problem, *sched::Simulate(problem, schedule),
                   v1::SCHEDULE_CHANGE_REASON_INITIAL, "", nullptr);
  ScheduleVersions().Stamp(version, -1, 0, absl::UnixEpoch());
  ASSERT_TRUE(store_->AddScheduleVersion(version).ok());
  v1::ValidationOutcome skipped;
  skipped.set_step(2);
  skipped.set_decision(v1::VALIDATION_DECISION_SKIPPED);
  ASSERT_TRUE(store_->PutValidationOutcome("job-3", skipped).ok());

  JobTable table(context_);
  ASSERT_TRUE(table.Recover(*store_).ok());
  table.ForEach([this](Job& job) {
    Apply(job);
    return true;
  });
  // "imported" has no number of its own: it gets the next one.
  EXPECT_THAT(Ids(table), ElementsAre("job-3", "job-5", "job-7", "imported"));
  EXPECT_EQ(table.Find("imported")->seq(), 8);
  EXPECT_EQ(table.NewJob(TestSpec(), absl::UnixEpoch()).id(), "job-9");
  const Job& running = *table.Find("job-3");
  EXPECT_EQ(running.state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(running.proto().state_message(), "coordinator restarted");
  EXPECT_EQ(running.proto().recoveries_total(), 1);
  EXPECT_EQ(running.proto().skipped_steps_total(), 1);
  ASSERT_NE(running.Version(1), nullptr);
  EXPECT_EQ(running.Version(1)->schedule().name(), "zb-1p");
  EXPECT_EQ(table.Find("job-7")->state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(table.Find("job-5")->state(), v1::JOB_STATE_SUCCEEDED);
  // The two changed states, and only they, reach the store.
  EXPECT_EQ(StoredJobUpdates(), 2);
  EXPECT_EQ(store_->GetJob("job-3")->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(store_->GetJob("job-7")->state(), v1::JOB_STATE_PENDING);
}

TEST_F(JobTableTest, RetentionErasesTheOldestFinishedJobsNeverAnActiveOne) {
  JobTable table(context_);
  for (int i = 0; i < 5; ++i) {
    v1::Job proto = table.NewJob(TestSpec(), absl::UnixEpoch());
    ASSERT_TRUE(store_->CreateJob(proto).ok());  // As SubmitJob does.
    table.Add(proto);
  }
  for (const char* id : {"job-1", "job-2", "job-4", "job-5"}) {
    ASSERT_TRUE(table.Find(id)->Cancel("done").ok());
    Apply(*table.Find(id));
  }
  EXPECT_EQ(table.ActiveCount(), 1);
  EXPECT_EQ(table.Counts()["CANCELLED"], 4);
  EXPECT_EQ(table.Counts()["PENDING"], 1);
  EXPECT_THAT(table.EraseFinishedBeyond(2), ElementsAre("job-1", "job-2"));
  EXPECT_THAT(Ids(table), ElementsAre("job-3", "job-4", "job-5"));
  EXPECT_EQ(table.Find("job-1"), nullptr);
  // At least the newest finished job stays; the active one always does.
  EXPECT_THAT(table.EraseFinishedBeyond(0), ElementsAre("job-4"));
  EXPECT_THAT(Ids(table), ElementsAre("job-3", "job-5"));
  EXPECT_TRUE(table.EraseFinishedBeyond(1).empty());
  // No number is given twice.
  EXPECT_EQ(table.NewJob(TestSpec(), absl::UnixEpoch()).id(), "job-6");
}

}  // namespace
}  // namespace zbpp::coordinator
