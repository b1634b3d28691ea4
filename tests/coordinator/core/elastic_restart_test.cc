// A coordinator restarted on its store while a job runs (docs/elastic.md,
// "Coordinator restart"): the workers, registered again under new ids, are
// put back in the places of the attempt in force by what they hold
// (PlaceRestoredHolders), and the job resumes from their memory; with
// nothing held, it restarts from its checkpoint once the wait is over.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core/elastic_recovery.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/elastic_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::ElasticSpec;
using testing::ElasticTest;
using testing::FakeWorker;
using testing::TrueCosts;
using testing::TruthFor;

// ------------------------------------------------ PlaceRestoredHolders

TEST(PlaceRestoredHolders, TheNewestAttemptsHoldersFillItsPlacesByStage) {
  // 2 stages x 2 replicas: attempt 4's holders, in any order, and a spare
  // of attempt 3 left out.
  const RestoredPlacement placed = PlaceRestoredHolders(
      2, 2, {{"w1", 4, 1, 9}, {"w2", 3, 0, 5}, {"w3", 4, 0, 9}, {"w4", 4, 1, 9},
             {"w5", 4, 0, 9}});
  EXPECT_EQ(placed.attempt, 4);
  EXPECT_EQ(placed.workers, (std::vector<std::string>{"w3", "w1", "w5", "w4"}));
  EXPECT_EQ(placed.held, (std::vector<std::optional<int64_t>>{9, 9, 9, 9}));
  EXPECT_TRUE(placed.complete());
}

TEST(PlaceRestoredHolders, OnlyTheStepMostReplicasHoldWhole) {
  const std::optional<int64_t> none;
  // Stage 0 held at 9 twice, stage 1 at 9 and 8: one replica at 9 (the
  // holder of 8 left out); a stage outside the job ignored.
  RestoredPlacement placed = PlaceRestoredHolders(
      2, 2, {{"a", 4, 0, 9}, {"b", 4, 0, 9}, {"c", 4, 1, 8}, {"d", 4, 1, 9}, {"e", 5, 2, 9}});
  EXPECT_EQ(placed.attempt, 4);
  EXPECT_EQ(placed.workers, (std::vector<std::string>{"a", "d", "b", ""}));
  EXPECT_EQ(placed.held, (std::vector<std::optional<int64_t>>{9, 9, 9, none}));
  EXPECT_FALSE(placed.complete());
  // Each step held whole once: the higher one.
  placed = PlaceRestoredHolders(2, 1, {{"a", 1, 0, 3}, {"b", 1, 1, 3}, {"c", 1, 0, 4},
                                       {"d", 1, 1, 4}});
  EXPECT_EQ(placed.workers, (std::vector<std::string>{"c", "d"}));
  placed = PlaceRestoredHolders(2, 1, {});
  EXPECT_EQ(placed.attempt, 0);
  EXPECT_EQ(placed.workers, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(placed.held, (std::vector<std::optional<int64_t>>{none, none}));
}

// The coordinator restarts while the job is DEGRADED (docs/elastic.md,
// "Coordinator restart"): the workers register again under new ids and say
// what they hold; the two of the degraded attempt are put back where they
// ran, by the stage they hold, and the job resumes degraded from their
// memory with no restart. The spare of the attempt before is no longer
// kept: told to drop its state, it is a free worker.
TEST_F(ElasticTest, ARestartedCoordinatorResumesADegradedJobFromItsWorkersMemory) {
  const std::string path = NewDatabasePath();
  Start(path);
  const v1::JobSpec spec = ElasticSpec(2, 4);
  std::string job_id;
  std::vector<FakeWorker> workers;
  const Degraded at = DegradeAfterStep2(spec, workers, &job_id);
  ASSERT_FALSE(HasFailure());
  std::vector<FakeWorker> replica0 = {workers[at.kept0], workers[at.kept1]};
  for (int64_t step = 3; step <= 4; ++step) {
    ASSERT_TRUE(ReportStepOnAll(replica0, TruthFor(spec, 1, 8), step));
  }
  const int64_t version = coordinator_->GetJob(job_id, {})->schedule_version();

  Start(path);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job->state_message(), "coordinator restarted");
  // In another order than before: the ids say nothing of the places.
  FakeWorker stage1 = AddWorker(31);
  FakeWorker spare = AddWorker(32);
  FakeWorker stage0 = AddWorker(33);
  SayHeld(stage1, job_id, 2, 1, 4);
  SayHeld(spare, job_id, 1, 1, 2);
  EXPECT_EQ(StateOf(spare.id), v1::WORKER_STATE_SPARE) << "kept until the decision";
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING) << "stage 0 has not said yet";
  EXPECT_EQ(job->assignments_size(), 0);
  SayHeld(stage0, job_id, 2, 0, 4);

  for (FakeWorker* w : {&stage0, &stage1}) {
    w->Drain();
    ASSERT_TRUE(w->assignment.has_value()) << w->id;
    const v1::Assignment& a = *w->assignment;
    EXPECT_EQ(a.attempt(), 3) << "numbered after the previous life's attempt 2";
    EXPECT_EQ(a.stage(), w == &stage0 ? 0 : 1);
    EXPECT_EQ(a.replica(), 0);
    EXPECT_TRUE(a.resume_from_memory());
    EXPECT_EQ(a.replicas(), 1);
    EXPECT_EQ(a.microbatches(), 8);
    EXPECT_EQ(a.start_step(), 5);
    EXPECT_FALSE(a.has_restore());
    EXPECT_EQ(a.schedule().version(), version) << "the degraded version goes on";
  }
  Acknowledge({&stage0, &stage1});
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_DEGRADED);
  EXPECT_EQ(job->replicas_active(), 1);
  EXPECT_EQ(job->restarts_total(), 0);
  EXPECT_EQ(job->recoveries_total(), 2) << "the lost worker's, the restart's";
  EXPECT_THAT(job->state_message(),
              HasSubstr("coordinator restarted; degraded to 1 replicas at step 5"));
  // The spare's state is dropped at its next word: it is free.
  SayHeld(spare, job_id, 1, 1, 2);
  const std::vector<v1::AbortCommand> aborts = DrainAborts(spare);
  ASSERT_EQ(aborts.size(), 1u);
  EXPECT_FALSE(aborts[0].keep_state());
  std::vector<FakeWorker> resumed = {stage0, stage1};
  ASSERT_TRUE(ReportStepOnAll(resumed, TruthFor(spec, 1, 8), 5));
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 6);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  std::remove(path.c_str());
}

// The coordinator stops between a step and its reports: the workers hold
// the step's update, and their copies of the reports (HeldState.step_report)
// record it when the job resumes from their memory, so that no trained step
// goes unrecorded. Without them the record would end a step short of what
// the workers hold.
TEST_F(ElasticTest, ARestartedCoordinatorRecordsTheHeldStepFromTheReportsItNeverHad) {
  const std::string path = NewDatabasePath();
  Start(path);
  const v1::JobSpec spec = ElasticSpec(1, 4);
  std::string job_id;
  std::vector<FakeWorker> workers = RunThroughStep(spec, 2, &job_id);
  ASSERT_FALSE(HasFailure());
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  const int64_t attempt = workers[0].assignment->attempt();
  std::vector<v1::ReportStepRequest> lost(2);
  for (FakeWorker& w : workers) {
    w.Drain();
    ASSERT_GE(w.granted, 3);
    v1::ReportStepRequest r = w.Report(3, truth);
    v1::ValidationResult* v = r.add_validations();
    v->set_step(3);
    v->set_mode(w.VersionFor(3).validation());
    v->set_decision(v1::VALIDATION_DECISION_CLIPPED);
    v->set_clip_coefficient(0.5);
    lost[w.assignment->stage()] = r;
  }
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->clipped_steps_total(), 0);

  Start(path);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 3);
  FakeWorker stage1 = AddWorker(41);
  FakeWorker stage0 = AddWorker(42);
  SayHeld(stage1, job_id, attempt, 1, 3, &lost[1]);
  SayHeld(stage0, job_id, attempt, 0, 3, &lost[0]);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->steps_completed(), 4) << "step 3 is recorded from the held reports";
  EXPECT_EQ(job->last_step().step(), 3);
  EXPECT_GT(job->last_step().step_seconds(), 0);
  EXPECT_GT(job->last_step().predicted_step_seconds(), 0) << "simulated under measured costs";
  EXPECT_EQ(job->clipped_steps_total(), 1) << "and its validation counts";
  for (FakeWorker* w : {&stage0, &stage1}) {
    w->Drain();
    ASSERT_TRUE(w->assignment.has_value()) << w->id;
    EXPECT_TRUE(w->assignment->resume_from_memory());
    EXPECT_EQ(w->assignment->start_step(), 4);
  }
  Acknowledge({&stage0, &stage1});
  std::vector<FakeWorker> resumed = {stage0, stage1};
  ASSERT_TRUE(ReportStepOnAll(resumed, truth, 4));
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 5);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  std::remove(path.c_str());
}

// The workers that register with the restarted coordinator hold nothing:
// once the wait (the heartbeat timeout) is over the job that was DEGRADED
// restarts from its checkpoint (step 0 here) at full width, under a
// version of the spec's m again that supersedes the degraded one from the
// start step.
TEST_F(ElasticTest, ARestartedCoordinatorWhoseWorkersHoldNothingRestartsAtFullWidth) {
  const std::string path = NewDatabasePath();
  Start(path);
  const v1::JobSpec spec = ElasticSpec(2, 4);
  std::string job_id;
  {
    std::vector<FakeWorker> workers;
    DegradeAfterStep2(spec, workers, &job_id);
    ASSERT_FALSE(HasFailure());
  }
  const auto before = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_EQ(before->schedule().schedule().microbatches(), 8);

  Start(path);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job->replicas_active(), 0);
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(AddWorker(20 + i));
  HeartbeatAll(workers);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->assignments_size(), 0) << "within the wait";
  WaitOutTheRestoredAttempts(workers);
  job = coordinator_->GetJob(job_id, {});
  EXPECT_THAT(job->state_message(), HasSubstr("coordinator restarted; restarting from step 0"));
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->replicas_active(), 2);
  EXPECT_EQ(job->restarts_total(), 1);
  EXPECT_EQ(job->schedule().reason(), v1::SCHEDULE_CHANGE_REASON_REPLICAS);
  EXPECT_EQ(job->schedule().schedule().microbatches(), 4);
  EXPECT_EQ(job->schedule().effective_step(), 0);
  for (FakeWorker& w : workers) {
    w.Drain();
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_FALSE(w.assignment->resume_from_memory());
    // From step 0 on, steps 3 and after included, the spec's m again.
    EXPECT_EQ(w.VersionFor(0).schedule().microbatches(), 4);
    EXPECT_EQ(w.VersionFor(5).schedule().microbatches(), 4);
  }
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  for (int64_t step = 0; step <= 3; ++step) ASSERT_TRUE(ReportStepOnAll(workers, truth, step));
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 4);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace zbpp::coordinator
