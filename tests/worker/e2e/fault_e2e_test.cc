// Faults end to end (docs/faults.md), with real processes on 127.0.0.1: a
// worker SIGKILLed mid-run and replaced, and the coordinator SIGKILLed and
// restarted on its SQLite file. Either way the job must finish, and its
// final parameters and AdamW state (the checkpoint every stage writes at the
// last step) must equal those of an uninterrupted run of the same job within
// 1e-5 relative: recovery restarts from the last complete checkpoint and
// replays the same steps on the same data.
//
// The step of the fault and the victim are drawn from a seeded RNG; the
// seed is printed, and ZBPP_FAULT_SEED=<seed> replays a run.

#include <signal.h>
#include <torch/serialize/input-archive.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/read_file.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"
#include "worker/data/checkpoint.h"

namespace zbpp::worker::e2e {
namespace {

using ::zbpp::worker::testing::TestDirectory;

constexpr int64_t kSteps = 12;
constexpr int64_t kCheckpointInterval = 3;  // Steps 2, 5, 8, 11.
constexpr int kStages = 2;
// Short, so that a stage waiting on a dead peer gives up fast.
const std::vector<std::string> kWorkerFlags = {"--comm-timeout", "5"};

/// The seed of this run: ZBPP_FAULT_SEED when set, else a fresh one.
uint64_t Seed() {
  uint64_t seed = 0;
  const char* given = std::getenv("ZBPP_FAULT_SEED");
  if (given != nullptr && absl::SimpleAtoi(given, &seed)) return seed;
  return std::random_device()();
}

v1::JobSpec Job(const std::string& checkpoints) {
  v1::JobSpec spec = SmallBibleJob(kSteps);
  spec.mutable_checkpoint()->set_directory(checkpoints);
  spec.mutable_checkpoint()->set_interval_steps(kCheckpointInterval);
  return spec;
}

/// Names and shapes of the tensors in the checkpoint file `path`: what
/// ReadCheckpoint is to expect of both files compared.
ExpectedShapes LayoutOf(const std::string& path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path, at::Device(at::kCPU));
  ExpectedShapes layout;
  for (const std::string& key : archive.keys()) {
    c10::IValue value;
    archive.read(key, value);
    layout.emplace_back(key, value.toTensor().sizes().vec());
  }
  return layout;
}

/// Every tensor of every stage's checkpoint at the last step of `actual`
/// equals the one of `expected` within 1e-5 relative (in norm).
void ExpectSameFinalCheckpoints(const std::string& expected,
                                const std::string& actual) {
  const int64_t last = kSteps - 1;
  for (int stage = 0; stage < kStages; ++stage) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage);
    const ExpectedShapes layout =
        LayoutOf(CheckpointPath(expected, last, stage));
    ASSERT_FALSE(layout.empty());
    absl::StatusOr<NamedTensors> want =
        ReadCheckpoint(expected, last, stage, layout);
    absl::StatusOr<NamedTensors> got = ReadCheckpoint(actual, last, stage, layout);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    double worst = 0;
    for (size_t i = 0; i < want->size(); ++i) {
      const at::Tensor a = (*want)[i].second.to(at::kDouble);
      const at::Tensor b = (*got)[i].second.to(at::kDouble);
      const double scale = std::max(a.norm().item<double>(), 1e-12);
      const double relative = (a - b).norm().item<double>() / scale;
      worst = std::max(worst, relative);
      EXPECT_LE(relative, 1e-5) << "\"" << (*want)[i].first << "\"";
    }
    std::cout << "stage " << stage << ": " << want->size()
              << " tensors, largest relative difference " << worst << "\n";
  }
}

class FaultEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = Seed();
    rng_.seed(seed_);
    std::cout << "ZBPP_FAULT_SEED=" << seed_ << "\n";
  }

  void StartCluster(const std::string& db) {
    ClusterOptions options;
    options.directory = scratch_.path();
    options.workers = kStages;
    options.db = db;
    options.worker_flags = kWorkerFlags;
    absl::StatusOr<std::unique_ptr<Cluster>> started = Cluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
  }

  /// The uninterrupted run, into reference_.
  void RunReference() {
    absl::StatusOr<JobOutcome> outcome = cluster_->Run(Job(reference_));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED)
        << outcome->job.state_message();
    EXPECT_EQ(outcome->job.recoveries_total(), 0);
  }

  /// A step in [1, kSteps - 3]: after the first, early enough that the job
  /// is still running when the fault lands.
  int64_t DrawStep() {
    return std::uniform_int_distribution<int64_t>(1, kSteps - 3)(rng_);
  }

  /// Submits `spec` (by default the job to interrupt) and waits until step
  /// `after` completed; the job then, still RUNNING.
  v1::Job RunInterruptedJobUntil(int64_t after) {
    return RunInterruptedJobUntil(after, Job(interrupted_));
  }
  v1::Job RunInterruptedJobUntil(int64_t after, const v1::JobSpec& spec) {
    absl::StatusOr<v1::Job> submitted = cluster_->Submit(spec);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return {};
    absl::StatusOr<v1::Job> running =
        cluster_->WaitForSteps(submitted->id(), after + 1);
    EXPECT_TRUE(running.ok()) << running.status();
    if (!running.ok()) return {};
    EXPECT_EQ(running->state(), v1::JOB_STATE_RUNNING) << running->state_message();
    EXPECT_LT(running->steps_completed(), kSteps) << "the job ended before the fault";
    return *running;
  }

  /// SIGKILLs the worker that holds stage `stage` of the `running` job.
  void KillWorkerOfStage(const v1::Job& running, int stage) {
    ASSERT_EQ(running.assignments_size(), kStages);
    const std::string victim = running.assignments(stage).worker_id();
    size_t index = 0;
    while (index < cluster_->workers().size() &&
           cluster_->workers()[index].worker_id != victim) {
      ++index;
    }
    ASSERT_LT(index, cluster_->workers().size()) << "no worker " << victim;
    cluster_->KillWorker(index);
  }

  /// Waits for `job_id` to end and checks that it recovered and finished.
  void ExpectRecoveredToSuccess(const std::string& job_id) {
    absl::StatusOr<JobOutcome> outcome =
        cluster_->WaitForEnd(job_id, absl::Seconds(60));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    const v1::Job& job = outcome->job;
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.state_message();
    EXPECT_GE(job.recoveries_total(), 1);
    EXPECT_EQ(job.steps_completed(), kSteps);
    EXPECT_EQ(job.last_checkpoint_step(), kSteps - 1);
    std::cout << "recoveries " << job.recoveries_total() << "\n";
  }

  TestDirectory scratch_;
  const std::string reference_ = scratch_ / "reference";
  const std::string interrupted_ = scratch_ / "interrupted";
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<Cluster> cluster_;
};

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
// again (the new process does not know them), and the recovered job resumes
// from its last complete checkpoint.
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
  // The same worker processes did the rest: none died.
  for (const RunningWorker& worker : cluster_->workers()) {
    ASSERT_NE(worker.process, nullptr);
    EXPECT_EQ(kill(worker.process->pid(), 0), 0) << worker.worker_id;
  }
  ExpectSameFinalCheckpoints(reference_, interrupted_);
}

}  // namespace
}  // namespace zbpp::worker::e2e
