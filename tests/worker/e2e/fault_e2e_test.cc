// Faults end to end (docs/faults.md), with real processes on 127.0.0.1: a
// worker SIGKILLed mid-run and replaced, and the coordinator SIGKILLed and
// restarted on its SQLite file. Either way the job must finish, and its
// final parameters and AdamW state (the checkpoint every stage writes at the
// last step) must equal those of an uninterrupted run of the same job within
// 1e-5 relative: recovery restarts from the last complete checkpoint and
// replays the same steps on the same data, or resumes from what the workers
// hold in memory (docs/elastic.md).
//
// The step of the fault and the victim are drawn from a seeded RNG; the
// seed is printed, and ZBPP_FAULT_SEED=<seed> replays a run.

#include "tests/worker/e2e/fault_fixture.h"

namespace zbpp::worker::e2e::fault_testing {
namespace {

// SIGKILL of one worker mid-step: the survivor's step fails (its peer is
// gone) instead of hanging, the coordinator marks the job RECOVERING, a
// replacement worker registers, and the new attempt restarts from the last
// complete checkpoint.
TEST_F(FaultEndToEnd, WorkerKilledMidRunIsReplacedAndTheJobEndsAsIfUninterrupted) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(":memory:"));
  ASSERT_NO_FATAL_FAILURE(RunReference());

  const int64_t kill_after = DrawStep();
  const int victim_stage = std::uniform_int_distribution<int>(0, kStages - 1)(rng_);
  std::cout << "killing the worker of stage " << victim_stage << " after step "
            << kill_after << " completed\n";
  const v1::Job running = RunInterruptedJobUntil(kill_after);
  ASSERT_FALSE(HasFailure());
  ASSERT_NO_FATAL_FAILURE(KillWorkerOfStage(running, victim_stage));
  const absl::Time killed = absl::Now();
  absl::StatusOr<RunningWorker*> replacement = cluster_->AddWorker();
  ASSERT_TRUE(replacement.ok()) << replacement.status();

  ASSERT_NO_FATAL_FAILURE(ExpectRecoveredToSuccess(running.id()));
  std::cout << "recovered and finished "
            << absl::FormatDuration(absl::Now() - killed) << " after the kill\n";
  ExpectSameFinalCheckpoints(reference_, interrupted_);
}

// One replica with snapshots every step (docs/elastic.md, "Snapshots"): a
// SIGKILLed worker still costs a restart, but from the snapshot of the step
// before the last one seen completed at least (each report of a completed
// step said so), not from the last checkpoint, and the job ends as the
// uninterrupted run.
TEST_F(FaultEndToEnd, AWorkerLostWithOneReplicaRestartsFromItsSnapshots) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(":memory:"));
  ASSERT_NO_FATAL_FAILURE(RunReference());

  // Checkpoints at steps 5 and 11 only: the snapshot is the newer point.
  v1::JobSpec spec = Job(interrupted_);
  spec.mutable_checkpoint()->set_interval_steps(6);
  spec.mutable_checkpoint()->set_snapshot_interval_steps(1);
  const std::vector<int64_t> kills = {2, 3, 7, 8};
  const int64_t kill_after =
      kills[std::uniform_int_distribution<size_t>(0, kills.size() - 1)(rng_)];
  const int victim_stage = std::uniform_int_distribution<int>(0, kStages - 1)(rng_);
  std::cout << "killing the worker of stage " << victim_stage << " after step " << kill_after
            << " completed\n";
  const v1::Job running = RunInterruptedJobUntil(kill_after, spec);
  ASSERT_FALSE(HasFailure());
  ASSERT_NO_FATAL_FAILURE(KillWorkerOfStage(running, victim_stage));
  // The restart's decision names its point.
  std::string decided;
  int64_t completed = 0;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30);
       decided.empty() && absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(20))) {
    absl::StatusOr<v1::Job> job = cluster_->Get(running.id());
    ASSERT_TRUE(job.ok()) << job.status();
    if (absl::StrContains(job->state_message(), "restarting from")) {
      decided = job->state_message();
      completed = job->steps_completed();
    }
  }
  std::cout << decided << "\n";
  const size_t at = decided.find("the snapshot of step ");
  ASSERT_NE(at, std::string::npos) << decided;
  int64_t restored = -1;
  ASSERT_TRUE(absl::SimpleAtoi(
      decided.substr(at + 21, decided.find_first_not_of("0123456789", at + 21) - at - 21),
      &restored));
  EXPECT_GE(restored, kill_after - 1);
  std::cout << "steps run again: " << completed - (restored + 1) << "\n";
  absl::StatusOr<RunningWorker*> replacement = cluster_->AddWorker();
  ASSERT_TRUE(replacement.ok()) << replacement.status();

  ASSERT_NO_FATAL_FAILURE(ExpectRecoveredToSuccess(running.id()));
  ExpectSameFinalCheckpoints(reference_, interrupted_);
}

// What another run left in the checkpoint directory costs the job nothing
// (docs/training.md, "Evaluation): a complete checkpoint of a higher step and a
// step directory that is a link to elsewhere stay as they are, keep_last 1
// prunes only the job's own older steps, and after a worker is SIGKILLed
// (the job's checkpoints at steps 2 and 5 written, at least) the job
// restores its own last one and ends as the uninterrupted run.
TEST_F(FaultEndToEnd, LeftoverCheckpointsAndLinksAreNeitherPrunedNorFollowed) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(":memory:"));
  ASSERT_NO_FATAL_FAILURE(RunReference());

  // Real checkpoints of another run: the reference's last ones, copied to
  // step 99999 and to the target of a link named like step 0 (a step this
  // job never writes).
  const std::string elsewhere = scratch_ / "elsewhere";
  const std::string leftover = interrupted_ + "/step-00099999";
  std::filesystem::create_directories(leftover);
  std::filesystem::create_directories(elsewhere);
  std::map<std::string, std::string> planted;
  for (int stage = 0; stage < kStages; ++stage) {
    const std::string from = CheckpointPath(reference_, kSteps - 1, stage);
    for (const std::string& to : {CheckpointPath(interrupted_, 99999, stage),
                                  absl::StrCat(elsewhere, "/stage-00", stage, ".pt")}) {
      std::filesystem::copy_file(from, to);
      planted[to] = ReadFileToString(to).value_or("");
      ASSERT_FALSE(planted[to].empty()) << to;
    }
  }
  std::filesystem::create_directory_symlink(elsewhere, interrupted_ + "/step-00000000");

  v1::JobSpec spec = Job(interrupted_);
  spec.mutable_checkpoint()->set_keep_last(1);
  const int victim_stage = std::uniform_int_distribution<int>(0, kStages - 1)(rng_);
  std::cout << "killing the worker of stage " << victim_stage << " after step 6 completed\n";
  const v1::Job running = RunInterruptedJobUntil(6, spec);
  ASSERT_FALSE(HasFailure());
  EXPECT_GE(running.last_checkpoint_step(), 5);
  ASSERT_NO_FATAL_FAILURE(KillWorkerOfStage(running, victim_stage));
  absl::StatusOr<RunningWorker*> replacement = cluster_->AddWorker();
  ASSERT_TRUE(replacement.ok()) << replacement.status();

  ASSERT_NO_FATAL_FAILURE(ExpectRecoveredToSuccess(running.id()));
  ExpectSameFinalCheckpoints(reference_, interrupted_);
  for (const auto& [path, bytes] : planted) {
    EXPECT_EQ(ReadFileToString(path).value_or("<missing>"), bytes) << path << " changed";
  }
  EXPECT_TRUE(std::filesystem::is_symlink(interrupted_ + "/step-00000000"));
  // keep_last 1 pruned the job's own steps 2 and 5. A stage that wrote step
  // 11 before its peer still counts 8 as the newest complete step and keeps
  // its file of 8 (PruneCheckpoints), so 8 may remain.
  std::set<std::string> steps;
  for (const auto& entry : std::filesystem::directory_iterator(interrupted_)) {
    steps.insert(entry.path().filename());
  }
  steps.erase("step-00000008");
  EXPECT_EQ(steps, (std::set<std::string>{"step-00000000", "step-00000011", "step-00099999"}));
}

// SIGKILL of the coordinator mid-run and a restart on the same address and
// SQLite file: the workers stay up, reconnect (with back-off), register
// again (the new process does not know them) holding their stages, and the
// recovered job resumes from their memory (docs/elastic.md, "Coordinator
// restart"), running no step again.
TEST_F(FaultEndToEnd, CoordinatorKilledMidRunRestartsFromItsDatabaseAndTheJobEnds) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(scratch_ / "coordinator.db"));
  ASSERT_NO_FATAL_FAILURE(RunReference());

  const int64_t kill_after = DrawStep();
  std::cout << "killing the coordinator after step " << kill_after
            << " completed\n";
  const v1::Job running = RunInterruptedJobUntil(kill_after);
  ASSERT_FALSE(HasFailure());
  cluster_->KillCoordinator();
  const absl::Time killed = absl::Now();
  const absl::Status restarted = cluster_->RestartCoordinator();
  ASSERT_TRUE(restarted.ok()) << restarted;

  ASSERT_NO_FATAL_FAILURE(ExpectRecoveredToSuccess(running.id()));
  std::cout << "recovered and finished "
            << absl::FormatDuration(absl::Now() - killed) << " after the kill\n";
  absl::StatusOr<v1::Job> ended = cluster_->Get(running.id());
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->restarts_total(), 0) << "resumed from the workers' memory";
  // The same worker processes did the rest: none died.
  for (const RunningWorker& worker : cluster_->workers()) {
    ASSERT_NE(worker.process, nullptr);
    EXPECT_EQ(kill(worker.process->pid(), 0), 0) << worker.worker_id;
  }
  ExpectSameFinalCheckpoints(reference_, interrupted_);
}

}  // namespace
}  // namespace zbpp::worker::e2e::fault_testing
