// The order-strict communicator matches a pair's messages by position as
// NCCL does and fails loudly where NCCL would hang or mix tensors up; and
// issuing a schedule's messages in each rank's own action order instead of
// the derived pair order (scheduler/comm_order.h) fails on it.

#include "worker/comm/order_strict_communicator.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/comm_order.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"

namespace zbpp::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::Duration kPatience = absl::Seconds(10);

TEST(OrderStrictCommunicatorTest, MatchesInOrder) {
  OrderStrictGroup group = CreateOrderStrictGroup(2);
  auto s1 = group.ranks[0]->Send(at::full({3}, 1.0), 1, 5);
  auto s2 = group.ranks[0]->Send(at::full({3}, 2.0), 1, 6);
  at::Tensor first = at::zeros({3}), second = at::zeros({3});
  auto r1 = group.ranks[1]->Recv(first, 0, 5);
  auto r2 = group.ranks[1]->Recv(second, 0, 6);
  for (auto* op : {&s1, &s2, &r1, &r2}) {
    ASSERT_TRUE(op->ok()) << op->status();
    EXPECT_TRUE((**op)->Wait(kPatience).ok());
  }
  EXPECT_TRUE(at::equal(first, at::full({3}, 1.0)));
  EXPECT_TRUE(at::equal(second, at::full({3}, 2.0)));
  EXPECT_TRUE(group.check_idle().ok()) << group.check_idle();
}

// Receives posted in another order than the sends: a transport matching by
// tag (Gloo) would sort them out, NCCL would swap the tensors; the fake
// fails.
TEST(OrderStrictCommunicatorTest, ReceivesInAnotherOrderThanTheSendsFail) {
  OrderStrictGroup group = CreateOrderStrictGroup(2);
  auto s1 = group.ranks[0]->Send(at::full({3}, 1.0), 1, 5);
  auto s2 = group.ranks[0]->Send(at::full({3}, 2.0), 1, 6);
  auto r2 = group.ranks[1]->Recv(at::zeros({3}), 0, 6);
  ASSERT_TRUE(s1.ok() && s2.ok() && r2.ok());
  absl::Status s = (*r2)->Wait(kPatience);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("tag 5"), HasSubstr("tag 6"), HasSubstr("message #0")));
}

TEST(OrderStrictCommunicatorTest, ASendCompletesOnlyOnceItsReceiveIsPosted) {
  OrderStrictGroup group = CreateOrderStrictGroup(2);
  auto send = group.ranks[0]->Send(at::ones({2}), 1, 0);
  ASSERT_TRUE(send.ok());
  absl::Status early = (*send)->Wait(absl::Milliseconds(50));
  EXPECT_EQ(early.code(), absl::StatusCode::kDeadlineExceeded) << early;
  EXPECT_THAT(std::string(early.message()), HasSubstr("message #0"));
  at::Tensor in = at::zeros({2});
  auto recv = group.ranks[1]->Recv(in, 0, 0);
  ASSERT_TRUE(recv.ok());
  EXPECT_TRUE((*recv)->Wait(kPatience).ok());
  EXPECT_TRUE(group.check_idle().ok());
}

// Two ranks that both send first: NCCL would deadlock; the fake fails at
// once, naming both ranks and both messages, and so does every later op.
TEST(OrderStrictCommunicatorTest, BothSendingFirstIsAMismatchNamingBothMessages) {
  OrderStrictGroup group = CreateOrderStrictGroup(3);
  auto a = group.ranks[0]->Send(at::ones({2, 3}), 1, 7);
  auto b = group.ranks[1]->Send(at::ones({2, 3}), 0, 9);
  ASSERT_TRUE(a.ok() && b.ok());
  absl::Status failed = (*a)->Wait(kPatience);
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(failed.message()),
              AllOf(HasSubstr("order mismatch between ranks 0 and 1"), HasSubstr("message #0"),
                    HasSubstr("send to peer 1, tag 7"), HasSubstr("send to peer 0, tag 9")));
  EXPECT_EQ((*b)->Wait(kPatience).code(), absl::StatusCode::kFailedPrecondition);
  // Loud: other pairs fail from now on too.
  auto later = group.ranks[2]->Recv(at::zeros({1}), 0, 1);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->Wait(kPatience).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(group.check_idle().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(OrderStrictCommunicatorTest, ShapeMismatchFails) {
  OrderStrictGroup group = CreateOrderStrictGroup(2);
  auto send = group.ranks[0]->Send(at::ones({2, 3}), 1, 0);
  auto recv = group.ranks[1]->Recv(at::zeros({3, 2}), 0, 0);
  ASSERT_TRUE(send.ok() && recv.ok());
  absl::Status s = (*recv)->Wait(kPatience);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("[2, 3] Float"), HasSubstr("[3, 2] Float")));
}

TEST(OrderStrictCommunicatorTest, AnUnmatchedReceiveIsReportedByCheckIdle) {
  OrderStrictGroup group = CreateOrderStrictGroup(2);
  auto recv = group.ranks[1]->Recv(at::zeros({4}), 0, 3);
  ASSERT_TRUE(recv.ok());
  absl::Status idle = group.check_idle();
  EXPECT_EQ(idle.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(idle.message()), HasSubstr("rank 1 recv from peer 0, tag 3"));
}

TEST(OrderStrictCommunicatorTest, AbortReleasesAWaiter) {
  OrderStrictGroup group = CreateOrderStrictGroup(2);
  auto recv = group.ranks[1]->Recv(at::zeros({4}), 0, 3);
  ASSERT_TRUE(recv.ok());
  std::thread aborter([&] { group.ranks[1]->Abort(); });
  EXPECT_EQ((*recv)->Wait(kPatience).code(), absl::StatusCode::kAborted);
  aborter.join();
}

// Every rank issues all its messages of `schedule` (the passes are not
// run) in each pair's derived order, or in its own pass order, then waits
// for them; returns the first error.
absl::Status IssueSchedule(const sched::Schedule& schedule, const sched::PairOrders& orders,
                           bool by_pair_order) {
  OrderStrictGroup group = CreateOrderStrictGroup(schedule.stages);
  std::vector<absl::Status> errors(schedule.stages);
  std::vector<std::thread> threads;
  for (int r = 0; r < schedule.stages; ++r) {
    threads.emplace_back([&, r] {
      // Every message of rank r: where it goes in the issue order, its
      // direction, peer and tag (its index in the pair's order, the same on
      // both sides).
      struct Issue {
        int position;
        bool send;
        int peer;
        uint32_t tag;
      };
      std::vector<Issue> issues;
      for (const auto& [pair, messages] : orders) {
        for (size_t i = 0; i < messages.size(); ++i) {
          const sched::Message& m = messages[i];
          const auto tag = static_cast<uint32_t>(i);
          if (m.from == r) issues.push_back({by_pair_order ? int(i) : m.producer, true, m.to, tag});
          if (m.to == r) {
            issues.push_back({by_pair_order ? int(i) : m.consumer, false, m.from, tag});
          }
        }
      }
      // By pair order: each pair's list as derived (pairs are independent).
      // By action index: the rank's own pass order, as a naive executor
      // posting each message at its pass would.
      std::stable_sort(issues.begin(), issues.end(),
                       [](const Issue& a, const Issue& b) { return a.position < b.position; });
      std::vector<std::unique_ptr<PendingOp>> ops;
      for (const Issue& i : issues) {
        auto op = i.send ? group.ranks[r]->Send(at::ones({1}), i.peer, i.tag)
                         : group.ranks[r]->Recv(at::zeros({1}), i.peer, i.tag);
        if (!op.ok()) {
          errors[r] = op.status();
          return;
        }
        ops.push_back(*std::move(op));
      }
      for (auto& op : ops) {
        if (absl::Status st = op->Wait(kPatience); !st.ok()) {
          errors[r] = st;
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& st : errors) {
    if (!st.ok()) return st;
  }
  return group.check_idle();
}

// The derived order works for every registry schedule; each rank's own
// action order does not for some of them (it is what a transport matching
// by order punishes), and the fake says so.
TEST(OrderStrictCommunicatorTest, ActionIndexOrderFailsWhereTheDerivedOrderWorks) {
  int naive_failures = 0, cases = 0;
  for (const sched::ScheduleTraits& t : sched::AllSchedules()) {
    for (int p : {2, 4}) {
      absl::StatusOr<sched::Schedule> schedule = sched::Generate(
          t.name, sched::Problem::Uniform(p, t.default_chunks, 2 * p, sched::VirtualStageCost{}, 0.0));
      if (!schedule.ok()) continue;
      absl::StatusOr<sched::PairOrders> orders = sched::DerivePairOrders(*schedule);
      ASSERT_TRUE(orders.ok()) << orders.status();
      ++cases;
      EXPECT_TRUE(IssueSchedule(*schedule, *orders, /*by_pair_order=*/true).ok())
          << t.name << " p=" << p;
      const absl::Status naive = IssueSchedule(*schedule, *orders, /*by_pair_order=*/false);
      if (!naive.ok()) {
        ++naive_failures;
        EXPECT_EQ(naive.code(), absl::StatusCode::kFailedPrecondition) << naive;
        EXPECT_THAT(std::string(naive.message()), HasSubstr("order mismatch")) << naive;
      }
    }
  }
  EXPECT_GT(cases, 0);
  EXPECT_GT(naive_failures, 0) << "no registry schedule tells the two orders apart";
}

}  // namespace
}  // namespace zbpp::worker
