// The automatic solver against the Zero Bubble authors' published schedule
// generators (bench/results/solver.md): never worse than the bubble rates
// they publish for the cases where zbpp used to lose, never longer than
// their generators (re-implemented in authors_generators.h) over the
// comparison grid and the grid with communication, and, over the whole
// comparison grid, never worse than any one of the candidate constructions
// it searches (so that a regression in the search fails here).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "scheduler/zb_greedy.h"
#include "scheduler/zb_handcrafted.h"
#include "scheduler/zb_orders.h"
#include "scheduler/zb_vblocks.h"
#include "scheduler/testing/authors_generators.h"
#include "scheduler/testing/solver_grid.h"

namespace zbpp::sched {
namespace {

using internal::Evaluator;
using internal::Orders;
using internal::PassModel;
using testing::GridCostModels;
using testing::GridProblem;
using testing::kGridSchedules;
using testing::kReferenceCases;
using testing::WithOwnLimit;

// The makespan of every candidate construction of the solver (zb_auto.h)
// that is complete and fits `problem`'s limit: the paper's greedy and the
// list scheduler under all of their choices, ZB-H1/H2 (one chunk), the
// round-based V greedy, ZB-V's pattern and the V building blocks of every
// pace, plain and squeezed, with their W's as built and re-placed.
std::vector<double> CandidateMakespans(const Problem& problem,
                                       Placement placement) {
  const PassModel model(
      problem, PlaceVirtualStages(placement, problem.stages, problem.chunks));
  Evaluator evaluator(model);
  std::vector<double> makespans;
  auto add = [&](const Orders& orders) {
    const internal::OrderCost cost = evaluator.Run(orders);
    if (cost.complete && cost.fits_memory) makespans.push_back(cost.makespan);
  };
  auto add_pattern = [&](const Orders& orders) {
    add(orders);
    for (bool fill_partial : {false, true}) {
      Orders retimed;
      if (internal::RetimeW(model, orders, fill_partial, &retimed)) {
        add(retimed);
      }
    }
  };
  Orders orders;
  for (int bits = 0; bits < 8; ++bits) {
    internal::GreedyChoices choices;
    choices.bubble_before_first_b = (bits & 1) != 0;
    choices.favour_b = (bits & 2) != 0;
    choices.fill_partial_gaps = (bits & 4) != 0;
    if (placement == Placement::kLoop &&
        internal::LoopGreedy(model, choices, &orders)) {
      add(orders);
    }
    if (internal::ListGreedy(
            model, {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0},
            &orders)) {
      add(orders);
    }
  }
  if (placement == Placement::kLoop) {
    for (auto* generate : {&GenerateZbH1, &GenerateZbH2}) {
      const absl::StatusOr<Schedule> seed = generate(problem);
      if (seed.ok() && internal::FromSchedule(model, *seed, &orders)) {
        add_pattern(orders);
      }
    }
    return makespans;
  }
  for (int bits = 0; bits < 4; ++bits) {
    if (internal::VRoundGreedy(model, {(bits & 1) != 0, (bits & 2) != 0}, {},
                               &orders)) {
      add(orders);
    }
  }
  add_pattern(internal::ZbVOrders(model));
  for (int pace = 1; pace <= 3; ++pace) {
    std::vector<internal::VTurnDelays> delays =
        internal::VTurnDelayOptions(problem.stages, pace, 2);
    if (delays.size() > 4) delays.resize(4);
    for (const internal::VTurnDelays& d : delays) {
      add_pattern(internal::VBlockOrders(model, pace, d));
      add_pattern(internal::SqueezedVBlockOrders(model, pace, d));
    }
  }
  return makespans;
}

TEST(SolverAgainstReference, PublishedCasesBeatenOrEqualled) {
  for (const testing::ReferenceCase& c : kReferenceCases) {
    SCOPED_TRACE(std::string(c.model) + " " + c.schedule +
                 " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m));
    const testing::GridCosts* costs = nullptr;
    const std::vector<testing::GridCosts> models = GridCostModels();
    for (const testing::GridCosts& model : models) {
      if (model.name == c.model) costs = &model;
    }
    ASSERT_NE(costs, nullptr);
    const int chunks = std::string(c.schedule) == "zb-2p" ? 1 : 2;
    const Problem problem = GridProblem(*costs, c.p, chunks, c.m);
    const absl::StatusOr<Schedule> schedule = Generate(c.schedule, problem);
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    const absl::StatusOr<SimulationResult> result =
        Simulate(WithOwnLimit(problem, c.schedule), *schedule);
    ASSERT_TRUE(result.ok()) << result.status();
    // The reference is printed to 4 decimals: within half its last digit.
    EXPECT_LE(result->bubble_rate, c.reference_bubble + 5e-5);
  }
}

TEST(SolverAgainstReference, GridNeverWorseThanAnyCandidateConstruction) {
  int compared = 0;
  for (const testing::GridCosts& costs : GridCostModels()) {
    for (const testing::GridSchedule& shape : kGridSchedules) {
      const Placement placement =
          shape.chunks == 2 ? Placement::kV : Placement::kLoop;
      for (int p : {4, 8, 16, 32}) {
        for (int m : {p, 2 * p, 3 * p, 4 * p}) {
          SCOPED_TRACE(costs.name + " " + shape.name + " p=" +
                       std::to_string(p) + " m=" + std::to_string(m));
          const Problem problem = GridProblem(costs, p, shape.chunks, m);
          const absl::StatusOr<Schedule> schedule =
              Generate(shape.name, problem);
          ASSERT_TRUE(schedule.ok()) << schedule.status();
          const Problem limited = WithOwnLimit(problem, shape.name);
          const absl::StatusOr<SimulationResult> result =
              Simulate(limited, *schedule);
          ASSERT_TRUE(result.ok()) << result.status();
          for (int w = 0; w < p; ++w) {
            EXPECT_LE(result->peak_memory_bytes[w],
                      limited.limit_of(w) * (1 + 1e-9));
          }
          const std::vector<double> others =
              CandidateMakespans(limited, placement);
          ASSERT_FALSE(others.empty());
          EXPECT_LE(result->makespan_seconds,
                    *std::min_element(others.begin(), others.end()) *
                        (1 + 1e-9));
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 5 * 5 * 16);
}

// Bubble rate of `schedule` on `limited`; -1 when it does not simulate.
double BubbleOf(const Problem& limited,
                const absl::StatusOr<Schedule>& schedule) {
  if (!schedule.ok()) return -1;
  const absl::StatusOr<SimulationResult> result = Simulate(limited, *schedule);
  return result.ok() ? result->bubble_rate : -1;
}

TEST(SolverAgainstAuthors, CommCasesWhereZbppLostNowAtOrBelow) {
  for (const testing::CommReferenceCase& c : testing::kCommReferenceCases) {
    SCOPED_TRACE(std::string(c.schedule) +
                 " comm=" + std::to_string(c.comm_share) +
                 " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m));
    const Problem problem = testing::CommGridProblem(c.comm_share, c.p, 1, c.m);
    const double bubble = BubbleOf(WithOwnLimit(problem, c.schedule),
                                   Generate(c.schedule, problem));
    ASSERT_GE(bubble, 0);
    // The reference is written to 4 decimals: within half its last digit.
    EXPECT_LE(bubble, c.reference_bubble + 5e-5);
  }
}

// Over the comparison grid and the grid with communication, ZB-1p, ZB-2p and
// ZB-V are never longer than the authors' generators (their orders timed by
// our simulator, at the same limit).
TEST(SolverAgainstAuthors, NeverLongerThanTheirGenerators) {
  int compared = 0;
  auto check = [&](const std::string& label, const Problem& problem,
                   const char* schedule) {
    SCOPED_TRACE(label + " " + schedule +
                 " p=" + std::to_string(problem.stages) +
                 " m=" + std::to_string(problem.microbatches));
    const Problem limited = WithOwnLimit(problem, schedule);
    const std::optional<Schedule> theirs = testing::AuthorsSchedule(limited);
    ASSERT_TRUE(theirs.has_value());
    const absl::StatusOr<SimulationResult> reference =
        Simulate(limited, *theirs);
    ASSERT_TRUE(reference.ok()) << reference.status();
    const absl::StatusOr<Schedule> ours = Generate(schedule, problem);
    ASSERT_TRUE(ours.ok()) << ours.status();
    const absl::StatusOr<SimulationResult> result = Simulate(limited, *ours);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_LE(result->makespan_seconds,
              reference->makespan_seconds * (1 + 1e-9));
    ++compared;
  };
  for (const testing::GridSchedule& shape : testing::kCommGridSchedules) {
    for (int p : {4, 8, 16, 32}) {
      for (int m : {p, 2 * p, 3 * p, 4 * p}) {
        for (const testing::GridCosts& costs : GridCostModels()) {
          check(costs.name, GridProblem(costs, p, shape.chunks, m), shape.name);
        }
        for (double share : testing::kCommShares) {
          check("uniform, comm " + std::to_string(share),
                testing::CommGridProblem(share, p, shape.chunks, m),
                shape.name);
        }
      }
    }
  }
  EXPECT_EQ(compared, 3 * 16 * (5 + 3));
}

}  // namespace
}  // namespace zbpp::sched
