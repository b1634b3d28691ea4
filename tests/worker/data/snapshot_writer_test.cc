#include "worker/data/snapshot_writer.h"

#include <ATen/ops/full.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "api/snapshots.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"

namespace zbpp::worker {
namespace {

using testing::TestDirectory;

constexpr char kOwner[] = "job-1 spec 0123456789abcdef";

// A stage's state after `step`: every entry equals the step.
NamedTensors StateAfter(int64_t step) {
  return {{"w", at::full({4, 3}, static_cast<double>(step), at::kFloat)},
          {"optimizer.step", at::full({1}, step, at::kLong)}};
}

const ExpectedShapes kShapes = {{"w", {4, 3}}, {"optimizer.step", {1}}};

std::set<std::string> StepDirectories(const std::string& directory) {
  std::set<std::string> steps;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    steps.insert(entry.path().filename());
  }
  return steps;
}

TEST(SnapshotWriterTest, WritesEachSubmittedStepAndKeepsTheNewestCompleteOnes) {
  TestDirectory scratch;
  const std::string directory = SnapshotDirectory(scratch.path());
  {
    // Two stages: stage 1's files make stage 0's steps complete.
    SnapshotWriter stage0(directory, 0, 2, kOwner);
    SnapshotWriter stage1(directory, 1, 2, kOwner);
    EXPECT_EQ(stage0.durable_step(), std::nullopt);
    for (int64_t step = 0; step < 6; ++step) {
      stage1.Submit(step, StateAfter(step));
      stage1.Finish();
      stage0.Submit(step, StateAfter(step));
      // At most one write runs: the previous submission is durable now.
      if (step > 0) EXPECT_GE(stage0.durable_step().value_or(-1), step - 1);
    }
    stage0.Finish();
    EXPECT_EQ(stage0.durable_step(), 5);
    EXPECT_EQ(stage1.durable_step(), 5);
  }
  // Each file holds its own step's state, not a later one's.
  for (int64_t step = 6 - kSnapshotsKept; step < 6; ++step) {
    for (int stage = 0; stage < 2; ++stage) {
      absl::StatusOr<NamedTensors> read = ReadCheckpoint(directory, step, stage, kShapes);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ((*read)[0].second.min().item<float>(), static_cast<float>(step));
      EXPECT_EQ((*read)[1].second.item<int64_t>(), step);
    }
  }
  // Steps 0 and 1 are pruned. Stage 1 pruned before stage 0 wrote step 5,
  // when 4 was the newest complete step: its file of step 2 may remain.
  std::set<std::string> steps = StepDirectories(directory);
  steps.erase("step-00000002");
  EXPECT_EQ(steps,
            (std::set<std::string>{"step-00000003", "step-00000004", "step-00000005"}));
  EXPECT_EQ(LatestCompleteCheckpoint(directory, 2).value_or(-1), 5);
}

TEST(SnapshotWriterTest, AFailedWriteLeavesTheDurableStepWhereItWas) {
  TestDirectory scratch;
  const std::string directory = SnapshotDirectory(scratch.path());
  SnapshotWriter writer(directory, 0, 1, kOwner);
  writer.Submit(0, StateAfter(0));
  writer.Finish();
  ASSERT_EQ(writer.durable_step(), 0);
  // Another owner's file at step 1: the claim is refused, nothing written.
  SnapshotWriter other(directory, 0, 1, "job-2 spec fedcba9876543210");
  other.Submit(1, StateAfter(1));
  other.Finish();
  writer.Submit(1, StateAfter(1));
  writer.Finish();
  EXPECT_EQ(writer.durable_step(), 0);
  EXPECT_EQ(other.durable_step(), 1);
}

TEST(SnapshotWriterTest, TheDirectoryIsBesideTheCheckpointSteps) {
  EXPECT_EQ(SnapshotDirectory("/data/ckpt"), "/data/ckpt/snapshots");
  EXPECT_EQ(SnapshotDirectory("/data/ckpt/"), "/data/ckpt/snapshots");
}

}  // namespace
}  // namespace zbpp::worker
