// common/clock.h: the fake clock moves only when told, from any thread.
#include "common/clock.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace zbpp {
namespace {

TEST(FakeClock, StartsAtAPlausibleTimeAndStandsStill) {
  FakeClock clock;
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000000000));
  EXPECT_EQ(clock.Now(), clock.Now());
}

TEST(FakeClock, AdvanceMovesByExactlyTheDuration) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_EQ(clock.Now() - start, absl::Milliseconds(1500));
  clock.Advance(absl::ZeroDuration());
  EXPECT_EQ(clock.Now() - start, absl::Milliseconds(1500));
}

TEST(FakeClock, ConcurrentAdvancesAllCount) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&clock] {
      for (int i = 0; i < 1000; ++i) clock.Advance(absl::Microseconds(1));
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(clock.Now() - start, absl::Microseconds(4000));
}

TEST(FakeClock, WorksThroughTheInterface) {
  FakeClock fake;
  Clock* clock = &fake;
  const absl::Time before = clock->Now();
  fake.Advance(absl::Seconds(10));
  EXPECT_EQ(clock->Now() - before, absl::Seconds(10));
}

TEST(RealClock, IsOneInstanceNearAbslNow) {
  Clock* clock = RealClock();
  ASSERT_NE(clock, nullptr);
  EXPECT_EQ(clock, RealClock());
  EXPECT_LT(absl::AbsDuration(clock->Now() - absl::Now()), absl::Seconds(5));
}

}  // namespace
}  // namespace zbpp
