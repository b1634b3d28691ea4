// NewestRestorePoint (checkpoint_directory.h): the newer of a job's last
// checkpoint and the last step every stage has a snapshot of.

#include "coordinator/core/checkpoint_directory.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

v1::Job JobWith(int64_t checkpoint, std::vector<int64_t> snapshots, int64_t last_snapshot) {
  v1::Job job;
  job.mutable_spec()->mutable_checkpoint()->set_directory("/ckpt/job-1");
  job.set_last_checkpoint_step(checkpoint);
  for (int64_t step : snapshots) job.add_snapshot_steps(step);
  job.set_last_snapshot_step(last_snapshot);
  return job;
}

TEST(NewestRestorePoint, TheNewerOfTheCheckpointAndTheSnapshotEveryStageHas) {
  RestorePoint point = NewestRestorePoint(JobWith(3, {5, 4}, 4));
  EXPECT_EQ(point.step, 4);
  EXPECT_TRUE(point.snapshot);
  EXPECT_EQ(point.directory, "/ckpt/job-1/snapshots");
  EXPECT_EQ(point.Describe(), "the snapshot of step 4");

  point = NewestRestorePoint(JobWith(3, {3, 3}, 3));
  EXPECT_EQ(point.step, 3);
  EXPECT_FALSE(point.snapshot) << "a tie goes to the checkpoint";
  EXPECT_EQ(point.directory, "/ckpt/job-1");
  EXPECT_EQ(point.Describe(), "the checkpoint of step 3");

  point = NewestRestorePoint(JobWith(3, {7, -1}, -1));
  EXPECT_EQ(point.step, 3) << "stage 1 has no snapshot";

  // A job stored before snapshots existed: last_snapshot_step 0, no steps.
  point = NewestRestorePoint(JobWith(-1, {}, 0));
  EXPECT_EQ(point.step, -1);
  EXPECT_EQ(point.Describe(), "step 0");
  EXPECT_EQ(point.directory, "");

  point = NewestRestorePoint(JobWith(-1, {2, 2}, 2));
  EXPECT_EQ(point.step, 2);
  EXPECT_TRUE(point.snapshot);
}

}  // namespace
}  // namespace zbpp::coordinator
