// JobAttempt (coordinator/core/job_attempt.h): numbering, grants,
// acknowledgements, where a report may come from, gathering a step's
// reports and validations, and the Assignment each worker is sent.

#include "coordinator/core/job_attempt.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
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

TEST(JobAttemptTest, AttemptsAreNumberedFromOneAndEndingKeepsTheNumber) {
  JobAttempt attempt(/*stages=*/2, /*replicas=*/2);
  EXPECT_EQ(attempt.number(), 0);
  EXPECT_FALSE(attempt.active());
  attempt.set_start_step(4);
  attempt.Start({"w1", "w2", "w3", "w4"});
  EXPECT_EQ(attempt.number(), 1);
  EXPECT_TRUE(attempt.active());
  EXPECT_EQ(attempt.granted(), 3);  // Nothing granted: the step before the start.
  EXPECT_EQ(attempt.last_reported(3), 3);
  EXPECT_EQ(attempt.scope("job-7"), "job-7/attempt-1");
  EXPECT_EQ(attempt.stage_of(3), 1);
  EXPECT_EQ(attempt.replica_of(3), 1);
  EXPECT_TRUE(attempt.Holds("w3"));
  EXPECT_FALSE(attempt.Holds("w9"));
  attempt.End();
  EXPECT_FALSE(attempt.active());
  EXPECT_FALSE(attempt.Holds("w3"));
  EXPECT_EQ(attempt.granted(), -1);
  EXPECT_EQ(attempt.scope("job-7"), "job-7/attempt-1");
  attempt.Start({"w5", "w6", "w7", "w8"});
  EXPECT_EQ(attempt.scope("job-7"), "job-7/attempt-2");
}

TEST(JobAttemptTest, GrantsRunAheadOfTheSlowestWorkerUpToTheLastStep) {
  JobAttempt attempt(2, 1);
  attempt.Start({"a", "b"});
  EXPECT_TRUE(attempt.NextGrant(/*lookahead=*/2, /*last_step=*/4));
  EXPECT_EQ(attempt.granted(), 1);
  EXPECT_FALSE(attempt.NextGrant(2, 4));  // Nobody moved.
  EXPECT_FALSE(attempt.AddReport(0, 0, 1, {}).has_value());
  EXPECT_FALSE(attempt.NextGrant(2, 4));  // "b" is still at -1.
  EXPECT_TRUE(attempt.AddReport(1, 0, 1, {}).has_value());
  EXPECT_TRUE(attempt.NextGrant(2, 4));
  EXPECT_EQ(attempt.granted(), 2);
  for (int64_t step : {1, 2, 3}) {
    attempt.AddReport(0, step, 1, {});
    attempt.AddReport(1, step, 1, {});
  }
  EXPECT_TRUE(attempt.NextGrant(2, 4));
  EXPECT_EQ(attempt.granted(), 4);  // Not 5: the job's last step is 4.
}

TEST(JobAttemptTest, ItRunsOnceEveryWorkerAcknowledged) {
  JobAttempt attempt(2, 1);
  attempt.Start({"a", "b"});
  EXPECT_FALSE(attempt.Acknowledge("a"));
  EXPECT_FALSE(attempt.Acknowledge("a"));
  EXPECT_TRUE(attempt.Acknowledge("b"));
  attempt.End();
  attempt.Start({"a", "b"});
  EXPECT_FALSE(attempt.Acknowledge("b"));  // A new attempt: acknowledged again.
}

TEST(JobAttemptTest, AReportFromTheWrongPlaceNamesTheField) {
  JobAttempt attempt(2, 2);
  attempt.Start({"w1", "w2", "w3", "w4"});
  attempt.NextGrant(2, 9);
  v1::ReportStepRequest report;
  report.set_worker_id("w4");
  report.set_stage(1);
  report.set_replica(1);
  report.set_step(1);
  EXPECT_TRUE(attempt.CheckReportPlace(report, 3).ok());
  const std::vector<std::pair<std::function<void(v1::ReportStepRequest&)>, std::string>> cases = {
      {[](auto& r) { r.set_stage(0); }, "stage: worker w4 runs stage 1, not 0"},
      {[](auto& r) { r.set_replica(2); },
       "replica: 2 is not in [0, 2) (pipeline.data_parallel = 2)"},
      {[](auto& r) { r.set_replica(0); }, "replica: worker w4 runs replica 1, not 0"},
      {[](auto& r) { r.set_step(2); }, "step: 2 was not granted (attempt runs steps 0..1)"},
  };
  for (const auto& [mutate, message] : cases) {
    v1::ReportStepRequest bad = report;
    mutate(bad);
    const absl::Status refused = attempt.CheckReportPlace(bad, 3);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_EQ(refused.message(), message);
  }
}

TEST(JobAttemptTest, AStepIsCompleteOnceEveryWorkerReportedIt) {
  JobAttempt attempt(/*stages=*/1, /*replicas=*/2);
  attempt.Start({"a", "b"});
  StageReport first, second;
  first.worker_id = "first";
  second.worker_id = "second";
  EXPECT_FALSE(attempt.AddReport(0, 0, 1, first).has_value());
  EXPECT_FALSE(attempt.AddReport(0, 0, 1, second).has_value());  // Replaces the first.
  // Steps pend apart: step 1 completes before step 0.
  EXPECT_FALSE(attempt.AddReport(0, 1, 1, {}).has_value());
  EXPECT_TRUE(attempt.AddReport(1, 1, 1, {}).has_value());
  std::optional<PendingStep> complete = attempt.AddReport(1, 0, 1, {});
  ASSERT_TRUE(complete.has_value());
  EXPECT_EQ(complete->step, 0);
  EXPECT_EQ(complete->version, 1);
  ASSERT_EQ(complete->reports.size(), 2u);
  EXPECT_EQ(complete->reports.at(0).worker_id, "second");
  EXPECT_EQ(attempt.last_reported(1), 1);
}

TEST(JobAttemptTest, ValidationsAreGatheredPerStepAndDroppedWithTheAttempt) {
  JobAttempt attempt(1, 2);
  attempt.Start({"a", "b"});
  v1::ValidationResult result;
  result.set_step(3);
  EXPECT_FALSE(attempt.AddValidation(0, result).has_value());
  std::optional<std::map<int, v1::ValidationResult>> all = attempt.AddValidation(1, result);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->size(), 2u);
  EXPECT_FALSE(attempt.AddValidation(0, result).has_value());  // Gathered afresh.
  result.set_step(4);
  attempt.AddValidation(0, result);
  attempt.End();
  attempt.Start({"a", "b"});
  EXPECT_FALSE(attempt.AddValidation(1, result).has_value());
}

class JobAttemptMessageTest : public testing::JobHarness {};

TEST_F(JobAttemptMessageTest, AssignmentNamesPeersVirtualStagesAndTheCheckpoint) {
  const sched::Problem problem = sched::Problem::Uniform(2, 2, 4, {}, 0);
  const sched::Schedule schedule = *sched::Generate("zb-v", problem);
  ScheduleVersions versions;
  v1::ScheduleVersion version =
      BuildVersion("job-1", schedule, problem, *sched::Simulate(problem, schedule),
                   v1::SCHEDULE_CHANGE_REASON_INITIAL, "", nullptr);
  versions.Stamp(version, /*granted=*/-1, /*start_step=*/0, absl::UnixEpoch());
  versions.Add(version, schedule);
  v1::Job job;
  job.set_id("job-1");
  *job.mutable_spec() = testing::TestSpec(2);
  job.mutable_spec()->mutable_checkpoint()->set_directory("/ckpt");
  job.set_transport(v1::TRANSPORT_NCCL);
  job.set_last_checkpoint_step(3);
  std::vector<testing::FakeWorker> workers = AddWorkers(2);

  JobAttempt attempt(2, 1);
  attempt.set_start_step(4);
  attempt.Start({workers[0].id, workers[1].id});
  const SessionMessage message = attempt.AssignmentMessage(1, job, versions, *registry_);
  const v1::Assignment& a = message->assignment();
  EXPECT_EQ(a.job_id(), "job-1");
  EXPECT_EQ(a.attempt(), 1);
  EXPECT_EQ(a.stage(), 1);
  EXPECT_EQ(a.replica(), 0);
  EXPECT_THAT(a.virtual_stages(), ElementsAre(1, 2));  // The V's middle.
  EXPECT_EQ(a.schedule().version(), 1);
  ASSERT_EQ(a.peers_size(), 2);
  EXPECT_EQ(a.peers(0).worker_id(), workers[0].id);
  EXPECT_EQ(a.peers(0).description().address(), workers[0].address);
  EXPECT_EQ(a.peers(1).stage(), 1);
  EXPECT_EQ(a.rendezvous_scope(), "job-1/attempt-1");
  EXPECT_EQ(a.transport(), v1::TRANSPORT_NCCL);
  EXPECT_EQ(a.start_step(), 4);
  EXPECT_EQ(a.restore().step(), 3);
  EXPECT_EQ(a.restore().directory(), "/ckpt");
  EXPECT_EQ(attempt.GrantMessage("job-1")->grant().through_step(), 3);
}

}  // namespace
}  // namespace zbpp::coordinator
