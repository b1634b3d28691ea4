#include "metrics/connection_caps.h"

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::metrics {
namespace {

using ::testing::Eq;
using ::testing::Optional;

TEST(ConnectionCapsTest, UnderTheCapsNothingIsClosed) {
  ConnectionCaps caps(/*max_connections=*/4, /*max_per_client=*/2);
  EXPECT_EQ(caps.Open(1, "a"), std::nullopt);
  EXPECT_EQ(caps.Open(2, "a"), std::nullopt);
  EXPECT_EQ(caps.Open(3, "b"), std::nullopt);
  EXPECT_EQ(caps.open(), 3);
}

TEST(ConnectionCapsTest, PastTheClientsCapItsOldestIdleConnectionCloses) {
  ConnectionCaps caps(4, 2);
  ASSERT_EQ(caps.Open(1, "b"), std::nullopt);
  ASSERT_EQ(caps.Open(2, "a"), std::nullopt);
  ASSERT_EQ(caps.Open(3, "a"), std::nullopt);
  // Connection 1 is older but another client's: never closed for "a".
  EXPECT_THAT(caps.Open(4, "a"), Optional(Eq(2u)));
  EXPECT_EQ(caps.open(), 3);
  EXPECT_THAT(caps.Open(5, "a"), Optional(Eq(3u)));
}

TEST(ConnectionCapsTest, PastTheTotalCapTheOldestIdleConnectionOfAnyClientCloses) {
  ConnectionCaps caps(3, 2);
  ASSERT_EQ(caps.Open(1, "a"), std::nullopt);
  ASSERT_EQ(caps.Open(2, "b"), std::nullopt);
  ASSERT_EQ(caps.Open(3, "b"), std::nullopt);
  EXPECT_THAT(caps.Open(4, "c"), Optional(Eq(1u)));
  EXPECT_EQ(caps.open(), 3);
}

TEST(ConnectionCapsTest, ConnectionsInsideARequestAreSkippedThenTheNewcomerIsClosed) {
  ConnectionCaps caps(4, 2);
  ASSERT_EQ(caps.Open(1, "a"), std::nullopt);
  ASSERT_EQ(caps.Open(2, "a"), std::nullopt);
  caps.BeginRequest(1);
  EXPECT_THAT(caps.Open(3, "a"), Optional(Eq(2u)));
  caps.BeginRequest(3);
  EXPECT_THAT(caps.Open(4, "a"), Optional(Eq(4u))) << "every connection of a is busy";
  EXPECT_EQ(caps.open(), 2);
  caps.EndRequest(1);  // Kept alive, idle again.
  EXPECT_THAT(caps.Open(5, "a"), Optional(Eq(1u)));
}

TEST(ConnectionCapsTest, ClosedConnectionsFreeTheirPlace) {
  ConnectionCaps caps(2, 1);
  ASSERT_EQ(caps.Open(1, "a"), std::nullopt);
  caps.BeginRequest(1);
  ASSERT_THAT(caps.Open(2, "a"), Optional(Eq(2u)));
  caps.Close(2);  // The refused one, gone; nothing changes.
  caps.Close(1);
  EXPECT_EQ(caps.open(), 0);
  EXPECT_EQ(caps.Open(3, "a"), std::nullopt);
  caps.Close(99);  // Unknown: ignored.
  EXPECT_EQ(caps.open(), 1);
}

}  // namespace
}  // namespace zbpp::metrics
