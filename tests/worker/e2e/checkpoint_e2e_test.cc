// Checkpoints end to end: workers write one file per stage every
// interval_steps, the coordinator records the step, a later job resumes from
// it (and really restores the weights), and a checkpoint of another model is
// refused naming the file and the tensor without touching the files.

#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/e2e/cluster.h"

namespace zbpp::worker::e2e {
namespace {

using ::zbpp::worker::testing::TestDirectory;

using ::testing::HasSubstr;

/// SmallBibleJob checkpointing into `directory` every `interval` steps
/// (0: none), resuming from `resume_step` when >= 0.
v1::JobSpec CheckpointedJob(const std::string& directory, int64_t steps,
                            int64_t interval, int64_t resume_step = -1) {
  v1::JobSpec spec = SmallBibleJob(steps);
  spec.mutable_checkpoint()->set_directory(directory);
  spec.mutable_checkpoint()->set_interval_steps(interval);
  if (resume_step >= 0) spec.mutable_checkpoint()->set_resume_step(resume_step);
  return spec;
}

std::string StageFile(const std::string& directory, int step, int stage) {
  char name[64];
  std::snprintf(name, sizeof(name), "/step-%08d/stage-%03d.pt", step, stage);
  return directory + name;
}

/// Every regular file under `directory`: its bytes and modification time.
std::map<std::string, std::string> Snapshot(const std::string& directory) {
  std::map<std::string, std::string> files;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    files[entry.path().string()] =
        absl::StrCat(entry.last_write_time().time_since_epoch().count(), ":",
                     ReadFileToString(entry.path()).value_or(""));
  }
  return files;
}

class CheckpointEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Cluster>> started =
        Cluster::Start(scratch_.path(), 2);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = *std::move(started);
  }

  /// Runs `spec` and expects it to succeed.
  v1::Job RunToSuccess(const v1::JobSpec& spec) {
    absl::StatusOr<JobOutcome> outcome = cluster_->Run(spec);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    if (!outcome.ok()) return {};
    EXPECT_EQ(outcome->job.state(), v1::JOB_STATE_SUCCEEDED)
        << outcome->job.state_message();
    return outcome->job;
  }

  TestDirectory scratch_;
  std::unique_ptr<Cluster> cluster_;
  const std::string directory_ = scratch_ / "checkpoints";
};

TEST_F(CheckpointEndToEnd, WrittenEveryIntervalThenResumedFrom) {
  const v1::Job first = RunToSuccess(CheckpointedJob(directory_, 10, 5));
  ASSERT_EQ(first.state(), v1::JOB_STATE_SUCCEEDED);
  for (int step : {4, 9}) {
    for (int stage : {0, 1}) {
      EXPECT_TRUE(
          std::filesystem::is_regular_file(StageFile(directory_, step, stage)))
          << StageFile(directory_, step, stage);
    }
  }
  EXPECT_FALSE(std::filesystem::exists(StageFile(directory_, 5, 0)));
  EXPECT_EQ(first.last_checkpoint_step(), 9);

  const v1::Job resumed = RunToSuccess(CheckpointedJob(directory_, 12, 0, 4));
  ASSERT_EQ(resumed.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(resumed.first_step().step(), 5);
  EXPECT_EQ(resumed.last_step().step(), 11);
  EXPECT_EQ(resumed.steps_completed(), 12);
  EXPECT_EQ(resumed.recoveries_total(), 0);
  // Restored, not re-initialized from the seed: step 5 starts where the
  // first job's training had brought the loss.
  EXPECT_LT(resumed.first_step().loss(), first.first_step().loss() - 0.3)
      << "first job's step 0: " << first.first_step().loss();
}

TEST_F(CheckpointEndToEnd, CheckpointOfAnotherModelFailsNamingFileAndTensor) {
  ASSERT_EQ(RunToSuccess(CheckpointedJob(directory_, 5, 5)).state(),
            v1::JOB_STATE_SUCCEEDED);
  const std::map<std::string, std::string> before = Snapshot(directory_);
  ASSERT_EQ(before.size(), 4u) << "each stage's checkpoint and owner file";

  v1::JobSpec narrower = CheckpointedJob(directory_, 8, 0, 4);
  narrower.mutable_model()->set_hidden(32);
  absl::StatusOr<JobOutcome> outcome = cluster_->Run(narrower);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const v1::Job& job = outcome->job;
  std::vector<std::string> states;
  for (v1::JobState s : outcome->states) states.push_back(v1::JobState_Name(s));
  std::cout << "states: " << ::testing::PrintToString(states) << "\n";
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED)
      << ::testing::PrintToString(states);
  EXPECT_THAT(job.state_message(), HasSubstr(directory_ + "/step-00000004/"));
  EXPECT_THAT(job.state_message(), HasSubstr("does not match the model"));
  // The file, then the tensor in quotes with the shapes that differ.
  EXPECT_THAT(
      job.state_message(),
      ::testing::ContainsRegex(
          "/stage-00[01]\\.pt .*\"[A-Za-z0-9_.]+\" has shape \\[.*32\\]"));
  EXPECT_FALSE(job.has_first_step()) << "no step may run";
  EXPECT_EQ(job.steps_completed(), 5);  // resume_step + 1, as submitted.
  EXPECT_EQ(Snapshot(directory_), before) << "checkpoint files changed";
}

// A job never overwrites another job's checkpoint: the same spec run again
// in the same directory would write step 4 over the first job's, and is
// refused before any step runs, naming the directory and the step; the
// first job's files are untouched.
TEST_F(CheckpointEndToEnd, AStepAnotherJobWroteIsRefusedAtTheStart) {
  const v1::Job first = RunToSuccess(CheckpointedJob(directory_, 5, 5));
  ASSERT_EQ(first.state(), v1::JOB_STATE_SUCCEEDED);
  const std::map<std::string, std::string> before = Snapshot(directory_);

  absl::StatusOr<JobOutcome> outcome = cluster_->Run(CheckpointedJob(directory_, 5, 5));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const v1::Job& job = outcome->job;
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED) << job.state_message();
  EXPECT_THAT(job.state_message(), HasSubstr("checkpoint.directory " + directory_));
  EXPECT_THAT(job.state_message(), HasSubstr("this job writes step 4 but"));
  EXPECT_THAT(job.state_message(), HasSubstr("belongs to " + first.id() + " spec "));
  EXPECT_FALSE(job.has_first_step()) << "no step may run";
  EXPECT_EQ(job.recoveries_total(), 0) << "an error in the job is not retried";
  EXPECT_EQ(Snapshot(directory_), before) << "checkpoint files changed";
}

}  // namespace
}  // namespace zbpp::worker::e2e
