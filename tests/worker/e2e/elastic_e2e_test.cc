// Elastic data × pipeline parallelism end to end (docs/elastic.md), with real
// processes on 127.0.0.1 (fault_fixture.h): a lost worker degrades the job
// onto its complete replicas and a replacement heals it, with no restart; the
// final parameters are compared with an uninterrupted run's within twice
// what the reduction order alone makes of them.

#include "tests/worker/e2e/fault_fixture.h"

namespace zbpp::worker::e2e::fault_testing {
namespace {

// Data × pipeline parallelism (docs/elastic.md): 2 stages × 2 replicas,
// post-update validation (a kill may land in a speculative step, which the
// survivors roll back), long enough that a replacement registers while the
// job runs.
constexpr int64_t kElasticSteps = 40;
v1::JobSpec DataParallelJob(const std::string& checkpoints) {
  v1::JobSpec spec = Job(checkpoints);
  spec.set_steps(kElasticSteps);
  spec.mutable_checkpoint()->set_interval_steps(kElasticSteps);  // The last step only.
  spec.mutable_pipeline()->set_data_parallel(2);
  spec.set_validation(v1::VALIDATION_MODE_POST);
  return spec;
}

class ElasticEndToEnd : public FaultEndToEnd {
 protected:
  void SetUp() override {
    FaultEndToEnd::SetUp();
    // A file: a test restarts the coordinator on it.
    ASSERT_NO_FATAL_FAILURE(StartCluster(scratch_ / "coordinator.db", 2 * stages_));
    absl::StatusOr<JobOutcome> outcome = cluster_->Run(ElasticJob(reference_));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED) << outcome->job.state_message();
    // The same global batch on one replica, fault-free: what summing the
    // gradients in another order alone does to the final parameters.
    v1::JobSpec wide = ElasticJob(wide_);
    wide.mutable_pipeline()->set_data_parallel(1);
    wide.mutable_pipeline()->set_microbatches(2 * wide.pipeline().microbatches());
    outcome = cluster_->Run(wide);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED) << outcome->job.state_message();
    ExpectSameFinalCheckpoints(reference_, wide_, kElasticSteps, 1.0, &reduction_order_,
                               stages_);
    std::cout << "one replica with the whole batch vs two: largest relative difference "
              << reduction_order_ << "\n";
  }

  /// The job the references run and the tests interrupt, checkpointing
  /// into `checkpoints`, of stages_ stages: DataParallelJob here.
  virtual v1::JobSpec ElasticJob(const std::string& checkpoints) const {
    return DataParallelJob(checkpoints);
  }

  const std::string wide_ = scratch_ / "wide";
  double reduction_order_ = 0;
  int stages_ = kStages;  ///< ElasticJob's; 2 replicas of them are started.

  /// SIGKILLs the worker of (`stage`, `replica`) of the `running` job.
  void KillWorkerAt(const v1::Job& running, int stage, int replica) {
    std::string victim;
    for (const v1::StageAssignment& a : running.assignments()) {
      if (a.stage() == stage && a.replica() == replica) victim = a.worker_id();
    }
    ASSERT_FALSE(victim.empty()) << "no worker of stage " << stage << ", replica " << replica;
    KillWorker(victim);
  }

  /// Runs the job to interrupt (ElasticJob) until a step drawn in
  /// [1, 6] completed, SIGKILLs the worker of a drawn stage and replica
  /// (`then`: what the test does next, for the log) and waits until the job
  /// is DEGRADED (at most 60 s); the job then, the time of the kill in
  /// `killed` when given. Failures are the test's (HasFailure()).
  v1::Job DegradeAfterADrawnStep(const std::string& then, absl::Time* killed = nullptr) {
    const int64_t kill_after = std::uniform_int_distribution<int64_t>(1, 6)(rng_);
    const int stage = std::uniform_int_distribution<int>(0, stages_ - 1)(rng_);
    const int replica = std::uniform_int_distribution<int>(0, 1)(rng_);
    std::cout << "killing the worker of stage " << stage << ", replica " << replica
              << " after step " << kill_after << then << "\n";
    const v1::Job running = RunInterruptedJobUntil(kill_after, ElasticJob(interrupted_));
    if (HasFailure()) return running;
    KillWorkerAt(running, stage, replica);
    if (killed != nullptr) *killed = absl::Now();
    if (HasFailure()) return running;
    const v1::Job degraded = WaitForState(running.id(), v1::JOB_STATE_DEGRADED);
    EXPECT_EQ(degraded.state(), v1::JOB_STATE_DEGRADED) << degraded.state_message();
    return degraded;
  }


  /// Polls `job_id` (every 20 ms, at most 60 s) until `done` holds for it
  /// or it ended; the job then. A failure saying `what` when neither came.
  v1::Job WaitUntil(const std::string& job_id, const std::function<bool(const v1::Job&)>& done,
                    const std::string& what) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::Job job;
    while (absl::Now() < deadline) {
      absl::StatusOr<v1::Job> got = cluster_->Get(job_id);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return job;
      job = *got;
      if (done(job) || IsTerminal(job.state())) return job;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "job " << job_id << ": not " << what << " in 60 s";
    return job;
  }

  /// Polls `job_id` until it is in `state` (or ended), at most 60 s; the job.
  v1::Job WaitForState(const std::string& job_id, v1::JobState state) {
    return WaitUntil(
        job_id, [state](const v1::Job& job) { return job.state() == state; },
        v1::JobState_Name(state));
  }

  /// The job ended SUCCEEDED on the uninterrupted run's parameters, with no
  /// restart, after going DEGRADED; its outcome. "The uninterrupted run's
  /// parameters": within twice what the reduction order alone makes of them
  /// (reduction_order_: AdamW turns the round-off of near-zero gradients, the
  /// biases' mostly, into differences of about 1e-3 over 40 steps, while the
  /// training math is the same).
  JobOutcome ExpectEndedWithoutRestart(const std::string& job_id) {
    absl::StatusOr<JobOutcome> outcome = cluster_->WaitForEnd(job_id, absl::Seconds(120));
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    if (!outcome.ok()) return {};
    const v1::Job& job = outcome->job;
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.state_message();
    EXPECT_EQ(job.steps_completed(), kElasticSteps);
    EXPECT_GE(job.recoveries_total(), 1);
    EXPECT_EQ(job.restarts_total(), 0) << "no checkpoint restart";
    std::cout << "recoveries " << job.recoveries_total() << ", degraded steps "
              << job.degraded_steps() << "\n";
    double largest = 0;
    ExpectSameFinalCheckpoints(reference_, interrupted_, kElasticSteps,
                               std::max(1e-5, 2 * reduction_order_), &largest, stages_);
    std::cout << "degraded run vs the uninterrupted one: largest relative difference "
              << largest << " (the reduction order alone: " << reduction_order_ << ")\n";
    return *std::move(outcome);
  }
};

bool Saw(const JobOutcome& outcome, v1::JobState state) {
  return std::find(outcome.states.begin(), outcome.states.end(), state) != outcome.states.end();
}

// SIGKILL of one worker of a 2 × 2 job: the survivors hold their stages, the
// complete replica trains on with the whole global batch (DEGRADED, one
// replica), a replacement registering brings the job back to two replicas
// (its state copied from the live replica), and the job ends on the
// uninterrupted run's parameters without restarting from a checkpoint.
TEST_F(ElasticEndToEnd, AWorkerLostCostsNoRestartAndAReplacementHealsTheJob) {
  absl::Time killed;
  const v1::Job degraded = DegradeAfterADrawnStep("", &killed);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(degraded.replicas_active(), 1);
  std::cout << "DEGRADED " << absl::FormatDuration(absl::Now() - killed)
            << " after the kill: " << degraded.state_message() << "\n";
  absl::StatusOr<RunningWorker*> replacement = cluster_->AddWorker();
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  const JobOutcome outcome = ExpectEndedWithoutRestart(degraded.id());
  EXPECT_TRUE(Saw(outcome, v1::JOB_STATE_DEGRADED));
  // Healed: RUNNING again after DEGRADED.
  const auto degraded_at =
      std::find(outcome.states.begin(), outcome.states.end(), v1::JOB_STATE_DEGRADED);
  EXPECT_NE(std::find(degraded_at, outcome.states.end(), v1::JOB_STATE_RUNNING),
            outcome.states.end())
      << "the job did not return to two replicas";
}

// The coordinator SIGKILLed while the job is DEGRADED and restarted on its
// database (docs/elastic.md, "Coordinator restart"): the workers register
// again under new ids and say what they hold, the job goes back to DEGRADED
// from their memory with no restart, and a replacement heals it as before.
TEST_F(ElasticEndToEnd, ACoordinatorRestartedWhileDegradedResumesFromTheWorkersMemory) {
  const v1::Job degraded = DegradeAfterADrawnStep(", then the coordinator");
  ASSERT_FALSE(HasFailure());
  // Two steps on one replica: the degraded attempt holds its own progress.
  absl::StatusOr<v1::Job> stepped =
      cluster_->WaitForSteps(degraded.id(), degraded.steps_completed() + 2);
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  ASSERT_EQ(stepped->state(), v1::JOB_STATE_DEGRADED) << stepped->state_message();
  cluster_->KillCoordinator();
  const absl::Time killed = absl::Now();
  const absl::Status restarted = cluster_->RestartCoordinator();
  ASSERT_TRUE(restarted.ok()) << restarted;

  // RECOVERING ("coordinator restarted") until the workers said what they
  // hold.
  const v1::Job resumed = WaitForState(degraded.id(), v1::JOB_STATE_DEGRADED);
  ASSERT_EQ(resumed.state(), v1::JOB_STATE_DEGRADED) << resumed.state_message();
  EXPECT_EQ(resumed.replicas_active(), 1);
  EXPECT_EQ(resumed.restarts_total(), 0) << resumed.state_message();
  EXPECT_GE(resumed.steps_completed(), stepped->steps_completed()) << "no step run again";
  EXPECT_NE(resumed.state_message().find("coordinator restarted; degraded to 1 replicas"),
            std::string::npos)
      << resumed.state_message();
  std::cout << "DEGRADED again " << absl::FormatDuration(absl::Now() - killed)
            << " after the coordinator's kill: " << resumed.state_message() << "\n";
  absl::StatusOr<RunningWorker*> replacement = cluster_->AddWorker();
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  const JobOutcome outcome = ExpectEndedWithoutRestart(degraded.id());
  EXPECT_TRUE(Saw(outcome, v1::JOB_STATE_RUNNING)) << "the job did not return to two replicas";
  std::cout << "ended " << absl::FormatDuration(absl::Now() - killed)
            << " after the coordinator's kill\n";
}

// Both workers of one replica SIGKILLed: the other replica is complete and
// trains alone to the end, with the same global batch.
TEST_F(ElasticEndToEnd, AReplicaLostWholeLeavesTheOtherTrainingToTheEnd) {
  const v1::Job running = RunInterruptedJobUntil(3, DataParallelJob(interrupted_));
  ASSERT_FALSE(HasFailure());
  for (int stage = 0; stage < kStages; ++stage) {
    ASSERT_NO_FATAL_FAILURE(KillWorkerAt(running, stage, /*replica=*/1));
  }
  const JobOutcome outcome = ExpectEndedWithoutRestart(running.id());
  EXPECT_TRUE(Saw(outcome, v1::JOB_STATE_DEGRADED));
  // From the kill to the end, on one replica.
  EXPECT_GT(outcome.job.degraded_steps(), 0);
}

// ------------------------------------------ more elastic cases (docs/elastic.md)

/// How many of `job`'s state changes (Job.transitions) entered `to`.
int ChangesInto(const v1::Job& job, v1::JobState to) {
  return static_cast<int>(std::count_if(job.transitions().begin(), job.transitions().end(),
                                        [to](const v1::JobTransition& t) { return t.to() == to; }));
}

/// Whether `job` went RUNNING again after its last change into DEGRADED:
/// it healed (docs/elastic.md, "Heal").
bool HealedAfterTheLastDegrade(const v1::Job& job) {
  bool healed = false;
  for (const v1::JobTransition& t : job.transitions()) {
    if (t.to() == v1::JOB_STATE_DEGRADED) healed = false;
    if (t.from() == v1::JOB_STATE_DEGRADED && t.to() == v1::JOB_STATE_RUNNING) healed = true;
  }
  return healed;
}

/// `job`'s state changes, one a line, for the test's log.
void PrintTransitions(const v1::Job& job) {
  for (const v1::JobTransition& t : job.transitions()) {
    std::cout << "  " << v1::JobState_Name(t.from()) << " -> " << v1::JobState_Name(t.to())
              << " at step " << t.steps_completed() << ": " << t.message() << "\n";
  }
}

/// The elastic job at 3 stages (a layer each), so that a stage has
/// pipeline neighbours on both sides; its own references (the fixture's
/// SetUp runs them at this shape only).
class ElasticThreeStagesEndToEnd : public ElasticEndToEnd {
 protected:
  ElasticThreeStagesEndToEnd() { stages_ = 3; }
  v1::JobSpec ElasticJob(const std::string& checkpoints) const override {
    v1::JobSpec spec = DataParallelJob(checkpoints);
    spec.mutable_pipeline()->set_stages(3);
    spec.mutable_model()->set_layers(3);
    return spec;
  }
};

// The worker of the middle stage of one replica SIGKILLed: it sends to one
// pipeline neighbour and receives from the other, so both are left waiting.
// The other replica is complete and trains on (DEGRADED), a replacement
// heals the job, and it ends on the uninterrupted run's parameters without
// a restart.
TEST_F(ElasticThreeStagesEndToEnd, AMiddleStageLostDegradesAndAReplacementHealsTheJob) {
  const int64_t kill_after = std::uniform_int_distribution<int64_t>(1, 6)(rng_);
  const int replica = std::uniform_int_distribution<int>(0, 1)(rng_);
  std::cout << "killing the worker of stage 1 of 3, replica " << replica << " after step "
            << kill_after << "\n";
  const v1::Job running = RunInterruptedJobUntil(kill_after, ElasticJob(interrupted_));
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(running.assignments_size(), 6);
  ASSERT_NO_FATAL_FAILURE(KillWorkerAt(running, /*stage=*/1, replica));
  const v1::Job degraded = WaitForState(running.id(), v1::JOB_STATE_DEGRADED);
  ASSERT_EQ(degraded.state(), v1::JOB_STATE_DEGRADED) << degraded.state_message();
  EXPECT_EQ(degraded.replicas_active(), 1);
  EXPECT_EQ(degraded.assignments_size(), 3);
  absl::StatusOr<RunningWorker*> replacement = cluster_->AddWorker();
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  const JobOutcome outcome = ExpectEndedWithoutRestart(running.id());
  PrintTransitions(outcome.job);
  EXPECT_TRUE(HealedAfterTheLastDegrade(outcome.job)) << "the job did not return to two replicas";
}

// Post-update validation (paper §4; docs/elastic.md, "On the worker"): the
// last stage validates each step, so the first stage's update of step k
// stays speculative until the full validation state comes, and it runs the
// forwards of step k + 1 (the speculative prefix) before its first B, where
// it reads that state. With the last stage's passes 4 times slower from the
// step of the fault on, the first stage spends most of each step there; the
// last stage's worker of one replica is SIGKILLed the moment step k is seen
// completed, in that prefix. The survivors settle the pending update as
// StageTrainer::Hold does (resolved when its state came, else rolled back),
// so the complete replica holds one step, and the job ends without a restart
// on the uninterrupted run's parameters: an update applied twice, or one
// stage ahead of the other, would show in the final checkpoints or restart
// the job.
TEST_F(ElasticEndToEnd, AWorkerKilledInTheSpeculativePrefixCostsNoRestart) {
  const int64_t kill_after = std::uniform_int_distribution<int64_t>(2, 6)(rng_);
  const int replica = std::uniform_int_distribution<int>(0, 1)(rng_);
  // A cluster of its own: the references ran at full speed.
  ASSERT_NO_FATAL_FAILURE(StartCluster(":memory:", 2 * kStages,
                                       {"--slow-stage", absl::StrCat(kStages - 1, ":4@",
                                                                     kill_after)}));
  v1::JobSpec spec = DataParallelJob(interrupted_);
  ASSERT_EQ(spec.validation(), v1::VALIDATION_MODE_POST);
  std::cout << "killing the last stage's worker of replica " << replica << " when step "
            << kill_after << " completed\n";
  const v1::Job running = RunInterruptedJobUntil(kill_after, spec);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(running.validation_mode(), v1::VALIDATION_MODE_POST);
  ASSERT_NO_FATAL_FAILURE(KillWorkerAt(running, kStages - 1, replica));
  const v1::Job degraded = WaitForState(running.id(), v1::JOB_STATE_DEGRADED);
  ASSERT_EQ(degraded.state(), v1::JOB_STATE_DEGRADED) << degraded.state_message();
  std::cout << "DEGRADED: " << degraded.state_message() << "\n";
  const JobOutcome outcome = ExpectEndedWithoutRestart(running.id());
  PrintTransitions(outcome.job);
  EXPECT_EQ(outcome.job.recoveries_total(), 1);
  EXPECT_GT(outcome.job.degraded_steps(), 0);
}

// The replacement SIGKILLed as soon as the heal assigns it, before it runs a
// step (its state copy from the live replica may be under way): the heal's
// attempt ends like any other, the live replica still holds its step, so
// the job degrades again rather than restarting (the spare that joined the
// heal holds nothing then: docs/elastic.md), and the second replacement,
// registered with the first, heals it.
TEST_F(ElasticEndToEnd, AReplacementLostWhileItJoinsDegradesAgainAndASecondOneHeals) {
  const int stage = std::uniform_int_distribution<int>(0, kStages - 1)(rng_);
  std::cout << "killing the worker of stage " << stage << ", replica 1 after step 2\n";
  const v1::Job running = RunInterruptedJobUntil(2, DataParallelJob(interrupted_));
  ASSERT_FALSE(HasFailure());
  ASSERT_NO_FATAL_FAILURE(KillWorkerAt(running, stage, /*replica=*/1));
  const v1::Job degraded = WaitForState(running.id(), v1::JOB_STATE_DEGRADED);
  ASSERT_EQ(degraded.state(), v1::JOB_STATE_DEGRADED) << degraded.state_message();

  // Two replacements at once: the heal takes one, and the other is there to
  // heal the job again at once (one started after the loss could come after
  // the job's last step on a loaded machine).
  std::vector<std::string> newcomers;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<RunningWorker*> added = cluster_->AddWorker();
    ASSERT_TRUE(added.ok()) << added.status();
    newcomers.push_back((*added)->worker_id);
  }
  std::string newcomer;
  const v1::Job joining = WaitUntil(
      running.id(),
      [&newcomers, &newcomer](const v1::Job& job) {
        for (const v1::StageAssignment& a : job.assignments()) {
          if (std::find(newcomers.begin(), newcomers.end(), a.worker_id()) != newcomers.end()) {
            newcomer = a.worker_id();
          }
        }
        return !newcomer.empty();
      },
      "a replacement assigned");
  ASSERT_FALSE(HasFailure());
  ASSERT_FALSE(IsTerminal(joining.state())) << joining.state_message();
  ASSERT_NO_FATAL_FAILURE(KillWorker(newcomer));
  std::cout << "killed " << newcomer << " when assigned, " << joining.steps_completed()
            << " steps completed\n";

  // DEGRADED again (the next heal may follow at once: the state changes
  // say it, whatever the state when polled).
  const v1::Job again = WaitUntil(
      running.id(),
      [](const v1::Job& job) { return ChangesInto(job, v1::JOB_STATE_DEGRADED) >= 2; },
      "DEGRADED again");
  ASSERT_EQ(ChangesInto(again, v1::JOB_STATE_DEGRADED), 2) << again.state_message();
  EXPECT_EQ(again.restarts_total(), 0) << again.state_message();

  const JobOutcome outcome = ExpectEndedWithoutRestart(running.id());
  PrintTransitions(outcome.job);
  EXPECT_EQ(ChangesInto(outcome.job, v1::JOB_STATE_DEGRADED), 2);
  EXPECT_TRUE(HealedAfterTheLastDegrade(outcome.job)) << "the second replacement did not heal";
}

}  // namespace
}  // namespace zbpp::worker::e2e::fault_testing
