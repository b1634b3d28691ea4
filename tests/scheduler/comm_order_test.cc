// The pair orders of messages for transports that match by order
// (scheduler/comm_order.h): derived for every schedule of the registry, and
// checked by a graph that a wrong order makes cyclic; and the speculative
// prefixes of post-update validation checked against those orders.

#include "scheduler/comm_order.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::sched {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::zbpp::sched::testing::ScheduleFromRows;

absl::StatusOr<Schedule> Make(const std::string& name, int p, int m) {
  absl::StatusOr<ScheduleTraits> traits = FindSchedule(name);
  if (!traits.ok()) return traits.status();
  return Generate(name, Problem::Uniform(p, traits->default_chunks, m, VirtualStageCost{}, 0.0));
}

// Every message a schedule needs, counted from its placement: one per F
// whose next virtual stage is on another stage, one per B or BW whose previous
// virtual stage is.
int ExpectedMessages(const Schedule& s) {
  int count = 0;
  for (int virtual_stage = 0; virtual_stage + 1 < s.num_virtual_stages(); ++virtual_stage) {
    if (s.stage_of[virtual_stage] != s.stage_of[virtual_stage + 1]) count += 2 * s.microbatches;
  }
  return count;
}

// Every schedule of the registry, at several sizes, with its reductions
// placed for data parallelism too: each pair's messages in the derived
// order run to the end, every message is there once, and a stage's sends
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
            VirtualStageCost cost;
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
                EXPECT_GT(msg.producer, last) << name << ": stage " << w << "'s sends";
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

// 1F1B on two stages: stage 0 sends each microbatch's activation and
// receives its gradient. Sending both activations first, then the
// gradients, runs (GPipe's order); putting microbatch 0's gradient first
// does not: stage 1 produces it only after consuming microbatch 0's
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

// CheckSpeculativePrefixes on the orders derived from `schedule`, once they
// are known to run (CheckPairOrders), so that only the prefixes can fail.
absl::Status CheckDerivedPrefixes(const Schedule& schedule) {
  absl::StatusOr<PairOrders> orders = DerivePairOrders(schedule);
  if (!orders.ok()) return orders.status();
  if (absl::Status runs = CheckPairOrders(schedule, *orders); !runs.ok()) return runs;
  return CheckSpeculativePrefixes(schedule, *orders);
}

// The rule names of CheckSpeculativePrefixes' errors.
constexpr char kNotClosed[] = "prefix not closed";
constexpr char kNotLeading[] = "prefix messages not leading";

TEST(SpeculativePrefixTest, APrefixEndsBeforeTheFirstBOrBWAndIsTheWholeListWithoutOne) {
  const Schedule s = ScheduleFromRows("hand", 3, 1, 2, Placement::kLoop,
                                      {{"0F0", "0F1", "0I0", "0F2", "0W0"},
                                       {"1F0", "1B0", "1F1"},
                                       {"2F0", "2F1"}});
  EXPECT_EQ(SpeculativePrefixLengths(s), (std::vector<int>{2, 1, 2}));
  EXPECT_TRUE(SpeculativePrefixLengths(Schedule{}).empty());
}

// Vocabulary passes (p = 3, L = 2 on stage 2): F of L sends to the S of
// both other stages, each S to the T of both others, and 2I0 receives one T
// from each. Unit costs: 0F0 [0,1], 1F0 [1,2], 2F0 [2,3], S [3,4], T [4,5],
// 2I0 [5,6], 1I0 [6,7]. Every prefix ends at its T (index 2), so the S
// passes' messages lead.
TEST(CommOrderTest, VocabularyPassesSendToEveryStageInUnitCostOrder) {
  const Schedule s = ScheduleFromRows("hand", 3, 1, 1, Placement::kLoop,
                                      {{"0F0", "2S0", "2T0", "0I0", "0W0"},
                                       {"1F0", "2S0", "2T0", "1I0", "1W0"},
                                       {"2F0", "2S0", "2T0", "2I0", "2W0"}});
  EXPECT_EQ(SpeculativePrefixLengths(s), (std::vector<int>{2, 2, 2}));
  absl::StatusOr<PairOrders> orders = DerivePairOrders(s);
  ASSERT_TRUE(orders.ok()) << orders.status();
  using Row = std::tuple<int, int, int, int>;  // from, to, producer, consumer
  std::map<std::pair<int, int>, std::vector<Row>> got;
  for (const auto& [pair, list] : *orders) {
    for (const Message& m : list) got[pair].push_back({m.from, m.to, m.producer, m.consumer});
  }
  const std::map<std::pair<int, int>, std::vector<Row>> want = {
      {{0, 1}, {{0, 1, 0, 0}, {0, 1, 1, 2}, {1, 0, 1, 2}, {1, 0, 3, 3}}},
      {{0, 2}, {{2, 0, 0, 1}, {0, 2, 1, 2}, {2, 0, 1, 2}, {0, 2, 2, 3}}},
      {{1, 2},
       {{1, 2, 0, 0}, {2, 1, 0, 1}, {1, 2, 1, 2}, {2, 1, 1, 2}, {1, 2, 2, 3}, {2, 1, 3, 3}}},
  };
  EXPECT_EQ(got, want);
  EXPECT_TRUE(CheckPairOrders(s, *orders).ok());
  EXPECT_TRUE(CheckSpeculativePrefixes(s, *orders).ok());
}

// A T ends the prefix and an S does not: stage 1 (L's) runs S of
// microbatch 1 in its prefix, whose input, F of L, is its own; stage 0's
// prefix runs 1S1 too, fed by stage 1's 1F1 from its prefix, while a
// stage whose T comes before F of L's next microbatch leaves it out.
TEST(SpeculativePrefixTest, APrefixHoldsSPassesAndEndsAtTheFirstT) {
  const Schedule s = ScheduleFromRows(
      "hand", 2, 1, 2, Placement::kLoop,
      {{"0F0", "0F1", "1S0", "1S1", "1T0", "0I0", "1T1", "0W0", "0I1", "0W1"},
       {"1F0", "1S0", "1F1", "1S1", "1T0", "1I0", "1T1", "1W0", "1I1", "1W1"}});
  EXPECT_EQ(SpeculativePrefixLengths(s), (std::vector<int>{4, 4}));
  absl::StatusOr<PairOrders> orders = DerivePairOrders(s);
  ASSERT_TRUE(orders.ok()) << orders.status();
  EXPECT_TRUE(CheckPairOrders(s, *orders).ok());
  EXPECT_TRUE(CheckSpeculativePrefixes(s, *orders).ok());

  // Stage 1 runs its T of microbatch 0 before F of L for microbatch 1: stage
  // 0's prefix consumes 1F1, which is not in stage 1's.
  const Schedule late = ScheduleFromRows(
      "hand", 2, 1, 2, Placement::kLoop,
      {{"0F0", "0F1", "1S0", "1S1", "1T0", "0I0", "1T1", "0W0", "0I1", "0W1"},
       {"1F0", "1S0", "1T0", "1F1", "1S1", "1I0", "1T1", "1W0", "1I1", "1W1"}});
  EXPECT_EQ(SpeculativePrefixLengths(late), (std::vector<int>{4, 2}));
  orders = DerivePairOrders(late);
  ASSERT_TRUE(orders.ok()) << orders.status();
  EXPECT_THAT(std::string(CheckSpeculativePrefixes(late, *orders).message()),
              AllOf(HasSubstr("stage 0 runs 1S1 in its speculative prefix, but its input comes "
                              "from stage 1's 1F1, which follows that stage's first B (1T0)"),
                    HasSubstr(kNotClosed)));
}

// Each pair's messages of `orders` produced in a speculative prefix moved,
// in their order, before the others.
PairOrders PrefixMessagesFirst(const Schedule& schedule, PairOrders orders) {
  const std::vector<int> prefix = SpeculativePrefixLengths(schedule);
  for (auto& [pair, list] : orders) {
    std::stable_partition(list.begin(), list.end(),
                          [&](const Message& m) { return m.producer < prefix[m.from]; });
  }
  return orders;
}

// `orders` with each pair's messages sorted by the end of their producing
// pass in `schedule` simulated with unit costs, then by sender, then by the
// producer's position: DerivePairOrders' order without its prefix messages
// put first (the order it derived before they were).
PairOrders ByUnitCostEnd(const Schedule& schedule, PairOrders orders) {
  absl::StatusOr<SimulationResult> sim = Simulate(
      Problem::Uniform(schedule.stages, schedule.chunks, schedule.microbatches, VirtualStageCost{}, 0),
      schedule);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return orders;
  for (auto& [pair, list] : orders) {
    std::sort(list.begin(), list.end(), [&](const Message& x, const Message& y) {
      return std::make_tuple(sim->timings[x.from][x.producer].end_seconds, x.from, x.producer) <
             std::make_tuple(sim->timings[y.from][y.producer].end_seconds, y.from, y.producer);
    });
  }
  return orders;
}

// A pair's messages in their text form ("0F3 => 1F3"), in order.
std::vector<std::string> MessageTexts(const Schedule& schedule, const std::vector<Message>& list) {
  std::vector<std::string> texts;
  for (const Message& m : list) {
    texts.push_back(absl::StrCat(ActionToString(schedule.actions[m.from][m.producer]), " => ",
                                 ActionToString(schedule.actions[m.to][m.consumer])));
  }
  return texts;
}

// Every pair's messages of `orders` in their text form, to compare orders.
std::map<std::pair<int, int>, std::vector<std::string>> OrderTexts(const Schedule& schedule,
                                                                   const PairOrders& orders) {
  std::map<std::pair<int, int>, std::vector<std::string>> texts;
  for (const auto& [pair, list] : orders) texts[pair] = MessageTexts(schedule, list);
  return texts;
}

// Every schedule of the registry at p in {2, 3, 4, 8}, m in {p, 2p}, each
// chunk count in {1, 2} its generator takes, with and without data-parallel
// reductions: with the order DerivePairOrders derives, every one runs
// (CheckPairOrders) and its speculative prefixes can run ahead
// (CheckSpeculativePrefixes), the V schedules (zb-v, v-half, v-min,
// dualpipe-v) included. Checked by hand where a proof is short:
//  * No one-chunk schedule breaks rule (a): the F whose activation stage
//    r+1 consumes in its prefix precedes stage r's first B, which waits for
//    a gradient that stage r+1 sends only after its whole prefix.
//  * Rule (b) holds for every order DerivePairOrders derives: it puts each
//    pair's prefix messages first. Where rule (a) holds, that order stays
//    deadlock-free: a prefix message then waits only for prefix passes and
//    earlier prefix messages.
//  * GPipe's, 1F1B's and ZB-H1's prefixes are forwards only; their unit-cost
//    order (ByUnitCostEnd) already has the prefix messages leading: stage
//    r's prefix forwards run back to back from t = r and end by t = p (GPipe:
//    r + m); the first gradient stage r+1 sends needs the last virtual stage's
//    first B, which starts at p (GPipe: p - 1 + m) at the earliest.
//  * That unit-cost order breaks rule (b) for ZB-V at p = 2, m = 2
//    (0F0 0F1 3F0 3I0 ... / 1F0 2F0 1F1 2F1 2I0 ...): stage 0's first B
//    3I0 and stage 1's last prefix forward 2F1 both end at t = 5, and the
//    tie goes to the lower sender.
//  * Reductions change nothing: they are not messages, and they follow a
//    virtual stage's last W, so no prefix holds one.
// The schedules whose unit-cost order breaks rule (b) are recorded in the
// test's properties (unit_cost_order_not_leading: "name p m v" of each, or
// "none").
TEST(SpeculativePrefixTest, EveryScheduleOfTheRegistryPassesWithTheDerivedOrder) {
  std::vector<std::string> unit_cost_not_leading;
  std::set<std::string> names;
  bool zb_v_checked = false;
  for (const ScheduleTraits& traits : AllSchedules()) {
    for (int p : {2, 3, 4, 8}) {
      for (int m : {p, 2 * p}) {
        for (int v : {1, 2}) {
          absl::StatusOr<Schedule> schedule =
              Generate(traits.name, Problem::Uniform(p, v, m, VirtualStageCost{}, 0.0));
          if (!schedule.ok()) continue;  // A size this schedule does not take.
          names.insert(traits.name);
          const std::string name = absl::StrCat(traits.name, " p=", p, " m=", m, " v=", v);
          absl::StatusOr<PairOrders> orders = DerivePairOrders(*schedule);
          ASSERT_TRUE(orders.ok()) << name << ": " << orders.status();
          const absl::Status runs = CheckPairOrders(*schedule, *orders);
          EXPECT_TRUE(runs.ok()) << name << ": " << runs;
          const absl::Status status = CheckSpeculativePrefixes(*schedule, *orders);
          EXPECT_TRUE(status.ok()) << name << ": " << status;

          // The derived order is the unit-cost order with each pair's prefix
          // messages moved to its front.
          const PairOrders unit_cost = ByUnitCostEnd(*schedule, *orders);
          EXPECT_EQ(OrderTexts(*schedule, PrefixMessagesFirst(*schedule, unit_cost)),
                    OrderTexts(*schedule, *orders))
              << name;
          EXPECT_TRUE(CheckPairOrders(*schedule, unit_cost).ok()) << name << ", unit-cost order";
          const absl::Status unit_cost_status = CheckSpeculativePrefixes(*schedule, unit_cost);
          const std::string message(unit_cost_status.message());
          EXPECT_THAT(message, Not(HasSubstr(kNotClosed))) << name << ", unit-cost order";
          if (!unit_cost_status.ok()) {
            unit_cost_not_leading.push_back(absl::StrCat(traits.name, " ", p, " ", m, " ", v));
            EXPECT_EQ(unit_cost_status.code(), absl::StatusCode::kFailedPrecondition)
                << name << ": " << unit_cost_status;
            EXPECT_THAT(message, HasSubstr(kNotLeading)) << name;
          }
          if (traits.name == "gpipe" || traits.name == "1f1b" || traits.name == "zb-h1") {
            EXPECT_TRUE(unit_cost_status.ok()) << name << ": " << unit_cost_status;
            const std::vector<int> prefix = SpeculativePrefixLengths(*schedule);
            for (int r = 0; r < p; ++r) {
              for (int j = 0; j < prefix[r]; ++j) {
                EXPECT_EQ(schedule->actions[r][j].kind, PassKind::kF) << name << " stage " << r;
              }
            }
          }
          if (traits.name == "zb-v" && p == 2 && m == 2) {
            zb_v_checked = true;
            EXPECT_EQ(message,
                      "stages 0 and 1: message 2F1 => 3F1 comes from stage 1's speculative "
                      "prefix, but in the pair's order it follows message 3I0 => 2I0, which "
                      "stage 0 sends at or after its first B (3I0): prefix messages not leading");
          }

          VirtualStageCost cost;
          cost.reduce_seconds = 1.5;
          absl::StatusOr<Schedule> reduced = PlaceReductions(
              Problem::Uniform(p, v, m, cost, 0.0), *schedule, ReducePlacement::kSolved);
          ASSERT_TRUE(reduced.ok()) << name << ": " << reduced.status();
          EXPECT_EQ(SpeculativePrefixLengths(*reduced), SpeculativePrefixLengths(*schedule))
              << name;
          const absl::Status reduced_status = CheckDerivedPrefixes(*reduced);
          EXPECT_TRUE(reduced_status.ok()) << name << " with reductions: " << reduced_status;
        }
      }
    }
  }
  EXPECT_EQ(names.size(), AllSchedules().size()) << "every schedule takes some size";
  EXPECT_TRUE(zb_v_checked) << "zb-v takes p = 2, m = 2";
  RecordProperty("unit_cost_order_not_leading",
                 unit_cost_not_leading.empty() ? std::string("none")
                                               : absl::StrJoin(unit_cost_not_leading, ", "));
}

// A V on two stages (stage 0 holds virtual stages 0 and 3, stage 1 virtual stages 1
// and 2) where stage 0 starts microbatch 1 only after microbatch 0's
// backward of the last virtual stage: stage 1's prefix runs 1F1, whose input 0F1
// stage 0 produces after its first B. Rule (b) holds: stage 1's 1F1 feeds
// its own 2F1, so the prefixes' only messages (0F0, 2F0) lead the order.
TEST(SpeculativePrefixTest, APrefixThatConsumesWhatFollowsTheSendersPrefixIsNotClosed) {
  const Schedule s = ScheduleFromRows(
      "hand", 2, 2, 2, Placement::kV,
      {{"0F0", "3F0", "3B0", "0F1", "3F1", "3B1", "0B0", "0B1"},
       {"1F0", "2F0", "1F1", "2B0", "2F1", "2B1", "1B0", "1B1"}});
  EXPECT_EQ(SpeculativePrefixLengths(s), (std::vector<int>{2, 3}));
  const absl::Status status = CheckDerivedPrefixes(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(status.message(),
            "stage 1 runs 1F1 in its speculative prefix, but its input comes from stage 0's "
            "0F1, which follows that stage's first B (3B0): prefix not closed");
}

// Stage 0 runs all four forwards before its first B (a long warm-up),
// stage 1 alternates F and B: its first input gradient 1I0 ends at t = 3
// in the unit-cost simulation, before stage 0's last prefix forward 0F3
// (t = 4). DerivePairOrders puts 0F3's activation before 1I0's gradient; an
// order that puts it after (as sorting by those end times alone would) runs,
// but both ranks would have to issue the receive of 1I0's gradient before
// the send of 0F3's activation, a receive that a discard cannot take back.
// The prefixes themselves are closed: stage 1's holds 1F0 only.
TEST(SpeculativePrefixTest, APrefixMessageAfterAMessageOfTheRestOfTheStepIsNotLeading) {
  const Schedule s = ScheduleFromRows(
      "hand", 2, 1, 4, Placement::kLoop,
      {{"0F0", "0F1", "0F2", "0F3", "0I0", "0I1", "0I2", "0I3", "0W0", "0W1", "0W2", "0W3"},
       {"1F0", "1I0", "1F1", "1I1", "1F2", "1I2", "1F3", "1I3", "1W0", "1W1", "1W2", "1W3"}});
  EXPECT_EQ(SpeculativePrefixLengths(s), (std::vector<int>{4, 1}));
  absl::StatusOr<PairOrders> derived = DerivePairOrders(s);
  ASSERT_TRUE(derived.ok()) << derived.status();
  ASSERT_EQ(derived->size(), 1u);
  EXPECT_EQ(MessageTexts(s, derived->begin()->second),
            (std::vector<std::string>{"0F0 => 1F0", "0F1 => 1F1", "0F2 => 1F2", "0F3 => 1F3",
                                      "1I0 => 0I0", "1I1 => 0I1", "1I2 => 0I2", "1I3 => 0I3"}));
  EXPECT_TRUE(CheckPairOrders(s, *derived).ok());
  EXPECT_TRUE(CheckSpeculativePrefixes(s, *derived).ok());

  // 1I0's gradient moved before 0F3's activation: still runs, not leading.
  PairOrders orders = *derived;
  std::vector<Message>& list = orders.begin()->second;
  std::swap(list[3], list[4]);
  ASSERT_EQ(MessageTexts(s, list)[3], "1I0 => 0I0");
  EXPECT_TRUE(CheckPairOrders(s, orders).ok());
  const absl::Status status = CheckSpeculativePrefixes(s, orders);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(status.message(),
            "stages 0 and 1: message 0F3 => 1F3 comes from stage 0's speculative prefix, but "
            "in the pair's order it follows message 1I0 => 0I0, which stage 1 sends at or "
            "after its first B (1I0): prefix messages not leading");
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr(kNotClosed)));
}

// Both rules broken: one error names both, each with how many messages
// break it. Stage 0's prefix runs 2F2 and 2F3 on activations stage 1
// produces after its first B 3B0 (not closed). DerivePairOrders' order, with
// the prefix messages first, then queues 2F2's activation before the 1F2
// one that 2F2 waits for and deadlocks; moving 1F2's and 1F3's activations
// before 2F2's runs, but then 2F2's and 2F3's prefix activations follow
// messages sent after 3B0 (not leading).
TEST(SpeculativePrefixTest, BothRulesBrokenAreBothNamed) {
  const Schedule s = ScheduleFromRows(
      "hand", 2, 2, 4, Placement::kLoop,
      {{"0F0", "0F1", "0F2", "0F3", "2F0", "2F1", "2F2", "2F3", "2B0", "2B1", "2B2", "2B3",
        "0B0", "0B1", "0B2", "0B3"},
       {"1F0", "1F1", "3F0", "3B0", "1F2", "1F3", "3F1", "3B1", "3F2", "3B2", "3F3", "3B3",
        "1B0", "1B1", "1B2", "1B3"}});
  EXPECT_EQ(SpeculativePrefixLengths(s), (std::vector<int>{8, 3}));
  absl::StatusOr<PairOrders> derived = DerivePairOrders(s);
  ASSERT_TRUE(derived.ok()) << derived.status();
  ASSERT_EQ(derived->size(), 1u);
  const absl::Status deadlock = CheckPairOrders(s, *derived);
  EXPECT_EQ(deadlock.code(), absl::StatusCode::kFailedPrecondition) << deadlock;
  EXPECT_THAT(std::string(deadlock.message()),
              AllOf(HasSubstr("deadlocks"), HasSubstr("message 1F2 => 2F2")));

  PairOrders orders = *derived;
  std::vector<Message>& list = orders.begin()->second;
  const std::vector<std::string> texts = MessageTexts(s, list);
  const auto at = [&](const std::string& text) {
    return static_cast<int>(std::find(texts.begin(), texts.end(), text) - texts.begin());
  };
  const int f2 = at("2F2 => 3F2"), one_f2 = at("1F2 => 2F2"), one_f3 = at("1F3 => 2F3");
  ASSERT_EQ(one_f3, one_f2 + 1);
  ASSERT_LT(f2, one_f2);
  std::rotate(list.begin() + f2, list.begin() + one_f2, list.begin() + one_f3 + 1);
  ASSERT_EQ(MessageTexts(s, list)[f2], "1F2 => 2F2");
  ASSERT_EQ(MessageTexts(s, list)[f2 + 2], "2F2 => 3F2");
  const absl::Status runs = CheckPairOrders(s, orders);
  EXPECT_TRUE(runs.ok()) << runs;

  const absl::Status status = CheckSpeculativePrefixes(s, orders);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(status.message(),
            "stage 0 runs 2F2 in its speculative prefix, but its input comes from stage 1's "
            "1F2, which follows that stage's first B (3B0): prefix not closed (2 messages "
            "break this rule); stages 0 and 1: message 2F2 => 3F2 comes from stage 0's "
            "speculative prefix, but in the pair's order it follows message 1F2 => 2F2, which "
            "stage 1 sends at or after its first B (3B0): prefix messages not leading "
            "(2 messages break this rule)");
}

TEST(SpeculativePrefixTest, AMessageWhosePassesAreNotInTheScheduleIsInvalidArgument) {
  absl::StatusOr<Schedule> schedule = Make("1f1b", 2, 2);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  absl::StatusOr<PairOrders> orders = DerivePairOrders(*schedule);
  ASSERT_TRUE(orders.ok()) << orders.status();
  ASSERT_TRUE(CheckSpeculativePrefixes(*schedule, *orders).ok());
  orders->begin()->second.back().to = 7;
  const absl::Status status = CheckSpeculativePrefixes(*schedule, *orders);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("stage 7"));
}

}  // namespace
}  // namespace zbpp::sched
