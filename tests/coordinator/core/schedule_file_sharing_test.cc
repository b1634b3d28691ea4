// Schedule files held once per content: by the Coordinator's jobs in memory
// (ScheduleFileTexts, coordinator/core/schedule_file.h) and by the store
// (the `schedule_files` table, coordinator/store/store.h), across a restart
// too. The store's own side is tests/coordinator/sqlite_schedule_files_test.cc.

#include <malloc.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/job_limits.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using testing::CoordinatorTest;
using testing::TestSpec;
using testing::Uncalibrated;

// A spec running zb-1p's schedule from a JSON file padded with blanks to
// just under the 3 MiB a file may have (common/job_limits.h), as a file
// written with many SEND/RECV actions or comments is.
v1::JobSpec LargeScheduleFileSpec() {
  v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p"));
  const sched::Schedule schedule =
      *sched::Generate(spec.schedule().name(), *InitialProblem(spec));
  std::string text = sched::ScheduleToJson(schedule);
  text.append(kMaxScheduleFileBytes - 1024 - text.size(), ' ');
  spec.mutable_schedule()->clear_name();
  spec.mutable_schedule()->set_file("large.json");
  spec.mutable_schedule()->set_file_text(std::move(text));
  return spec;
}

// Heap bytes in use (glibc's count of allocated chunks).
double HeapBytes() { return static_cast<double>(mallinfo2().uordblks); }

// Eight jobs submitted with one 3 MiB file grow the heap (the jobs and the
// in-memory SQLite database together) by about two copies of the file, one
// held by the jobs and one by the store, rather than two per job (about 48
// MiB for eight before: each job's record held its own copy, in memory and
// in the database).
TEST_F(CoordinatorTest, JobsOfOneScheduleFileShareOneCopyInMemoryAndInTheStore) {
  const v1::JobSpec spec = LargeScheduleFileSpec();
  const double file_bytes = static_cast<double>(spec.schedule().file_text().size());
  constexpr int kJobs = 8;
  std::vector<std::string> ids;
  const double before = HeapBytes();
  for (int i = 0; i < kJobs; ++i) {
    absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  const double grown = HeapBytes() - before;
  std::printf("heap grown by %.1f MiB for %d jobs of one %.1f MiB schedule file\n",
              grown / (1 << 20), kJobs, file_bytes / (1 << 20));
  EXPECT_LT(grown, 3 * file_bytes) << "more than one copy per holder";
  for (const std::string& id : ids) {
    absl::StatusOr<v1::Job> full = coordinator_->GetJob(id, v1::JOB_VIEW_FULL);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_EQ(full->spec().schedule().file_text(), spec.schedule().file_text());
    absl::StatusOr<v1::Job> basic = coordinator_->GetJob(id, v1::JOB_VIEW_BASIC);
    ASSERT_TRUE(basic.ok()) << basic.status();
    EXPECT_TRUE(basic->spec().schedule().file_text().empty());
    EXPECT_EQ(basic->spec().schedule().file(), "large.json");
  }
}

// After a restart the recovered jobs get their file back from the store
// (stored once) and plan from it: a job that had not started runs it.
TEST_F(CoordinatorTest, RecoveredJobsGetTheirScheduleFileBack) {
  const std::string path = NewDatabasePath();
  Start(path);
  const v1::JobSpec spec = LargeScheduleFileSpec();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  Start(path);
  for (const std::string& id : ids) {
    absl::StatusOr<v1::Job> full = coordinator_->GetJob(id, v1::JOB_VIEW_FULL);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_EQ(full->spec().schedule().file_text(), spec.schedule().file_text());
  }
  std::vector<testing::FakeWorker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(AddWorker(i));
  HeartbeatAll(workers);
  // The oldest waiting job takes the workers.
  absl::StatusOr<v1::Job> running = coordinator_->GetJob(ids.front(), v1::JOB_VIEW_FULL);
  ASSERT_TRUE(running.ok()) << running.status();
  EXPECT_EQ(running->state(), v1::JOB_STATE_RUNNING) << running->state_message();
  EXPECT_EQ(running->schedule().schedule().name(), "zb-1p");
}

}  // namespace
}  // namespace zbpp::coordinator
