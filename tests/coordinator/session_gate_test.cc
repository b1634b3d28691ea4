// Session streams before their first message (coordinator/service/
// session_gate.h), on a FakeClock: bounded in number apart from the workers'
// open Sessions, and cancelled once their time is up. Without the gate a
// silent stream held a server thread for good; enough of them refused every
// unary call (a running job lost two attempts in 150 s).

#include "coordinator/service/session_gate.h"

#include <memory>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(SessionGateTest, SilentStreamsAreCappedAndCancelledAfterTheTimeout) {
  FakeClock clock;
  std::unique_ptr<SessionGate> gate =
      *SessionGate::Create({&clock, absl::Seconds(10), /*max_unopened=*/3});
  std::vector<int> cancelled(4, 0);
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<uint64_t> t = gate->Admit([&cancelled, i] { ++cancelled[i]; });
    ASSERT_TRUE(t.ok()) << t.status();
    tickets.push_back(*t);
    clock.Advance(absl::Seconds(1));
  }
  // The fourth silent stream is refused at once (its thread is freed).
  const absl::StatusOr<uint64_t> refused = gate->Admit([&cancelled] { ++cancelled[3]; });
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("SessionOpen"));
  // Stream 1 sends its SessionOpen: no longer counted, never cancelled.
  gate->Opened(tickets[1]);
  EXPECT_EQ(gate->unopened(), 2);
  EXPECT_TRUE(gate->Admit([&cancelled] { ++cancelled[3]; }).ok());
  // 9 s after stream 0 began: nothing is due yet.
  clock.Advance(absl::Seconds(6));
  EXPECT_EQ(gate->CancelExpired(), 0);
  // At 10 s stream 0 is cancelled; stream 2 (admitted 2 s later) at 12 s.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(gate->CancelExpired(), 1);
  EXPECT_EQ(cancelled, (std::vector<int>{1, 0, 0, 0}));
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(gate->CancelExpired(), 1);
  EXPECT_EQ(cancelled, (std::vector<int>{1, 0, 1, 0}));
  // A ticket opened after its cancellation changes nothing.
  gate->Opened(tickets[0]);
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(gate->CancelExpired(), 1);
  EXPECT_EQ(cancelled, (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(gate->unopened(), 0);
}

TEST(SessionGateTest, BadOptionsAreRefusedNamingThem) {
  FakeClock clock;
  EXPECT_THAT(SessionGate::Create({nullptr}).status().message(), HasSubstr("clock"));
  EXPECT_THAT(SessionGate::Create({&clock, absl::ZeroDuration()}).status().message(),
              HasSubstr("open_timeout"));
  EXPECT_THAT(SessionGate::Create({&clock, absl::Seconds(1), 0}).status().message(),
              HasSubstr("max_unopened"));
}

}  // namespace
}  // namespace zbpp::coordinator
