#include "metrics/connection_caps.h"

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::metrics {
namespace {

using ::testing::Eq;
using ::testing::Optional;

// Opens connections 1, 2, ... from `clients` in that order, none of which
// may close anything.
void OpenAll(ConnectionCaps& caps, std::initializer_list<const char*> clients) {
  uint64_t id = 0;
  for (const char* client : clients) ASSERT_EQ(caps.Open(++id, client), std::nullopt) << id;
}

TEST(ConnectionCapsTest, UnderTheCapsNothingIsClosed) {
  ConnectionCaps caps(/*max_connections=*/4, /*max_per_client=*/2);
  OpenAll(caps, {"a", "a", "b"});
  EXPECT_EQ(caps.open(), 3);
}

TEST(ConnectionCapsTest, PastTheClientsCapItsOldestIdleConnectionCloses) {
  ConnectionCaps caps(4, 2);
  OpenAll(caps, {"b", "a", "a"});
  // Connection 1 is older but another client's: never closed for "a".
  EXPECT_THAT(caps.Open(4, "a"), Optional(Eq(2u)));
  EXPECT_EQ(caps.open(), 3);
  EXPECT_THAT(caps.Open(5, "a"), Optional(Eq(3u)));
}

TEST(ConnectionCapsTest, PastTheTotalCapTheOldestIdleConnectionOfAnyClientCloses) {
  ConnectionCaps caps(3, 2);
  OpenAll(caps, {"a", "b", "b"});
  EXPECT_THAT(caps.Open(4, "c"), Optional(Eq(1u)));
  EXPECT_EQ(caps.open(), 3);
}

TEST(ConnectionCapsTest, ConnectionsInsideARequestAreSkippedThenTheNewcomerIsClosed) {
  ConnectionCaps caps(4, 2);
  OpenAll(caps, {"a", "a"});
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
  OpenAll(caps, {"a"});
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
