// The pair orders of messages for transports that match by order
// (scheduler/comm_order.h): derived for every schedule of the registry, and
// checked by a graph that a wrong order makes cyclic.

#include "scheduler/comm_order.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Schedule> Make(const std::string& name, int p, int m) {
  absl::StatusOr<ScheduleTraits> traits = FindSchedule(name);
  if (!traits.ok()) return traits.status();
  return Generate(name, Problem::Uniform(p, traits->default_chunks, m, StageCost{}, 0.0));
}

// Every message a schedule needs, counted from its placement: one per F
// whose next stage is on another worker, one per B or BW whose previous
// stage is.
int ExpectedMessages(const Schedule& s) {
  int count = 0;
  for (int stage = 0; stage + 1 < s.num_stages(); ++stage) {
    if (s.worker_of_stage[stage] != s.worker_of_stage[stage + 1]) count += 2 * s.microbatches;
  }
  return count;
}

// Every schedule of the registry, at several sizes, with its reductions
// placed for data parallelism too: each pair's messages in the derived
// order run to the end, every message is there once, and a worker's sends
// to one peer keep its own pass order.
TEST(CommOrderTest, DerivedOrdersOfEveryScheduleRunToTheEnd) {
  int checked = 0;
  for (const ScheduleTraits& traits : AllSchedules()) {
    for (int p : {2, 3, 4, 8}) {
      for (int m : {p, 2 * p, 3 * p}) {
        absl::StatusOr<Schedule> schedule = Make(traits.name, p, m);
        if (!schedule.ok()) continue;  // A size this schedule does not take.
        for (bool reductions : {false, true}) {
          Schedule s = *schedule;
          if (reductions) {
            StageCost cost;
            cost.reduce_seconds = 1.5;
            absl::StatusOr<Schedule> placed = PlaceReductions(
                Problem::Uniform(p, s.chunks, m, cost, 0.0), s, ReducePlacement::kSolved);
            ASSERT_TRUE(placed.ok()) << placed.status();
            s = *std::move(placed);
          }
          const std::string name = absl::StrCat(traits.name, " p=", p, " m=", m,
                                                reductions ? " with reductions" : "");
          absl::StatusOr<PairOrders> derived = DerivePairOrders(s);
          ASSERT_TRUE(derived.ok()) << name << ": " << derived.status();
          const PairOrders& orders = *derived;
          int messages = 0;
          for (const auto& [pair, list] : orders) {
            messages += static_cast<int>(list.size());
            for (int w : {pair.first, pair.second}) {
              int last = -1;
              for (const Message& msg : list) {
                if (msg.from != w) continue;
                EXPECT_GT(msg.producer, last) << name << ": worker " << w << "'s sends";
                last = msg.producer;
              }
            }
          }
          EXPECT_EQ(messages, ExpectedMessages(s)) << name;
          const absl::Status status = CheckPairOrders(s, orders);
          EXPECT_TRUE(status.ok()) << name << ": " << status;
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 2 * 4 * static_cast<int>(AllSchedules().size()))
      << "most schedules take most sizes";
}

// 1F1B on two workers: worker 0 sends each microbatch's activation and
// receives its gradient. Sending both activations first, then the
// gradients, runs (GPipe's order); putting microbatch 0's gradient first
// does not: worker 1 produces it only after consuming microbatch 0's
// activation, which waits behind it.
TEST(CommOrderTest, AnOrderThatMakesAWorkerWaitForItselfIsADeadlockNamingTheCycle) {
  absl::StatusOr<Schedule> schedule = Make("1f1b", 2, 2);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  absl::StatusOr<PairOrders> derived = DerivePairOrders(*schedule);
  ASSERT_TRUE(derived.ok()) << derived.status();
  PairOrders orders = *std::move(derived);
  ASSERT_EQ(orders.size(), 1u);
  std::vector<Message>& list = orders.begin()->second;
  ASSERT_EQ(list.size(), 4u);
  ASSERT_TRUE(CheckPairOrders(*schedule, orders).ok());

  auto is_gradient = [](const Message& m) { return m.from == 1; };
  std::stable_partition(list.begin(), list.end(), [&](const Message& m) { return !is_gradient(m); });
  EXPECT_TRUE(CheckPairOrders(*schedule, orders).ok()) << "activations first, then gradients";

  std::rotate(list.begin(), list.begin() + 2, list.begin() + 3);  // Gradient 0 first.
  ASSERT_TRUE(is_gradient(list.front()));
  const absl::Status status = CheckPairOrders(*schedule, orders);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("deadlocks"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("message 0F0 => 1F0"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("message 1B0 => 0B0"));
}

TEST(CommOrderTest, AMessageWhosePassesAreNotInTheScheduleIsInvalidArgument) {
  absl::StatusOr<Schedule> schedule = Make("zb-h1", 2, 2);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  absl::StatusOr<PairOrders> orders = DerivePairOrders(*schedule);
  ASSERT_TRUE(orders.ok()) << orders.status();
  orders->begin()->second.front().consumer = 1000;
  const absl::Status status = CheckPairOrders(*schedule, *orders);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("action #1000"));
}

}  // namespace
}  // namespace zbpp::sched
