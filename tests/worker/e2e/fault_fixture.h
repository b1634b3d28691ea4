#ifndef ZBPP_TESTS_WORKER_E2E_FAULT_FIXTURE_H_
#define ZBPP_TESTS_WORKER_E2E_FAULT_FIXTURE_H_

// What the fault tests share (fault_e2e_test.cc, elastic_e2e_test.cc): a
// cluster of real processes on 127.0.0.1 (cluster.h), a seeded RNG for the
// step of the fault and the victim (the seed is printed, and
// ZBPP_FAULT_SEED=<seed> replays a run), the job they interrupt, and the
// comparison of the final checkpoints with an uninterrupted run's.

#include <signal.h>
#include <torch/serialize/input-archive.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/job_state.h"
#include "common/read_file.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"
#include "worker/data/checkpoint.h"


namespace zbpp::worker::e2e::fault_testing {

using ::zbpp::worker::testing::TestDirectory;

inline constexpr int64_t kSteps = 12;
inline constexpr int64_t kCheckpointInterval = 3;  // Steps 2, 5, 8, 11.
inline constexpr int kStages = 2;
// Short, so that a stage waiting on a dead peer gives up fast.
inline const std::vector<std::string> kWorkerFlags = {"--comm-timeout", "5"};

/// The seed of this run: ZBPP_FAULT_SEED when set, else a fresh one.
inline uint64_t Seed() {
  uint64_t seed = 0;
  const char* given = std::getenv("ZBPP_FAULT_SEED");
  if (given != nullptr && absl::SimpleAtoi(given, &seed)) return seed;
  return std::random_device()();
}

inline v1::JobSpec Job(const std::string& checkpoints) {
  v1::JobSpec spec = SmallBibleJob(kSteps);
  spec.mutable_checkpoint()->set_directory(checkpoints);
  spec.mutable_checkpoint()->set_interval_steps(kCheckpointInterval);
  return spec;
}

/// Names and shapes of the tensors in the checkpoint file `path`: what
/// ReadCheckpoint is to expect of both files compared.
inline ExpectedShapes LayoutOf(const std::string& path) {
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

/// Every tensor of every stage's checkpoint (of `stages`) at the last step
/// (`steps` - 1) of `actual` equals the one of `expected` within `bound`
/// relative (in norm); `largest` (when given) receives the largest relative
/// difference.
inline void ExpectSameFinalCheckpoints(const std::string& expected, const std::string& actual,
                                       int64_t steps = kSteps, double bound = 1e-5,
                                       double* largest = nullptr, int stages = kStages) {
  const int64_t last = steps - 1;
  for (int stage = 0; stage < stages; ++stage) {
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
      EXPECT_LE(relative, bound) << "\"" << (*want)[i].first << "\"";
    }
    if (largest != nullptr) *largest = std::max(*largest, worst);
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

  /// A cluster of `workers` workers, each with kWorkerFlags and then
  /// `flags`, replacing the test's cluster when it has one.
  void StartCluster(const std::string& db, int workers = kStages,
                    const std::vector<std::string>& flags = {}) {
    cluster_.reset();
    ClusterOptions options;
    options.directory = scratch_.path();
    options.workers = workers;
    options.db = db;
    options.worker_flags = kWorkerFlags;
    options.worker_flags.insert(options.worker_flags.end(), flags.begin(), flags.end());
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
    KillWorker(running.assignments(stage).worker_id());
  }

  /// SIGKILLs the worker `victim` (a worker id).
  void KillWorker(const std::string& victim) {
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

}  // namespace zbpp::worker::e2e::fault_testing

#endif  // ZBPP_TESTS_WORKER_E2E_FAULT_FIXTURE_H_
