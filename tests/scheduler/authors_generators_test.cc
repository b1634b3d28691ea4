// The test-only re-implementation of the Zero Bubble authors' schedule
// generators (authors_generators.h): it gives the bubble rates they publish,
// and the solver's own constructions build the same orders under each of
// their choices, so the solver searches everything their greedy does.
#include "scheduler/testing/authors_generators.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "scheduler/zb_greedy.h"
#include "scheduler/testing/solver_grid.h"

namespace zbpp::sched {
namespace {

using internal::Orders;
using internal::PassModel;
using testing::GridCostModels;
using testing::GridCosts;
using testing::GridProblem;
using testing::WithOwnLimit;

const GridCosts& Costs(const std::string& name) {
  static const std::vector<GridCosts>* const kModels =
      new std::vector<GridCosts>(GridCostModels());
  for (const GridCosts& costs : *kModels) {
    if (costs.name == name) return costs;
  }
  return kModels->front();
}

double AuthorsBubble(const Problem& limited) {
  const std::optional<Schedule> schedule = testing::AuthorsSchedule(limited);
  if (!schedule.has_value()) return -1;
  const absl::StatusOr<SimulationResult> result = Simulate(limited, *schedule);
  return result.ok() ? result->bubble_rate : -1;
}

// The numbers the authors publish for their ZB-V greedy (with the issue that
// asked zbpp to match them; kReferenceCases) and the one of their ZB-2p
// greedy before its ILP (bench/results/solver.md), to their 4 decimals.
TEST(AuthorsGenerators, GiveTheirPublishedBubbleRates) {
  struct Published {
    const char* model;
    const char* schedule;
    int p, m;
    double bubble;
  };
  for (const Published& c : {Published{"1.5B", "zb-v", 8, 8, 0.1827},
                             Published{"1.5B", "zb-v", 32, 32, 0.2070},
                             Published{"14.6B", "zb-2p", 4, 8, 0.0569}}) {
    SCOPED_TRACE(std::string(c.model) + " " + c.schedule);
    const int chunks = std::string(c.schedule) == "zb-v" ? 2 : 1;
    const Problem limited =
        WithOwnLimit(GridProblem(Costs(c.model), c.p, chunks, c.m), c.schedule);
    EXPECT_NEAR(AuthorsBubble(limited), c.bubble, 5e-5);
  }
}

// The problems both equality tests run over: uniform costs with and without
// communication, two Table 5 models; p from 2 to 16, m from p to 3p+1.
std::vector<Problem> EqualityProblems(int chunks, const char* schedule) {
  std::vector<Problem> problems;
  for (const char* model : {"uniform", "1.5B", "28.3B"}) {
    for (double comm : {-1.0, 0.1, 0.3}) {
      if (comm >= 0 && std::string(model) != "uniform") continue;
      for (int p : {2, 3, 4, 8, 16}) {
        for (int m : {p, 2 * p, 3 * p + 1}) {
          Problem problem = GridProblem(Costs(model), p, chunks, m);
          if (comm >= 0) problem.comm_seconds = comm;
          problems.push_back(WithOwnLimit(problem, schedule));
        }
      }
    }
  }
  return problems;
}

TEST(AuthorsGenerators, LoopGreedyBuildsTheirOrdersUnderEachChoice) {
  int compared = 0;
  for (const char* schedule : {"zb-1p", "zb-2p"}) {
    for (const Problem& problem : EqualityProblems(1, schedule)) {
      const PassModel model(problem,
                            PlaceVirtualStages(Placement::kLoop, problem.stages, 1));
      for (int bits = 0; bits < 8; ++bits) {
        SCOPED_TRACE(std::string(schedule) +
                     " p=" + std::to_string(problem.stages) +
                     " m=" + std::to_string(problem.microbatches) +
                     " comm=" + std::to_string(problem.comm_seconds) +
                     " choices=" + std::to_string(bits));
        internal::GreedyChoices choices;
        choices.bubble_before_first_b = (bits & 1) != 0;
        choices.favour_b = (bits & 2) != 0;
        choices.fill_partial_gaps = (bits & 4) != 0;
        Orders ours, theirs;
        const bool ours_ok = internal::LoopGreedy(model, choices, &ours);
        const bool theirs_ok = testing::authors_internal::ZbGreedyOnce(
            model, choices.bubble_before_first_b, choices.favour_b,
            choices.fill_partial_gaps, &theirs);
        ASSERT_EQ(ours_ok, theirs_ok);
        if (ours_ok) {
          EXPECT_EQ(ours, theirs);
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
}

// Each choice and each re-run with the previous run's bubbles as allowance
// (as the solver and the authors chain them, while the largest bubble
// shrinks).
TEST(AuthorsGenerators, VRoundGreedyBuildsTheirOrdersUnderEachChoice) {
  int compared = 0;
  for (const Problem& problem : EqualityProblems(2, "zb-v")) {
    const PassModel model(problem,
                          PlaceVirtualStages(Placement::kV, problem.stages, 2));
    for (int bits = 0; bits < 4; ++bits) {
      const bool fill_b = (bits & 1) != 0, fill_f = (bits & 2) != 0;
      std::vector<double> approved, allowance;
      double previous = -1;
      for (int run = 0; run < 8; ++run) {
        SCOPED_TRACE("p=" + std::to_string(problem.stages) +
                     " m=" + std::to_string(problem.microbatches) +
                     " comm=" + std::to_string(problem.comm_seconds) +
                     " choices=" + std::to_string(bits) +
                     " run=" + std::to_string(run));
        Orders ours, theirs;
        std::vector<double> our_bubbles, their_bubbles;
        const bool ours_ok = internal::VRoundGreedy(
            model, {fill_f, fill_b}, allowance, &ours, nullptr, &our_bubbles);
        const bool theirs_ok = testing::authors_internal::ZbVOnce(
            model, fill_f, fill_b, approved, &theirs, &their_bubbles);
        ASSERT_EQ(ours_ok, theirs_ok);
        if (!ours_ok) break;
        EXPECT_EQ(ours, theirs);
        ++compared;
        const double top =
            *std::max_element(their_bubbles.begin(), their_bubbles.end());
        if (previous >= 0 && !(top < previous)) break;
        previous = top;
        approved = their_bubbles;
        allowance = their_bubbles;
        for (double& b : allowance) b = top - b;
      }
    }
  }
  EXPECT_GT(compared, 500);
}

}  // namespace
}  // namespace zbpp::sched
