#include "common/indices.h"

#include <sstream>
#include <unordered_set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

TEST(Index, ReadsBackItsValueAndComparesLikeAnInt) {
  const Stage s(3);
  EXPECT_EQ(s.value(), 3);
  EXPECT_EQ(Stage().value(), 0);
  EXPECT_EQ(s, Stage(3));
  EXPECT_NE(s, Stage(4));
  EXPECT_LT(Stage(2), s);
  EXPECT_LE(s, Stage(3));
  EXPECT_GT(Stage(5), s);
  EXPECT_GE(s, Stage(3));
}

TEST(Index, IncrementsForLoops) {
  VirtualStage v(1);
  EXPECT_EQ((v++).value(), 1);
  EXPECT_EQ(v.value(), 2);
  EXPECT_EQ((++v).value(), 3);
  std::vector<int> seen;
  for (Stage s(0); s < Stage(3); ++s) seen.push_back(s.value());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
}

TEST(Index, HashesInAbslAndStdContainers) {
  absl::flat_hash_map<VirtualStage, int> by_virtual_stage;
  by_virtual_stage[VirtualStage(7)] = 1;
  by_virtual_stage[VirtualStage(7)] += 1;
  by_virtual_stage[VirtualStage(2)] = 5;
  EXPECT_EQ(by_virtual_stage.size(), 2u);
  EXPECT_EQ(by_virtual_stage.at(VirtualStage(7)), 2);
  std::unordered_set<Replica> replicas{Replica(0), Replica(1), Replica(0)};
  EXPECT_EQ(replicas.size(), 2u);
}

TEST(Index, PrintsItsValue) {
  std::ostringstream out;
  out << "stage " << Stage(4) << ", worker " << WorkerIndex(9);
  EXPECT_EQ(out.str(), "stage 4, worker 9");
}

TEST(IndicesOf, CountsFromZero) {
  std::vector<int> seen;
  for (const Replica r : IndicesOf<Replica>(4)) seen.push_back(r.value());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3}));
  int none = 0;
  for (const Stage s : IndicesOf<Stage>(0)) none += 1 + s.value();
  for (const Stage s : IndicesOf<Stage>(-2)) none += 1 + s.value();
  EXPECT_EQ(none, 0);
}

TEST(WorkerOf, OrdersReplicaMajorAndInverts) {
  // p = 3 stages, d = 2 replicas: worker k = r·p + s.
  constexpr int kStages = 3;
  EXPECT_EQ(WorkerOf(Stage(0), Replica(0), kStages), WorkerIndex(0));
  EXPECT_EQ(WorkerOf(Stage(2), Replica(0), kStages), WorkerIndex(2));
  EXPECT_EQ(WorkerOf(Stage(0), Replica(1), kStages), WorkerIndex(3));
  EXPECT_EQ(WorkerOf(Stage(1), Replica(1), kStages), WorkerIndex(4));
  for (const Replica r : IndicesOf<Replica>(2)) {
    for (const Stage s : IndicesOf<Stage>(kStages)) {
      const WorkerIndex k = WorkerOf(s, r, kStages);
      EXPECT_EQ(StageOfWorker(k, kStages), s);
      EXPECT_EQ(ReplicaOfWorker(k, kStages), r);
    }
  }
}

TEST(IndexedVector, IndexesByItsKind) {
  IndexedVector<Stage, double> peak(3, 0.5);
  ASSERT_EQ(peak.size(), 3);
  EXPECT_FALSE(peak.empty());
  peak[Stage(1)] = 2.0;
  EXPECT_EQ(peak[Stage(0)], 0.5);
  EXPECT_EQ(peak[Stage(1)], 2.0);
  std::vector<int> indices;
  for (const Stage s : peak.indices()) indices.push_back(s.value());
  EXPECT_EQ(indices, (std::vector<int>{0, 1, 2}));
  peak.push_back(4.0);
  EXPECT_EQ(peak[Stage(3)], 4.0);
  EXPECT_EQ(peak.vector(), (std::vector<double>{0.5, 2.0, 0.5, 4.0}));
  double sum = 0;
  for (double x : peak) sum += x;
  EXPECT_EQ(sum, 7.0);
  using PerStage = IndexedVector<Stage, int>;
  EXPECT_EQ(PerStage(std::vector<int>{4, 5})[Stage(1)], 5);
  EXPECT_EQ(PerStage(2, 1), PerStage(std::vector<int>{1, 1}));
  EXPECT_NE(PerStage(2, 1), PerStage(3, 1));
  peak.assign(1, 9.0);
  EXPECT_EQ(peak.size(), 1);
  EXPECT_EQ(PerStage(-1).size(), 0);
}

}  // namespace
}  // namespace zbpp
