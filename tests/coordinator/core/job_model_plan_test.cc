// JobModel (coordinator/core/job_model.h) and the plan SubmitJob hands it
// (planning.h): version 1 is that plan's schedule, not a second solve.

#include <optional>

#include "common/clock.h"
#include "coordinator/core/job_context.h"
#include "coordinator/core/job_model.h"
#include "coordinator/core/planning.h"
#include "coordinator/core/schedule_versions.h"
#include "gtest/gtest.h"
#include "testing/fake_pipeline.h"

namespace zbpp::coordinator {
namespace {

using testing::TestSpec;

class JobModelPlanTest : public ::testing::Test {
 protected:
  JobModelPlanTest() {
    context_.clock = &clock_;
    proto_.set_id("job-1");
    *proto_.mutable_spec() = TestSpec(2, 8, "zb-1p");
  }

  FakeClock clock_;
  JobContext context_;
  v1::Job proto_;
  ScheduleVersions no_versions_;
};

TEST_F(JobModelPlanTest, VersionOneIsTheAdoptedPlan) {
  absl::StatusOr<JobPlan> plan = PlanJob(proto_.spec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Marks no solve of this spec produces: only the adopted plan has them.
  plan->choice.simulation.step_seconds = 123;
  plan->choice.problem.comm_seconds = 0.5;
  JobModel model;
  model.AdoptPlan(*plan);
  const absl::StatusOr<std::optional<ScheduleChoice>> first =
      model.Prepare(proto_, no_versions_, context_);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->name, "zb-1p");
  EXPECT_EQ((*first)->schedule.actions, plan->choice.schedule.actions);
  EXPECT_EQ((*first)->simulation.step_seconds, 123);
  EXPECT_EQ(model.base().comm_seconds, 0.5) << "the base problem is the plan's";
}

TEST_F(JobModelPlanTest, WithoutAPlanPrepareMakesIt) {
  // A job recovered before its first version was published has no plan.
  const absl::StatusOr<JobPlan> plan = PlanJob(proto_.spec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  JobModel model;
  const absl::StatusOr<std::optional<ScheduleChoice>> first =
      model.Prepare(proto_, no_versions_, context_);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->schedule.actions, plan->choice.schedule.actions);
  EXPECT_DOUBLE_EQ((*first)->simulation.step_seconds, plan->choice.simulation.step_seconds);
  EXPECT_EQ(model.base().comm_seconds, 0);
}

TEST_F(JobModelPlanTest, APlanThatNoLongerPlansFailsTheJobNamingTheSchedule) {
  proto_.mutable_spec()->mutable_pipeline()->set_microbatches(3);
  proto_.mutable_spec()->mutable_schedule()->set_name("zb-h2");  // m >= 2p.
  JobModel model;
  const absl::Status prepared = model.Prepare(proto_, no_versions_, context_).status();
  EXPECT_EQ(prepared.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(prepared.message(),
            "schedule zb-h2: pipeline.microbatches: zb-h2 needs microbatches >= 2 * stages "
            "(4): its warm-up alone takes 2p-1; got 3");
}

}  // namespace
}  // namespace zbpp::coordinator
