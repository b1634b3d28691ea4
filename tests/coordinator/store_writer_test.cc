// StoreWriter: writes applied one at a time in Enqueue order, Flush waits
// for them, a failed write does not stop later ones, the destructor drains.

#include "coordinator/core/store_writer.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "coordinator/store/sqlite_store.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

std::unique_ptr<SqliteStore> MemoryStore() {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Create({});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

TEST(StoreWriterTest, NeedsAStore) {
  EXPECT_EQ(StoreWriter::Create({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoreWriterTest, AppliesWritesInEnqueueOrder) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  auto writer = StoreWriter::Create({store.get()});
  ASSERT_TRUE(writer.ok());
  zbpp::v1::Job job;
  job.set_id("job-1");
  ASSERT_TRUE(store->CreateJob(job).ok());
  std::vector<int> order;  // Only touched by the writer thread until Flush.
  for (int i = 1; i <= 500; ++i) {
    job.set_steps_completed(i);
    (*writer)->Enqueue(
        [job, i, &order](Store& s) {
          order.push_back(i);
          return s.UpdateJob(job);
        },
        "storing job-1");
  }
  (*writer)->Flush();
  EXPECT_EQ((*writer)->Pending(), 0);
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(order[i], i + 1);
  // The last update decided is the one stored.
  EXPECT_EQ(store->GetJob("job-1")->steps_completed(), 500);
}

TEST(StoreWriterTest, EnqueueDoesNotWaitForASlowWrite) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  auto writer = StoreWriter::Create({store.get()});
  ASSERT_TRUE(writer.ok());
  absl::Notification release;
  std::atomic<int> applied{0};
  (*writer)->Enqueue(
      [&](Store&) {
        release.WaitForNotification();  // A commit stuck on the disk.
        ++applied;
        return absl::OkStatus();
      },
      "slow");
  // Returns at once although the first write is blocked.
  (*writer)->Enqueue([&](Store&) { ++applied; return absl::OkStatus(); },
                     "second");
  EXPECT_EQ(applied.load(), 0);
  EXPECT_EQ((*writer)->Pending(), 2);
  release.Notify();
  (*writer)->Flush();
  EXPECT_EQ(applied.load(), 2);
}

TEST(StoreWriterTest, AFailedWriteDoesNotStopLaterOnes) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  auto writer = StoreWriter::Create({store.get()});
  ASSERT_TRUE(writer.ok());
  zbpp::v1::Job missing;
  missing.set_id("job-404");
  (*writer)->Enqueue([missing](Store& s) { return s.UpdateJob(missing); },
                     "storing job-404 (expected NotFound)");
  zbpp::v1::Job job;
  job.set_id("job-2");
  (*writer)->Enqueue([job](Store& s) { return s.CreateJob(job); },
                     "creating job-2");
  (*writer)->Flush();
  EXPECT_TRUE(store->GetJob("job-2").ok());
}

TEST(StoreWriterTest, DestructorAppliesEverythingQueued) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  zbpp::v1::Job job;
  job.set_id("j");
  ASSERT_TRUE(store->CreateJob(job).ok());
  {
    auto writer = StoreWriter::Create({store.get()});
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 50; ++i) {
      zbpp::v1::StepSummary summary;
      summary.set_step(i);
      (*writer)->Enqueue(
          [summary](Store& s) { return s.AddStepSummary("j", summary); },
          "storing a step summary");
    }
  }
  EXPECT_EQ(store->ListStepSummaries("j", 0, 100)->size(), 50u);
}

}  // namespace
}  // namespace zbpp::coordinator
