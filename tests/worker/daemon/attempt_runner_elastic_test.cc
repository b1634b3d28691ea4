// The worker's attempt runner in-process (attempt_runner_fixture.h) between
// attempts (docs/elastic.md): resumed from memory, degraded onto one
// replica, healed by a state copy.

#include "tests/worker/daemon/attempt_runner_fixture.h"

namespace zbpp::worker::attempt_runner_testing {
namespace {

TEST_F(AttemptRunnerTest, AnAttemptResumedFromMemoryEndsAsIfUninterrupted) {
  const v1::JobSpec spec = TinyJob(4);
  RunToEnd(spec, /*attempt=*/1);
  const std::map<int64_t, v1::ReportStepRequest> uninterrupted = Reports(kStages - 1, 1);

  AssignAll(spec, 2);
  Broadcast(Grant(2, 1));
  StartAll();
  for (int r = 0; r < kStages; ++r) workers_[r]->reporter.AwaitStep(2, 1);
  Broadcast(AbortKeepingState(2));
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    const v1::Heartbeat heartbeat = workers_[r]->state.Heartbeat();
    ASSERT_TRUE(heartbeat.has_held());
    EXPECT_EQ(heartbeat.held().job_id(), kJob);
    EXPECT_EQ(heartbeat.held().attempt(), 2);
    EXPECT_EQ(heartbeat.held().stage(), r);
    EXPECT_EQ(heartbeat.held().step(), 1);
    EXPECT_NE(workers_[r]->held.trainer, nullptr);
  }

  // A job of the same id under another spec (a coordinator on another
  // database) does not take it, and the state stays held for its own job.
  {
    v1::JobSpec other = spec;
    other.set_seed(spec.seed() + 1);
    v1::Assignment wrong = AssignmentOf(other, 3, 0);
    wrong.set_start_step(2);
    wrong.set_resume_from_memory(true);
    Worker& w = *workers_[0];
    w.state.Apply(Assign(wrong));
    ASSERT_TRUE(w.state.WaitForAssignment(absl::Seconds(5)).has_value());
    const AttemptOutcome outcome = RunAttempt(wrong, w.env, w.held);
    EXPECT_TRUE(absl::IsFailedPrecondition(outcome.status)) << outcome.status;
    EXPECT_THAT(std::string(outcome.status.message()),
                HasSubstr("holds stage 0 of job job-1 at step 1 under another spec"));
    EXPECT_FALSE(outcome.job_error);
    EXPECT_NE(w.held.trainer, nullptr);
    w.state.Finish(kJob, 3);
  }

  for (int r = 0; r < kStages; ++r) {
    v1::Assignment next = AssignmentOf(spec, 4, r);
    next.set_start_step(2);
    next.set_resume_from_memory(true);
    workers_[r]->state.Apply(Assign(next));
  }
  Broadcast(Grant(4, 3));
  StartAll();
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    EXPECT_FALSE(workers_[r]->state.Heartbeat().has_held()) << "taken by attempt 4";
  }
  const std::map<int64_t, v1::ReportStepRequest> resumed = Reports(kStages - 1, 4);
  ASSERT_EQ(resumed.size(), 2u);
  for (int64_t step : {2, 3}) {
    SCOPED_TRACE(step);
    ASSERT_TRUE(resumed.at(step).has_loss());
    EXPECT_EQ(resumed.at(step).loss(), uninterrupted.at(step).loss());
  }
  EXPECT_EQ(resumed.at(3).parameter_sum(), uninterrupted.at(3).parameter_sum());
}

// resume_from_memory on a worker that holds nothing of the job fails the
// attempt saying what it holds, and is no job error (the coordinator then
// restarts from the checkpoint).
TEST_F(AttemptRunnerTest, ResumingFromMemoryThatIsNotHeldFailsRetryably) {
  v1::Assignment a = AssignmentOf(TinyJob(4), 1, 0);
  a.set_start_step(2);
  a.set_resume_from_memory(true);
  Worker& w = *workers_[0];
  w.state.Apply(Assign(a));
  ASSERT_TRUE(w.state.WaitForAssignment(absl::Seconds(5)).has_value());
  const AttemptOutcome outcome = RunAttempt(a, w.env, w.held);
  EXPECT_TRUE(absl::IsFailedPrecondition(outcome.status)) << outcome.status;
  EXPECT_THAT(std::string(outcome.status.message()),
              ::testing::HasSubstr("holds no stage state, not stage 0 of job job-1 at step 1"));
  EXPECT_FALSE(outcome.job_error);
}

// A degrade (docs/elastic.md): two steps at 2 stages x 2 replicas, then the
// replicas' workers of replica 0 alone resume from memory with both
// replicas' microbatches (m' = 2m, offset 0). The same samples make the same
// mean gradient: losses and parameters match the uninterrupted 2 x 2 run
// up to the order of the floating-point sums.
TEST_F(AttemptRunnerTest, ADegradedReplicaTakesTheWholeBatchAndTrainsAsTheFullWidthRun) {
  const v1::JobSpec spec = AddSecondReplica();
  auto assign = [&](int64_t attempt, int i) { return ReplicaAssignment(spec, attempt, i); };
  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(1, i)));
  Broadcast(Grant(1, 3));
  StartAll();
  JoinAll();
  for (int i = 0; i < 2 * kStages; ++i) {
    ASSERT_TRUE(outcomes_[i].status.ok()) << outcomes_[i].status;
  }
  // The last stage's workers of both replicas.
  const std::map<int64_t, v1::ReportStepRequest> full0 = Reports(kStages - 1, 1);
  const std::map<int64_t, v1::ReportStepRequest> full1 = Reports(2 * kStages - 1, 1);

  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(2, i)));
  Broadcast(Grant(2, 1));
  StartAll();
  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->reporter.AwaitStep(2, 1);
  Broadcast(AbortKeepingState(2));
  JoinAll();
  // Replica 1 is lost; replica 0 resumes alone with the global batch.
  for (int i = 0; i < kStages; ++i) {
    v1::Assignment next = assign(3, i);
    next.set_start_step(2);
    next.set_resume_from_memory(true);
    next.set_replicas(1);
    next.set_microbatch_offset(0);
    next.set_microbatches(2 * kMicrobatches);
    *next.mutable_schedule() = Version(1, 0, "zb-h1", 2 * kMicrobatches);
    workers_[i]->state.Apply(Assign(next));
  }
  Broadcast(Grant(3, 3));
  workers_.resize(kStages);
  StartAll();
  JoinAll();
  for (int i = 0; i < kStages; ++i) ASSERT_TRUE(outcomes_[i].status.ok()) << outcomes_[i].status;
  const std::map<int64_t, v1::ReportStepRequest> degraded = Reports(kStages - 1, 3);
  ASSERT_EQ(degraded.size(), 2u);
  for (int64_t step : {2, 3}) {
    SCOPED_TRACE(step);
    ASSERT_TRUE(degraded.at(step).has_loss());
    // Each replica's loss is its mean over m microbatches; the degraded
    // replica's is the mean over all 2m.
    const double mean = (full0.at(step).loss() + full1.at(step).loss()) / 2;
    EXPECT_NEAR(degraded.at(step).loss(), mean, 1e-5 * std::abs(mean));
  }
  const double reference = full0.at(3).parameter_sum();
  EXPECT_NEAR(degraded.at(3).parameter_sum(), reference, 1e-5 * std::abs(reference));
  std::cout << "degraded vs full-width parameter sum: " << degraded.at(3).parameter_sum()
            << " vs " << reference << " (relative difference "
            << std::abs(degraded.at(3).parameter_sum() - reference) / std::abs(reference)
            << ")\n";
}

// A heal (docs/elastic.md): after a degrade to replica 0 alone for step 2,
// replica 1's workers come back with stale state (held at step 1) and take
// replica 0's state over the data-parallel group before step 3: both
// replicas end on the same parameters, bit for bit, and on the full-width
// run's up to the order of the floating-point sums.
TEST_F(AttemptRunnerTest, AHealedReplicaTakesItsPeersStateBitForBit) {
  const v1::JobSpec spec = AddSecondReplica();
  auto assign = [&](int64_t attempt, int i) { return ReplicaAssignment(spec, attempt, i); };
  auto run = [&](int64_t attempt, int64_t through_step, bool keep) {
    Broadcast(Grant(attempt, through_step));
    StartAll();
    if (keep) {
      for (auto& w : workers_) w->reporter.AwaitStep(attempt, through_step);
      Broadcast(AbortKeepingState(attempt));
    }
    JoinAll();
    for (size_t i = 0; i < workers_.size(); ++i) {
      ASSERT_TRUE(outcomes_[i].status.ok()) << i << ": " << outcomes_[i].status;
    }
  };
  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(1, i)));
  ASSERT_NO_FATAL_FAILURE(run(1, 3, /*keep=*/false));
  const double reference = Reports(kStages - 1, 1).at(3).parameter_sum();

  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(2, i)));
  ASSERT_NO_FATAL_FAILURE(run(2, 1, /*keep=*/true));
  // Step 2 on replica 0 alone, with the whole batch.
  std::vector<std::unique_ptr<Worker>> replica1;
  for (int i = kStages; i < 2 * kStages; ++i) replica1.push_back(std::move(workers_[i]));
  workers_.resize(kStages);
  for (int i = 0; i < kStages; ++i) {
    v1::Assignment a = assign(3, i);
    a.set_start_step(2);
    a.set_resume_from_memory(true);
    a.set_replicas(1);
    a.set_microbatches(2 * kMicrobatches);
    *a.mutable_schedule() = Version(1, 0, "zb-h1", 2 * kMicrobatches);
    workers_[i]->state.Apply(Assign(a));
  }
  ASSERT_NO_FATAL_FAILURE(run(3, 2, /*keep=*/true));
  // Step 3 at two replicas again: replica 1 held step 1, not 2.
  for (auto& w : replica1) workers_.push_back(std::move(w));
  for (int i = 0; i < 2 * kStages; ++i) {
    v1::Assignment a = assign(4, i);
    a.set_start_step(3);
    a.set_resume_from_memory(i < kStages);
    a.set_receive_state(true);
    a.set_state_source_replica(0);
    workers_[i]->state.Apply(Assign(a));
  }
  ASSERT_NO_FATAL_FAILURE(run(4, 3, /*keep=*/false));
  const double healed0 = Reports(kStages - 1, 4).at(3).parameter_sum();
  const double healed1 = Reports(2 * kStages - 1, 4).at(3).parameter_sum();
  EXPECT_EQ(healed1, healed0);
  EXPECT_NEAR(healed0, reference, 1e-5 * std::abs(reference));
}

}  // namespace
}  // namespace zbpp::worker::attempt_runner_testing
