#include "scheduler/layout_search.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {
namespace {

using ::testing::ElementsAre;

// The work of `n`-stage loop placement with one chunk and a head of
// `head_blocks` blocks' work on the last stage.
LayoutWork OneChunkWithHead(int n, double head_blocks) {
  LayoutWork work;
  work.stage_of = PlaceVirtualStages(Placement::kLoop, n, 1);
  work.block_seconds = 1.0;
  work.extra_seconds.assign(n, 0.0);
  work.extra_seconds.back() = head_blocks;
  return work;
}

double Largest(const LayoutWork& work, const std::vector<int>& layout) {
  const std::vector<double> stages = StageWork(work, layout);
  return *std::max_element(stages.begin(), stages.end());
}

TEST(MostEvenLayout, GivesTheRemainderToTheFirstVirtualStages) {
  EXPECT_THAT(MostEvenLayout(8, 2), ElementsAre(4, 4));
  EXPECT_THAT(MostEvenLayout(9, 4), ElementsAre(3, 2, 2, 2));
  EXPECT_THAT(MostEvenLayout(3, 3), ElementsAre(1, 1, 1));
}

TEST(StageWork, SumsEachStagesVirtualStages) {
  LayoutWork work;
  work.stage_of = PlaceVirtualStages(Placement::kV, 2, 2);  // 0, 1, 1, 0
  work.block_seconds = 2.0;
  work.extra_seconds = {0.5, 0, 0, 3};
  EXPECT_THAT(StageWork(work, {1, 2, 3, 4}), ElementsAre(2 + 0.5 + 8 + 3, 4 + 6));
}

// The demo's Llama in miniature: 8 blocks on 2 stages, a head worth 2
// blocks. [5, 3] gives both stages 5 blocks' work; [4, 4] leaves 4 and 6.
TEST(BalancedLayouts, MovesBlocksOffTheHeadsStage) {
  const LayoutWork work = OneChunkWithHead(2, 2.0);
  const std::vector<std::vector<int>> layouts = BalancedLayouts(8, work, 3);
  ASSERT_EQ(layouts.size(), 3u);
  EXPECT_THAT(layouts[0], ElementsAre(5, 3));
  // Then its neighbours, [4, 4] and [6, 2] (6 blocks' work on one stage,
  // 4 on the other: equal balance).
  EXPECT_THAT(std::vector<std::vector<int>>(layouts.begin() + 1, layouts.end()),
              ::testing::UnorderedElementsAre(ElementsAre(4, 4), ElementsAre(6, 2)));
}

// Without a head nothing beats the even split.
TEST(BalancedLayouts, KeepsTheEvenSplitOfUniformWork) {
  const LayoutWork work = OneChunkWithHead(4, 0.0);
  EXPECT_THAT(BalancedLayouts(8, work, 1)[0], ElementsAre(2, 2, 2, 2));
}

// Under the V placement the head's virtual stage is on stage 0, with the
// embedding's: blocks move off stage 0, onto stage 1's two virtual stages.
TEST(BalancedLayouts, FollowsThePlacement) {
  LayoutWork work;
  work.stage_of = PlaceVirtualStages(Placement::kV, 2, 2);  // 0, 1, 1, 0
  work.block_seconds = 1.0;
  work.extra_seconds = {0, 0, 0, 2.0};
  const std::vector<int> best = BalancedLayouts(8, work, 1)[0];
  EXPECT_THAT(StageWork(work, best), ElementsAre(5, 5));
}

// On random work: every layout holds every block and gives each virtual
// stage one; none repeats; and no single move improves the first one's
// largest stage (a local optimum of the balance).
TEST(BalancedLayouts, ReturnsDistinctValidLayoutsFromALocalOptimum) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int p = 2 + static_cast<int>(random() % 6);
    const bool v_shape = random() % 2 == 0;
    LayoutWork work;
    work.stage_of = PlaceVirtualStages(v_shape ? Placement::kV : Placement::kLoop, p,
                                       v_shape ? 2 : 1);
    const int n = static_cast<int>(work.stage_of.size());
    work.block_seconds = 1.0;
    work.extra_seconds.assign(n, 0.0);
    work.extra_seconds.back() = (random() % 40) / 10.0;
    work.extra_seconds.front() = (random() % 10) / 10.0;
    const int blocks = n + static_cast<int>(random() % 20);
    const std::vector<std::vector<int>> layouts = BalancedLayouts(blocks, work, 6);
    ASSERT_FALSE(layouts.empty());
    EXPECT_LE(layouts.size(), 6u);
    std::set<std::vector<int>> seen;
    for (const std::vector<int>& layout : layouts) {
      ASSERT_EQ(static_cast<int>(layout.size()), n);
      EXPECT_EQ(std::accumulate(layout.begin(), layout.end(), 0), blocks);
      EXPECT_GE(*std::min_element(layout.begin(), layout.end()), 1);
      EXPECT_TRUE(seen.insert(layout).second) << "a layout twice";
    }
    const double best = Largest(work, layouts[0]);
    EXPECT_LE(best, Largest(work, MostEvenLayout(blocks, n)) + 1e-12);
    for (int from = 0; from < n; ++from) {
      for (int to = 0; to < n; ++to) {
        if (from == to || layouts[0][from] <= 1) continue;
        std::vector<int> moved = layouts[0];
        --moved[from];
        ++moved[to];
        EXPECT_GE(Largest(work, moved), best - 1e-12);
      }
    }
  }
}

}  // namespace
}  // namespace zbpp::sched
