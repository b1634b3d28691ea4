// Recovering from memory (docs/elastic.md) in the coordinator core: the
// choice itself (ChooseRecovery), then fake workers (coordinator_fixture.h)
// that say what they hold after a fault (Heartbeat.held) — a resume at full
// width, a degrade onto the complete replicas with the same global batch,
// a restart when the held state cannot be used — spares, and the end of
// the job telling every holder to drop its state.

#include "coordinator/core/elastic_recovery.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/elastic_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::ElasticSpec;
using testing::ElasticTest;
using testing::FakeWorker;
using testing::TestSpec;
using testing::TrueCosts;
using testing::TruthFor;
using testing::Uncalibrated;

// ------------------------------------------------------ ChooseRecovery

TEST(ChooseRecovery, EveryWorkerAtOneStepResumesAtFullWidth) {
  const RecoveryChoice choice = ChooseRecovery(2, 2, 4, 10, {5, 5, 5, 5});
  EXPECT_TRUE(choice.resume);
  EXPECT_EQ(choice.held_step, 5);
  EXPECT_EQ(choice.kept_replicas, (std::vector<int>{0, 1}));
  EXPECT_EQ(choice.microbatches, 4);
  EXPECT_EQ(choice.restart_reason, "");
}

TEST(ChooseRecovery, ABrokenReplicaLeavesTheCompleteOnesWithTheWholeBatch) {
  // Replica 0 lost its stage 1; replicas 1 and 3 are complete... of 4.
  const RecoveryChoice choice = ChooseRecovery(
      2, 4, 3, 10, {5, std::nullopt, 5, 5, std::nullopt, 5, 5, 5});
  EXPECT_TRUE(choice.resume);
  EXPECT_EQ(choice.kept_replicas, (std::vector<int>{1, 3}));
  EXPECT_EQ(choice.microbatches, 6) << "4 x 3 microbatches over 2 replicas";
}

TEST(ChooseRecovery, RestartsWhenTheHeldStateCannotBeUsed) {
  const std::optional<int64_t> none;
  EXPECT_EQ(ChooseRecovery(2, 2, 4, 10, {5, none, none, 5}).restart_reason,
            "no replica holds all 2 stages");
  EXPECT_EQ(ChooseRecovery(2, 2, 4, 10, {5, 4, 5, none}).restart_reason,
            "the held steps disagree (4 and 5)");
  EXPECT_EQ(ChooseRecovery(2, 2, 4, 10, {5, 5, 6, 6}).restart_reason,
            "the held steps disagree (5 and 6)");
  EXPECT_EQ(ChooseRecovery(1, 3, 3, 10, {5, 5, none}).restart_reason,
            "2 replicas cannot share the 9 microbatches of a step evenly");
  EXPECT_EQ(ChooseRecovery(1, 2, 2, 5, {5, 5}).restart_reason,
            "the held step 5 is past the job's last step 4");
  const RecoveryChoice restart = ChooseRecovery(2, 2, 4, 10, {5, none, none, 5});
  EXPECT_FALSE(restart.resume);
  EXPECT_TRUE(restart.kept_replicas.empty());
  EXPECT_EQ(restart.microbatches, 0);
}

// ---------------------------------------------------- the coordinator


// The brief's case: a 2-stage x 2-replica job loses the stage-0 worker of
// replica 1 after step 2; the three survivors hold step 2. Replica 0 goes
// on alone from step 3 with the whole batch of 2 x 4 = 8 microbatches
// under a schedule of 8; replica 1's stage 1 is a spare, given to no other
// job; cancelling the job tells everyone to drop the state.
TEST_F(ElasticTest, ALostWorkerDegradesTheJobOntoTheCompleteReplica) {
  const v1::JobSpec spec = ElasticSpec(2, 4);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  for (int64_t step = 0; step <= 2; ++step) ASSERT_TRUE(ReportStepOnAll(workers, truth, step));
  const int64_t version_before = coordinator_->GetJob(job_id, {})->schedule_version();
  std::map<std::string, int> stage_of;
  for (const FakeWorker& w : workers) stage_of[w.id] = w.assignment->stage();
  const size_t lost = Find(workers, 0, 1);
  const size_t spare = Find(workers, 1, 1);
  const size_t kept0 = Find(workers, 0, 0);
  const size_t kept1 = Find(workers, 1, 0);

  LoseWhileOthersRun(workers, lost);
  auto job = coordinator_->GetJob(job_id, {});
  ASSERT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  // The survivors are told to keep their state.
  for (size_t i : {spare, kept0, kept1}) {
    const std::vector<v1::AbortCommand> aborts = DrainAborts(workers[i]);
    ASSERT_EQ(aborts.size(), 1u) << i;
    EXPECT_TRUE(aborts[0].keep_state()) << i;
    EXPECT_FALSE(workers[i].assignment.has_value());
  }
  // Two of three said what they hold: the job waits for the third.
  SayHeld(workers[spare], job_id, 1, 1, 2);
  SayHeld(workers[kept0], job_id, 1, 0, 2);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->assignments_size(), 0);
  SayHeld(workers[kept1], job_id, 1, 1, 2);

  // Attempt 2: replica 0's workers, from memory, at step 3.
  for (size_t i : {kept0, kept1}) {
    workers[i].Drain();
    ASSERT_TRUE(workers[i].assignment.has_value()) << i;
    const v1::Assignment& a = *workers[i].assignment;
    EXPECT_EQ(a.attempt(), 2);
    EXPECT_EQ(a.stage(), stage_of[workers[i].id]) << "each keeps its stage";
    EXPECT_EQ(a.replica(), 0);
    EXPECT_TRUE(a.resume_from_memory());
    EXPECT_EQ(a.replicas(), 1);
    EXPECT_EQ(a.microbatch_offset(), 0);
    EXPECT_EQ(a.microbatches(), 8);
    EXPECT_EQ(a.start_step(), 3);
    EXPECT_FALSE(a.has_restore());
    EXPECT_FALSE(a.profile()) << "a resumed attempt is not calibrated";
    EXPECT_EQ(a.peers_size(), 2);
    // The version it starts under: 8 microbatches, for the replicas.
    EXPECT_EQ(a.schedule().version(), version_before + 1);
    EXPECT_EQ(a.schedule().schedule().microbatches(), 8);
    EXPECT_EQ(a.schedule().reason(), v1::SCHEDULE_CHANGE_REASON_REPLICAS);
    EXPECT_EQ(a.schedule().effective_step(), 3);
    EXPECT_THAT(a.schedule().reason_detail(), HasSubstr("2 -> 1 replicas, 4 -> 8"));
  }
  EXPECT_FALSE(workers[spare].state->WaitForAssignment(absl::ZeroDuration()).has_value());
  EXPECT_EQ(StateOf(workers[spare].id), v1::WORKER_STATE_SPARE);

  Acknowledge({&workers[kept0], &workers[kept1]});
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_DEGRADED);
  EXPECT_EQ(job->replicas_active(), 1);
  EXPECT_EQ(job->recoveries_total(), 1);
  EXPECT_EQ(job->restarts_total(), 0);
  EXPECT_THAT(job->state_message(), HasSubstr(workers[lost].id));
  EXPECT_THAT(job->state_message(),
              HasSubstr("degraded to 1 replicas at step 3 (8 microbatches each)"));
  EXPECT_EQ(job->assignments_size(), 2);
  // Its last changes (Job.transitions): the fault after 3 steps, the degrade.
  const int changes = job->transitions_size();
  ASSERT_GE(changes, 2);
  const v1::JobTransition& fault = job->transitions(changes - 2);
  EXPECT_EQ(fault.from(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(fault.to(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(fault.steps_completed(), 3);
  EXPECT_THAT(fault.message(), HasSubstr(workers[lost].id));
  const v1::JobTransition& degrade = job->transitions(changes - 1);
  EXPECT_EQ(degrade.from(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(degrade.to(), v1::JOB_STATE_DEGRADED);
  EXPECT_EQ(degrade.steps_completed(), 3);
  EXPECT_EQ(degrade.message(), job->state_message());

  // Steps go on on one replica; each counts as degraded.
  std::vector<FakeWorker> replica0 = {workers[kept0], workers[kept1]};
  const sched::Problem degraded_truth = TruthFor(spec, 1, 8);
  ASSERT_TRUE(ReportStepOnAll(replica0, degraded_truth, 3));
  ASSERT_TRUE(ReportStepOnAll(replica0, degraded_truth, 4));
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->steps_completed(), 5);
  EXPECT_EQ(job->degraded_steps(), 2);

  // The spare is kept for its job: another job waits for a worker of its own.
  const std::string other = coordinator_->SubmitJob(Uncalibrated(TestSpec(1, 2, "1f1b")))->id();
  EXPECT_EQ(coordinator_->GetJob(other, {})->state(), v1::JOB_STATE_PENDING);
  FakeWorker newcomer = AddWorker(10);
  EXPECT_EQ(coordinator_->GetJob(other, {})->state(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(coordinator_->GetJob(other, {})->assignments(0).worker_id(), newcomer.id);

  // The job ends: the attempt's workers and the spare drop the state.
  ASSERT_TRUE(coordinator_->CancelJob(job_id, "enough").ok());
  for (size_t i : {spare, kept0, kept1}) {
    const std::vector<v1::AbortCommand> aborts = DrainAborts(workers[i]);
    ASSERT_EQ(aborts.size(), 1u) << i;
    EXPECT_FALSE(aborts[0].keep_state()) << i;
  }
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->replicas_active(), 0);
  EXPECT_EQ(StateOf(workers[spare].id), v1::WORKER_STATE_IDLE);
}

// A degraded job heals once a new worker can fill the broken replica beside
// its spare: nothing is granted past the steps granted, the degraded
// attempt ends keeping its state after them, and the next attempt runs
// both replicas again from
// the step replica 0 holds, the spare and the newcomer taking their state
// from replica 0 (a copy every worker joins), under a version of m again
// (post-update validation again).
TEST_F(ElasticTest, ASpareAndANewWorkerHealADegradedJob) {
  v1::JobSpec spec = ElasticSpec(2, 4, 20);
  spec.set_validation(v1::VALIDATION_MODE_POST);
  std::string job_id;
  std::vector<FakeWorker> workers;
  const auto [lost, spare, kept0, kept1] = DegradeAfterStep2(spec, workers, &job_id);
  ASSERT_FALSE(HasFailure());
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  std::vector<FakeWorker*> replica0 = {&workers[kept0], &workers[kept1]};
  const sched::Problem degraded_truth = TruthFor(spec, 1, 8);
  auto report = [&](std::vector<FakeWorker*> on, const sched::Problem& costs, int64_t step) {
    std::vector<FakeWorker> copies;
    for (FakeWorker* w : on) copies.push_back(*w);
    const bool reported = ReportStepOnAll(copies, costs, step);
    for (size_t i = 0; i < on.size(); ++i) *on[i] = copies[i];
    return reported;
  };
  ASSERT_TRUE(report(replica0, degraded_truth, 3));
  workers[kept0].Drain();
  const int64_t granted = workers[kept0].granted;
  ASSERT_GE(granted, 4);

  // A newcomer: the job heals after the steps granted, with no version of
  // its own.
  auto before = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  FakeWorker newcomer = AddWorker(9);
  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  EXPECT_EQ(job->state(), v1::JOB_STATE_DEGRADED);
  EXPECT_EQ(job->schedule_version(), before->schedule_version());
  const int64_t last = granted;
  EXPECT_THAT(job->state_message(),
              HasSubstr(absl::StrCat("healing to 2 replicas after step ", last)));
  for (int64_t step = 4; step <= last; ++step) {
    ASSERT_TRUE(report(replica0, degraded_truth, step)) << step;
  }
  for (FakeWorker* w : replica0) {
    const std::vector<v1::AbortCommand> aborts = DrainAborts(*w);
    ASSERT_EQ(aborts.size(), 1u) << w->id;
    EXPECT_TRUE(aborts[0].keep_state()) << w->id;
    EXPECT_EQ(w->granted, last) << "nothing granted past the heal's last step";
  }
  SayHeld(workers[kept0], job_id, 2, 0, last);
  SayHeld(workers[kept1], job_id, 2, 1, last);

  // Attempt 3: replica 0 from memory, replica 1 (the newcomer on stage 0,
  // the spare on its stage 1) from replica 0, each taking 4 of the 8.
  std::vector<FakeWorker*> all = {&workers[kept0], &workers[kept1], &newcomer, &workers[spare]};
  std::map<std::string, std::pair<int, int>> expected = {
      {workers[kept0].id, {0, 0}}, {workers[kept1].id, {1, 0}},
      {newcomer.id, {0, 1}}, {workers[spare].id, {1, 1}}};
  for (FakeWorker* w : all) {
    w->Drain();
    ASSERT_TRUE(w->assignment.has_value()) << w->id;
    const v1::Assignment& a = *w->assignment;
    EXPECT_EQ(a.attempt(), 3);
    EXPECT_EQ(std::make_pair(a.stage(), a.replica()), expected[w->id]) << w->id;
    EXPECT_EQ(a.start_step(), last + 1);
    EXPECT_EQ(a.replicas(), 2);
    EXPECT_EQ(a.microbatches(), 4);
    EXPECT_EQ(a.microbatch_offset(), 4 * a.replica());
    EXPECT_EQ(a.resume_from_memory(), a.replica() == 0) << w->id;
    EXPECT_TRUE(a.receive_state()) << w->id << ": every worker joins the copy";
    EXPECT_EQ(a.state_source_replica(), 0);
    EXPECT_EQ(a.schedule().schedule().microbatches(), 4);
    EXPECT_EQ(a.schedule().reason(), v1::SCHEDULE_CHANGE_REASON_REPLICAS);
    EXPECT_EQ(a.schedule().effective_step(), last + 1);
    EXPECT_EQ(a.schedule().validation(), v1::VALIDATION_MODE_POST);
    EXPECT_THAT(a.schedule().reason_detail(), HasSubstr("1 -> 2 replicas, 8 -> 4"));
  }
  Acknowledge(all);
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->replicas_active(), 2);
  EXPECT_EQ(job->degraded_steps(), last - 2);
  EXPECT_EQ(job->recoveries_total(), 1) << "a heal is no recovery";
  EXPECT_EQ(job->restarts_total(), 0);
  EXPECT_EQ(StateOf(workers[spare].id), v1::WORKER_STATE_RUNNING);
  ASSERT_TRUE(report(all, truth, last + 1));
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), last + 2);
}

// No worker died: a worker failed on a timeout, every one holds step 2,
// and the same workers go on from step 3 at full width under the same
// version.
TEST_F(ElasticTest, EveryStageHeldResumesAtFullWidthWithoutRestart) {
  const v1::JobSpec spec = ElasticSpec(2, 4);
  std::string job_id;
  std::vector<FakeWorker> workers = RunThroughStep(spec, 2, &job_id);
  ASSERT_FALSE(HasFailure());
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  const int64_t version_before = coordinator_->GetJob(job_id, {})->schedule_version();
  std::map<std::string, std::pair<int, int>> place;
  for (const FakeWorker& w : workers) {
    place[w.id] = {w.assignment->stage(), w.assignment->replica()};
  }
  v1::Heartbeat failed;
  failed.set_phase(v1::WORKER_PHASE_FAILED);
  failed.set_job_id(job_id);
  failed.set_attempt(1);
  failed.set_error("gloo: connect to rank 2 timed out after 30s");
  ASSERT_TRUE(coordinator_->Heartbeat(workers[1].id, failed).ok());
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RECOVERING);
  for (FakeWorker& w : workers) {
    DrainAborts(w);
    SayHeld(w, job_id, 1, place[w.id].first, 2);
  }
  for (FakeWorker& w : workers) {
    w.Drain();
    ASSERT_TRUE(w.assignment.has_value()) << w.id;
    EXPECT_EQ(w.assignment->attempt(), 2);
    EXPECT_EQ(std::make_pair(w.assignment->stage(), w.assignment->replica()), place[w.id]);
    EXPECT_TRUE(w.assignment->resume_from_memory());
    EXPECT_EQ(w.assignment->replicas(), 2);
    EXPECT_EQ(w.assignment->microbatches(), 4);
    EXPECT_EQ(w.assignment->microbatch_offset(), 4 * w.assignment->replica());
    EXPECT_EQ(w.assignment->start_step(), 3);
    EXPECT_EQ(w.assignment->schedule().version(), version_before);
  }
  std::vector<FakeWorker*> all;
  for (FakeWorker& w : workers) all.push_back(&w);
  Acknowledge(all);
  const auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->replicas_active(), 2);
  EXPECT_EQ(job->schedule_version(), version_before);
  EXPECT_EQ(job->recoveries_total(), 1);
  EXPECT_EQ(job->restarts_total(), 0);
  EXPECT_EQ(job->state_message(), "resumed from memory at step 3") << "RUNNING says how";
  ASSERT_TRUE(ReportStepOnAll(workers, truth, 3));
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 4);
}

// The survivors of the complete replica disagree on the step their state
// holds: nothing can resume; the job restarts from step 0 on a
// replacement, counting a restart, and the holders are told to drop.
TEST_F(ElasticTest, DisagreeingHeldStepsRestartFromTheCheckpoint) {
  const v1::JobSpec spec = ElasticSpec(2, 4);
  std::string job_id;
  std::vector<FakeWorker> workers = RunThroughStep(spec, 2, &job_id);
  ASSERT_FALSE(HasFailure());
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  const size_t lost = Find(workers, 0, 1);
  const size_t spare = Find(workers, 1, 1);
  const size_t kept0 = Find(workers, 0, 0);
  const size_t kept1 = Find(workers, 1, 0);
  LoseWhileOthersRun(workers, lost);
  for (size_t i : {spare, kept0, kept1}) DrainAborts(workers[i]);
  SayHeld(workers[spare], job_id, 1, 1, 2);
  SayHeld(workers[kept0], job_id, 1, 0, 2);
  SayHeld(workers[kept1], job_id, 1, 1, 1);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(),
              HasSubstr("restarting from step 0 (the held steps disagree (1 and 2))"));
  for (size_t i : {spare, kept0, kept1}) {
    const std::vector<v1::AbortCommand> aborts = DrainAborts(workers[i]);
    ASSERT_EQ(aborts.size(), 1u) << i;
    EXPECT_FALSE(aborts[0].keep_state()) << i;
    EXPECT_NE(StateOf(workers[i].id), v1::WORKER_STATE_SPARE) << i;
  }
  workers[lost] = AddWorker(9);
  HeartbeatAll(workers);
  for (FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value()) << w.id;
    EXPECT_EQ(w.assignment->attempt(), 2);
    EXPECT_FALSE(w.assignment->resume_from_memory());
    EXPECT_EQ(w.assignment->start_step(), 0);
  }
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->restarts_total(), 1);
  EXPECT_EQ(job->recoveries_total(), 1);
}

// d = 3 replicas of m = 3: two complete replicas cannot share 9
// microbatches evenly, so the job restarts.
TEST_F(ElasticTest, ABatchTheSurvivorsCannotShareEvenlyRestarts) {
  const v1::JobSpec spec = ElasticSpec(3, 3);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  ASSERT_TRUE(ReportStepOnAll(workers, truth, 0));
  const size_t lost = Find(workers, 0, 2);
  std::map<std::string, int> stage_of;
  for (const FakeWorker& w : workers) stage_of[w.id] = w.assignment->stage();
  LoseWhileOthersRun(workers, lost);
  for (size_t i = 0; i < workers.size(); ++i) {
    if (i == lost) continue;
    DrainAborts(workers[i]);
    SayHeld(workers[i], job_id, 1, stage_of[workers[i].id], 0);
  }
  const auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(),
              HasSubstr("2 replicas cannot share the 9 microbatches of a step evenly"));
  for (size_t i = 0; i < workers.size(); ++i) {
    if (i != lost) {
      EXPECT_FALSE(workers[i].assignment.has_value()) << i;
    }
  }
}

// The survivors stay silent about their state past the heartbeat timeout
// from the attempt's end: the job restarts without them; what they say
// afterwards changes nothing, and they are no spares.
TEST_F(ElasticTest, HeldStateReportedAfterTheWaitRestarts) {
  const v1::JobSpec spec = ElasticSpec(2, 4);
  std::string job_id;
  std::vector<FakeWorker> workers = RunThroughStep(spec, 2, &job_id);
  ASSERT_FALSE(HasFailure());
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  const size_t lost = Find(workers, 0, 1);
  std::map<std::string, int> stage_of;
  for (const FakeWorker& w : workers) stage_of[w.id] = w.assignment->stage();
  LoseWhileOthersRun(workers, lost);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RECOVERING);
  ASSERT_THAT(coordinator_->GetJob(job_id, {})->state_message(),
              ::testing::Not(HasSubstr("restarting")));
  // Still running attempt 1 as far as they say, for 5 s more.
  std::vector<FakeWorker> survivors;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (i != lost) survivors.push_back(workers[i]);
  }
  LoseWhileOthersRun(survivors, survivors.size());
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_THAT(job->state_message(), HasSubstr("restarting from step 0 (no replica holds all"));
  for (FakeWorker& w : survivors) {
    DrainAborts(w);
    SayHeld(w, job_id, 1, stage_of[w.id], 2);
    EXPECT_NE(StateOf(w.id), v1::WORKER_STATE_SPARE);
  }
  survivors.push_back(AddWorker(9));
  HeartbeatAll(survivors);
  for (FakeWorker& w : survivors) {
    ASSERT_TRUE(w.assignment.has_value()) << w.id;
    EXPECT_FALSE(w.assignment->resume_from_memory());
    EXPECT_EQ(w.assignment->start_step(), 0);
  }
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->restarts_total(), 1);
}

// One replica that lost a worker can never resume: the job restarts at
// once, without waiting for the survivor to say what it holds.
TEST_F(ElasticTest, NoReplicaLeftToResumeRestartsWithoutWaiting) {
  const v1::JobSpec spec = ElasticSpec(1, 4);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  ASSERT_TRUE(ReportStepOnAll(workers, TrueCosts(spec, 0, 1.0), 0));
  LoseWhileOthersRun(workers, 1);
  const auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(),
              HasSubstr("restarting from step 0 (no replica holds all 2 stages)"));
}

// A worker still holding the state of a job that ended is told to drop it.
TEST_F(ElasticTest, StateOfAnEndedJobIsDropped) {
  const v1::JobSpec spec = ElasticSpec(1, 4, 1);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  ASSERT_TRUE(ReportStepOnAll(workers, TrueCosts(spec, 0, 1.0), 0));
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_SUCCEEDED);
  for (FakeWorker& w : workers) {
    const std::vector<v1::AbortCommand> aborts = DrainAborts(w);
    ASSERT_EQ(aborts.size(), 1u);
    EXPECT_FALSE(aborts[0].keep_state()) << "the job's end";
  }
  SayHeld(workers[0], job_id, 1, 0, 0);
  const std::vector<v1::AbortCommand> aborts = DrainAborts(workers[0]);
  ASSERT_EQ(aborts.size(), 1u);
  EXPECT_FALSE(aborts[0].keep_state());
  EXPECT_EQ(StateOf(workers[0].id), v1::WORKER_STATE_IDLE);
}

/// The replicas and spares the metrics are told (CoordinatorObserver).
class ReplicasObserver : public CoordinatorObserver {
 public:
  void OnReplicas(const std::string&, int active, int spares) override {
    told.emplace_back(active, spares);
  }
  std::vector<std::pair<int, int>> told;
};

// The metrics follow the replicas and the spares; a spare that is lost is
// one no more.
TEST_F(ElasticTest, TheMetricsCountTheActiveReplicasAndTheSparesTillOneIsLost) {
  ReplicasObserver observer;
  observer_ = &observer;
  Start(":memory:");
  std::string job_id;
  std::vector<FakeWorker> workers;
  const Degraded at = DegradeAfterStep2(ElasticSpec(2, 4), workers, &job_id);
  ASSERT_FALSE(HasFailure());
  // RUNNING on 2, RECOVERING, the degrade's spare, DEGRADED on 1.
  EXPECT_THAT(observer.told, ::testing::ElementsAre(std::make_pair(2, 0), std::make_pair(0, 0),
                                                    std::make_pair(0, 1), std::make_pair(1, 1)));
  std::vector<FakeWorker> others;
  for (size_t i : {at.kept0, at.kept1, at.spare}) others.push_back(workers[i]);
  LoseWhileOthersRun(others, 2);
  EXPECT_EQ(StateOf(workers[at.spare].id), v1::WORKER_STATE_LOST);
  EXPECT_EQ(observer.told.back(), std::make_pair(1, 0));
  coordinator_.reset();
}

/// One replica, a checkpoint after step 3 (then every 4 steps) and a
/// snapshot after every step, in /ckpt.
v1::JobSpec SnapshotSpec() {
  v1::JobSpec spec = ElasticSpec(1, 4);
  spec.mutable_checkpoint()->set_directory("/ckpt");
  spec.mutable_checkpoint()->set_interval_steps(4);
  spec.mutable_checkpoint()->set_snapshot_interval_steps(1);
  return spec;
}

// Snapshots (docs/elastic.md, "Snapshots"): one replica, so a lost worker
// restarts; every stage reported a snapshot newer than the checkpoint of
// step 3 (stage 0 up to step 5, stage 1 a step behind, up to 4), so the
// restart restores every stage from the snapshots of step 4 and runs from 5.
TEST_F(ElasticTest, ARestartResumesFromTheNewestStepEveryStageHasASnapshotOf) {
  const v1::JobSpec spec = SnapshotSpec();
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  auto snapshots = [](int64_t step) {
    return [step](const FakeWorker& w, v1::ReportStepRequest& r) {
      const int64_t written = step - 1 - w.assignment->stage();
      if (written >= 0) r.set_snapshot_step(written);
    };
  };
  for (int64_t step = 0; step <= 6; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, truth, step, v1::VALIDATION_DECISION_COMMITTED,
                                snapshots(step)));
    if (step == 4) {
      const auto job = coordinator_->GetJob(job_id, {});
      EXPECT_THAT(job->snapshot_steps(), ::testing::ElementsAre(3, 2));
      EXPECT_EQ(job->last_snapshot_step(), 2);
    }
  }
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->last_checkpoint_step(), 3);
  EXPECT_THAT(job->snapshot_steps(), ::testing::ElementsAre(5, 4));
  EXPECT_EQ(job->last_snapshot_step(), 4);

  LoseWhileOthersRun(workers, 1);
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(), HasSubstr("restarting from the snapshot of step 4 (no "
                                              "replica holds all 2 stages)"));
  workers[1] = AddWorker(9);
  HeartbeatAll(workers);
  for (FakeWorker& w : workers) {
    w.Drain();  // The survivor said it is idle before the new worker came.
    ASSERT_TRUE(w.assignment.has_value()) << w.id;
    EXPECT_EQ(w.assignment->attempt(), 2);
    EXPECT_EQ(w.assignment->start_step(), 5);
    EXPECT_EQ(w.assignment->restore().directory(), "/ckpt/snapshots");
    EXPECT_EQ(w.assignment->restore().step(), 4);
  }
  // What the attempt restored is each stage's newest snapshot now.
  HeartbeatAll(workers);
  job = coordinator_->GetJob(job_id, {});
  EXPECT_THAT(job->snapshot_steps(), ::testing::ElementsAre(4, 4));
  // RUNNING again says from where, in the list of state changes too.
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->state_message(), "restarted from the snapshot of step 4");
  ASSERT_GT(job->transitions_size(), 0);
  EXPECT_EQ(job->transitions(job->transitions_size() - 1).message(),
            "restarted from the snapshot of step 4");
  EXPECT_EQ(job->restarts_total(), 1);
}

// The checkpoint of a step is preferred to its snapshot of the same step.
TEST_F(ElasticTest, ACheckpointOfTheSameStepIsPreferredToItsSnapshot) {
  const v1::JobSpec spec = SnapshotSpec();
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  for (int64_t step = 0; step <= 4; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, truth, step, v1::VALIDATION_DECISION_COMMITTED,
                                [step](const FakeWorker&, v1::ReportStepRequest& r) {
                                  if (step >= 1) r.set_snapshot_step(std::min<int64_t>(step - 1, 3));
                                }));
  }
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->last_snapshot_step(), 3);
  LoseWhileOthersRun(workers, 1);
  EXPECT_THAT(coordinator_->GetJob(job_id, {})->state_message(),
              HasSubstr("restarting from the checkpoint of step 3"));
  workers[1] = AddWorker(9);
  HeartbeatAll(workers);
  workers[0].Drain();
  ASSERT_TRUE(workers[0].assignment.has_value());
  EXPECT_EQ(workers[0].assignment->restore().directory(), "/ckpt");
  EXPECT_EQ(workers[0].assignment->start_step(), 4);
}

// A snapshot step the report cannot hold is refused naming the field, and
// nothing of the report is kept.
TEST_F(ElasticTest, ASnapshotStepOutsideTheAttemptsStepsIsRefused) {
  v1::JobSpec spec = ElasticSpec(1, 4);
  spec.mutable_checkpoint()->set_directory("/ckpt");
  spec.mutable_checkpoint()->set_snapshot_interval_steps(1);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  HeartbeatAll(workers);
  workers[0].Drain();
  v1::ReportStepRequest r = workers[0].Report(0, TrueCosts(spec, 0, 1.0));
  r.set_snapshot_step(1);  // After the step reported.
  absl::Status refused = coordinator_->ReportStep(r);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("snapshot_step: 1 is no step"));
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->snapshot_steps_size(), 0);
  r.set_snapshot_step(0);
  EXPECT_TRUE(coordinator_->ReportStep(r).ok());
}

}  // namespace
}  // namespace zbpp::coordinator
