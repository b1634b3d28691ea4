// The coordinator's rendezvous store (coordinator/core/rendezvous_store.h):
// no wait can pin a server thread, no scope can grow without bound.

#include "coordinator/core/rendezvous_store.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<RendezvousStore> Store(RendezvousStore::Options options = {}) {
  return *RendezvousStore::Create(options);
}

// A Get asking for 1e300 seconds (a client's wish, and no call deadline)
// ends at the store's cap.
TEST(RendezvousStoreTest, AWaitEndsAtTheCapWhateverItsDeadline) {
  RendezvousStore::Options options;
  options.max_wait = absl::Milliseconds(50);
  auto store = Store(options);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = store->Get("s", "k", absl::InfiniteFuture());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  absl::Status waited = store->Wait("s", {"k"}, absl::InfiniteFuture());
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// The client went away: the wait ends within the store's poll (1 s).
TEST(RendezvousStoreTest, AWaitEndsWhenItsCallerCancels) {
  auto store = Store();
  std::atomic<bool> cancelled{false};
  absl::Status status;
  std::thread waiter([&] {
    status = store->Wait("s", {"never"}, absl::InfiniteFuture(), [&] { return cancelled.load(); });
  });
  cancelled = true;
  waiter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
}

// The attempt ends: its scope goes, and the waits on it end at once.
TEST(RendezvousStoreTest, DeletingTheScopeEndsItsWaits) {
  auto store = Store();
  ASSERT_TRUE(store->Set("s", "a", "1").ok());
  absl::StatusOr<std::string> got;
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    got = store->Get("s", "never", absl::InfiniteFuture());
    done = true;
  });
  // A deletion before the waiter began would leave it waiting on a new,
  // empty scope: delete until it returns (the first deletion after it began
  // waiting ends it).
  while (!done) {
    store->DeleteScope("s");
    absl::SleepFor(absl::Milliseconds(1));
  }
  waiter.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("ended"));
  EXPECT_EQ(store->KeyCount("s"), 0);
}

TEST(RendezvousStoreTest, AScopeIsBoundedInKeysAndBytes) {
  RendezvousStore::Options options;
  options.max_keys_per_scope = 3;
  options.max_scope_bytes = 100;
  auto store = Store(options);
  ASSERT_TRUE(store->Set("s", "a", "1").ok());
  ASSERT_TRUE(store->Set("s", "b", "2").ok());
  ASSERT_TRUE(*store->Add("s", "c", 1) == 1);
  absl::Status full = store->Set("s", "d", "4");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("3 keys, limit 3"));
  EXPECT_TRUE(store->Set("s", "a", "replaced").ok()) << "replacing a key adds none";
  EXPECT_TRUE(store->Set("other", "d", "4").ok()) << "limits are per scope";
  absl::Status big = store->Set("s", "a", std::string(200, 'x'));
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(big.message()), HasSubstr("bytes, limit 100"));
  EXPECT_EQ(*store->Get("s", "a", absl::InfinitePast()), "replaced") << "a refused set changes nothing";
  EXPECT_EQ(store->CompareSet("s", "b", "2", std::string(200, 'y')).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(store->Delete("s", "b"));
  EXPECT_TRUE(store->Set("s", "d", "4").ok()) << "a deleted key frees its room";
}

}  // namespace
}  // namespace zbpp::coordinator
