// StoreWriter: writes applied one at a time in Enqueue order, Flush waits
// for them, a write refused for its record does not stop later ones, a
// storage failure is retried in order (later writes wait) and reported,
// the destructor drains and gives up on a store still failing.

#include "coordinator/core/store_writer.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/faulty_store.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::FaultyStore;

// Writes to `store`, retried within milliseconds.
StoreWriter::Options WritingTo(Store* store) {
  StoreWriter::Options options;
  options.store = store;
  options.initial_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(4);
  return options;
}

std::unique_ptr<SqliteStore> MemoryStore() {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Create({});
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

TEST(StoreWriterTest, NeedsAStore) {
  EXPECT_EQ(StoreWriter::Create({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::unique_ptr<SqliteStore> store = MemoryStore();
  StoreWriter::Options options = WritingTo(store.get());
  options.initial_backoff = absl::ZeroDuration();
  EXPECT_THAT(StoreWriter::Create(options).status().message(),
              HasSubstr("initial_backoff"));
  options = WritingTo(store.get());
  options.max_backoff = absl::Microseconds(1);
  EXPECT_THAT(StoreWriter::Create(options).status().message(),
              HasSubstr("max_backoff"));
  options = WritingTo(store.get());
  options.drain_timeout = -absl::Seconds(1);
  EXPECT_THAT(StoreWriter::Create(options).status().message(),
              HasSubstr("drain_timeout"));
}

TEST(StoreWriterTest, AppliesWritesInEnqueueOrder) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  auto writer = StoreWriter::Create(WritingTo(store.get()));
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
  ASSERT_TRUE((*writer)->Flush().ok());
  EXPECT_EQ((*writer)->GetHealth().pending, 0);
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) ASSERT_EQ(order[i], i + 1);
  // The last update decided is the one stored.
  EXPECT_EQ(store->GetJob("job-1")->steps_completed(), 500);
}

TEST(StoreWriterTest, EnqueueDoesNotWaitForASlowWrite) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  auto writer = StoreWriter::Create(WritingTo(store.get()));
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
  EXPECT_EQ((*writer)->GetHealth().pending, 2);
  release.Notify();
  ASSERT_TRUE((*writer)->Flush().ok());
  EXPECT_EQ(applied.load(), 2);
}

TEST(StoreWriterTest, AWriteRefusedForItsRecordDoesNotStopLaterOnes) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  auto writer = StoreWriter::Create(WritingTo(store.get()));
  ASSERT_TRUE(writer.ok());
  zbpp::v1::Job missing;
  missing.set_id("job-404");
  (*writer)->Enqueue([missing](Store& s) { return s.UpdateJob(missing); },
                     "storing job-404 (expected NotFound)");
  zbpp::v1::Job job;
  job.set_id("job-2");
  (*writer)->Enqueue([job](Store& s) { return s.CreateJob(job); },
                     "creating job-2");
  ASSERT_TRUE((*writer)->Flush().ok());
  EXPECT_TRUE(store->GetJob("job-2").ok());
  const StoreWriter::Health health = (*writer)->GetHealth();
  EXPECT_TRUE(health.healthy);
  EXPECT_EQ(health.refused, 1);
  EXPECT_EQ(health.failed_attempts, 0) << "a NotFound is not retried";
}

TEST(StoreWriterTest, RetriesAFailingWriteWithLaterOnesWaitingBehindIt) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  zbpp::v1::Job job;
  job.set_id("j");
  ASSERT_TRUE(store->CreateJob(job).ok());
  FaultyStore faulty(store.get());
  faulty.FailNextWrites(7);
  absl::Notification recovered;
  StoreWriter::Options options = WritingTo(&faulty);
  options.on_recovered = [&recovered] { recovered.Notify(); };
  auto writer = StoreWriter::Create(options);
  ASSERT_TRUE(writer.ok());
  for (int i = 0; i < 30; ++i) {
    zbpp::v1::StepSummary summary;
    summary.set_step(i);
    (*writer)->Enqueue([summary](Store& s) { return s.PutStepSummary("j", summary); },
                       "storing a step summary");
  }
  recovered.WaitForNotification();
  ASSERT_TRUE((*writer)->Flush().ok());
  auto steps = store->ListStepSummaries("j", 0, 100);
  ASSERT_EQ(steps->size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ((*steps)[i].step(), i);
  const StoreWriter::Health health = (*writer)->GetHealth();
  EXPECT_TRUE(health.healthy);
  EXPECT_EQ(health.failed_attempts, 7);
  EXPECT_EQ(health.pending, 0);
  EXPECT_TRUE(health.last_error.empty());
}

TEST(StoreWriterTest, FlushSaysTheStoreIsFailingInsteadOfWaiting) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  FaultyStore faulty(store.get());
  faulty.FailAllWrites(true);
  absl::Notification recovered;
  StoreWriter::Options options = WritingTo(&faulty);
  options.on_recovered = [&recovered] { recovered.Notify(); };
  auto writer = StoreWriter::Create(options);
  ASSERT_TRUE(writer.ok());
  zbpp::v1::Job job;
  job.set_id("j");
  (*writer)->Enqueue([job](Store& s) { return s.CreateJob(job); }, "storing job j");
  (*writer)->Enqueue([job](Store& s) { return s.UpdateJob(job); }, "updating job j");
  const absl::Status flushed = (*writer)->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(flushed.message(), HasSubstr("storing job j: UNAVAILABLE: injected fault"));
  StoreWriter::Health health = (*writer)->GetHealth();
  EXPECT_FALSE(health.healthy);
  EXPECT_FALSE((*writer)->Healthy());
  EXPECT_EQ(health.pending, 2);
  EXPECT_GE(health.failed_attempts, 1);
  EXPECT_THAT(health.last_error, HasSubstr("storing job j"));
  EXPECT_FALSE(store->GetJob("j").ok()) << "nothing got past the failing write";

  faulty.FailAllWrites(false);
  recovered.WaitForNotification();
  ASSERT_TRUE((*writer)->Flush().ok());
  EXPECT_TRUE(store->GetJob("j").ok());
  EXPECT_TRUE((*writer)->Healthy());
}

TEST(StoreWriterTest, DestructorGivesUpOnAStoreStillFailingAfterTheDrainTimeout) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  FaultyStore faulty(store.get());
  faulty.FailAllWrites(true);
  {
    StoreWriter::Options options = WritingTo(&faulty);
    options.drain_timeout = absl::Milliseconds(20);
    auto writer = StoreWriter::Create(options);
    ASSERT_TRUE(writer.ok());
    zbpp::v1::Job job;
    job.set_id("j");
    for (int i = 0; i < 3; ++i) {
      (*writer)->Enqueue([job](Store& s) { return s.CreateJob(job); }, "storing job j");
    }
  }  // Returns although the store never recovers.
  EXPECT_GE(faulty.failed(), 1);
  EXPECT_FALSE(store->GetJob("j").ok());
}

TEST(StoreWriterTest, DestructorAppliesEverythingQueued) {
  std::unique_ptr<SqliteStore> store = MemoryStore();
  zbpp::v1::Job job;
  job.set_id("j");
  ASSERT_TRUE(store->CreateJob(job).ok());
  {
    auto writer = StoreWriter::Create(WritingTo(store.get()));
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 50; ++i) {
      zbpp::v1::StepSummary summary;
      summary.set_step(i);
      (*writer)->Enqueue(
          [summary](Store& s) { return s.PutStepSummary("j", summary); },
          "storing a step summary");
    }
  }
  EXPECT_EQ(store->ListStepSummaries("j", 0, 100)->size(), 50u);
}

}  // namespace
}  // namespace zbpp::coordinator
