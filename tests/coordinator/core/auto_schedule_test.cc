// `schedule.name: auto` in the coordinator: the job runs its plan's pick
// (PlanJob, coordinator/core/planning.h) with that schedule's own chunks,
// its cost model and re-solves work on that schedule's virtual stages, and a
// restarted coordinator keeps it.

#include <cstdio>
#include <string>
#include <vector>

#include "api/schedule_proto.h"
#include "coordinator/core/planning.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using testing::CoordinatorTest;
using testing::FakeWorker;
using testing::TestSpec;

TEST_F(CoordinatorTest, AutoRunsItsVScheduleOnTwoChunksAcrossARestart) {
  const std::string path = NewDatabasePath();
  Start(path);
  // p = 2, m = 8, 1F1B's memory: a V schedule is the shortest here
  // (PlanJob.AutoPicksAVScheduleWhereItIsShortest).
  v1::JobSpec spec = TestSpec(2, 8, "auto", 30, 2);
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  const absl::StatusOr<JobPlan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ScheduleChoice& choice = plan->choice;
  ASSERT_EQ(sched::FindSchedule(choice.name)->placement, sched::Placement::kV);
  // The workers' passes take the analytic costs of the chosen schedule's
  // problem, its rank 1 half again as slow, so that re-solves have
  // measurements of all 2p virtual stages to work on.
  sched::Problem truth = choice.problem;
  ASSERT_EQ(truth.num_virtual_stages(), 4);
  for (int s : {1, 2}) {  // Rank 1's two chunks (V placement).
    truth.virtual_stages[s].f_seconds *= 1.5;
    truth.virtual_stages[s].b_seconds *= 1.5;
    truth.virtual_stages[s].w_seconds *= 1.5;
  }

  std::string job_id;
  {
    std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
    ASSERT_TRUE(workers[0].assignment.has_value());
    const v1::Schedule& first = workers[0].assignment->schedule().schedule();
    EXPECT_EQ(first.name(), choice.name);
    EXPECT_EQ(first.chunks(), 2);
    EXPECT_EQ(ScheduleFromProto(first)->actions, choice.schedule.actions);
    RunSteps(workers, truth, 9);
  }
  const absl::StatusOr<v1::Job> before =
      coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->state(), v1::JOB_STATE_RUNNING) << before->state_message();
  EXPECT_EQ(before->steps_completed(), 10);
  // Re-solved versions stay the chosen schedule on the same stages.
  EXPECT_EQ(before->schedule().schedule().name(), choice.name);
  EXPECT_EQ(before->schedule().schedule().chunks(), 2);

  Start(path);  // Same file, new process state.
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(AddWorker(10 + i));
  WaitOutTheRestoredAttempts(workers);
  HeartbeatAll(workers);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  RunSteps(workers, truth, 29);
  const absl::StatusOr<v1::Job> after =
      coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state(), v1::JOB_STATE_SUCCEEDED) << after->state_message();
  EXPECT_EQ(after->schedule().schedule().name(), choice.name);
  EXPECT_EQ(after->schedule().schedule().chunks(), 2);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace zbpp::coordinator
