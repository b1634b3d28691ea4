#include "worker/data/checkpoint.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"

namespace zbpp::worker {
namespace {

using ::testing::ElementsAre;
using testing::FileSizeLimit;
using ::testing::HasSubstr;
using testing::ListDirectory;
using testing::TestDirectory;
using testing::WriteFile;

// Same dtype, shape and bytes (NaN payloads and -0.0 included).
void ExpectBitExact(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const at::Tensor a = actual.contiguous();
  const at::Tensor e = expected.contiguous();
  EXPECT_EQ(std::memcmp(a.data_ptr(), e.data_ptr(), e.nbytes()), 0);
}

ExpectedShapes ShapesOf(const NamedTensors& tensors) {
  ExpectedShapes shapes;
  for (const auto& [name, tensor] : tensors) {
    shapes.emplace_back(name, tensor.sizes().vec());
  }
  return shapes;
}

NamedTensors StageTensors() {
  at::Tensor special = at::full({3}, 0.0, at::kFloat);
  special[0] = std::numeric_limits<float>::quiet_NaN();
  special[1] = -0.0f;
  special[2] = std::numeric_limits<float>::infinity();
  return {
      {"chunk1.block0.attn.qkv.weight", at::randn({6, 4}, at::kFloat)},
      {"chunk1.block0.attn.qkv.bias", at::randn({6}, at::kDouble)},
      {"optimizer.step", at::arange(5, at::kLong)},
      {"special", special},
      {"half", at::randn({2, 3}, at::kFloat).to(at::kBFloat16)},
      {"transposed", at::randn({4, 3}, at::kFloat).t()},
  };
}

TEST(CheckpointTest, RoundTripIsBitExactAtTheDocumentedPath) {
  TestDirectory dir;
  const NamedTensors tensors = StageTensors();
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 200, 1, tensors).ok());
  EXPECT_EQ(CheckpointPath(dir.path(), 200, 1),
            dir / "step-00000200/rank-001.pt");
  EXPECT_THAT(ListDirectory(dir.path()), ElementsAre("step-00000200"));
  EXPECT_THAT(ListDirectory(dir / "step-00000200"), ElementsAre("rank-001.pt"));

  // Asked for in another order: returned in the order asked.
  ExpectedShapes expected = ShapesOf(tensors);
  std::reverse(expected.begin(), expected.end());
  absl::StatusOr<NamedTensors> read =
      ReadCheckpoint(dir.path(), 200, 1, expected);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, tensor] = (*read)[read->size() - 1 - i];
    EXPECT_EQ(name, tensors[i].first);
    EXPECT_TRUE(tensor.device().is_cpu());
    EXPECT_FALSE(tensor.requires_grad());
    ExpectBitExact(tensor, tensors[i].second);
  }
}

TEST(CheckpointTest, AViewIsStoredWithoutTheRestOfItsStorage) {
  TestDirectory dir;
  const at::Tensor fused = at::randn({1024, 1024}, at::kFloat);  // 4 MiB
  ASSERT_TRUE(
      WriteCheckpoint(dir.path(), 1, 0, {{"slice", fused.narrow(0, 10, 2)}})
          .ok());
  EXPECT_LT(std::filesystem::file_size(CheckpointPath(dir.path(), 1, 0)),
            64u << 10);
  absl::StatusOr<NamedTensors> read =
      ReadCheckpoint(dir.path(), 1, 0, {{"slice", {2, 1024}}});
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitExact((*read)[0].second, fused.narrow(0, 10, 2));
}

TEST(CheckpointTest, ReplacesAnExistingFileOnlyWhole) {
  TestDirectory dir;
  const NamedTensors old_tensors = {{"w", at::randn({8, 8}, at::kFloat)}};
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 5, 0, old_tensors).ok());

  // Same names and shapes, so a torn file would still pass the checks.
  const NamedTensors big = {{"w", at::randn({8, 8}, at::kFloat)},
                            {"big", at::randn({1 << 20}, at::kFloat)}};
  absl::Status status;
  {
    FileSizeLimit limit(1 << 20);  // "big" is 4 MiB: the disk fills midway
    status = WriteCheckpoint(dir.path(), 5, 0, big);
  }
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(CheckpointPath(dir.path(), 5, 0)));
  EXPECT_THAT(std::string(status.message()), HasSubstr("File too large"));
  EXPECT_THAT(ListDirectory(dir / "step-00000005"), ElementsAre("rank-000.pt"));
  absl::StatusOr<NamedTensors> read =
      ReadCheckpoint(dir.path(), 5, 0, {{"w", {8, 8}}});
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitExact((*read)[0].second, old_tensors[0].second);

  // A successful write replaces it.
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 5, 0, big).ok());
  read = ReadCheckpoint(dir.path(), 5, 0, ShapesOf(big));
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitExact((*read)[0].second, big[0].second);
  ExpectBitExact((*read)[1].second, big[1].second);
  EXPECT_THAT(ListDirectory(dir / "step-00000005"), ElementsAre("rank-000.pt"));
}

TEST(CheckpointTest, MismatchesNameTheTensorAndTheFile) {
  TestDirectory dir;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 200, 1,
                              {{"chunk1.block0.attn.qkv.weight",
                                at::randn({384, 128}, at::kFloat)},
                               {"b", at::randn({3}, at::kFloat)}})
                  .ok());
  const std::string file = dir / "step-00000200/rank-001.pt";

  absl::Status status =
      ReadCheckpoint(dir.path(), 200, 1,
                     {{"chunk1.block0.attn.qkv.weight", {192, 64}}, {"b", {3}}})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint " + file +
                " does not match the model: \"chunk1.block0.attn.qkv.weight\" "
                "has shape [384, 128], the model expects [192, 64]");

  status = ReadCheckpoint(dir.path(), 200, 1,
                          {{"chunk1.block0.attn.qkv.weight", {384, 128}},
                           {"b", {3}},
                           {"c", {3}}})
               .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      status.message(),
      "checkpoint " + file + " does not match the model: \"c\" is missing");

  status = ReadCheckpoint(dir.path(), 200, 1,
                          {{"chunk1.block0.attn.qkv.weight", {384, 128}}})
               .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "checkpoint " + file +
                " does not match the model: it holds \"b\", which the model "
                "does not have");
}

TEST(CheckpointTest, MissingAndDamagedFiles) {
  TestDirectory dir;
  absl::Status status = ReadCheckpoint(dir.path(), 3, 0, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(dir / "step-00000003/rank-000.pt"));

  std::filesystem::create_directories(dir / "step-00000003");
  WriteFile(dir / "step-00000003/rank-000.pt", "not a zip archive");
  status = ReadCheckpoint(dir.path(), 3, 0, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(dir / "step-00000003/rank-000.pt"));
}

TEST(CheckpointTest, RejectsBadArguments) {
  TestDirectory dir;
  const at::Tensor t = at::randn({2}, at::kFloat);
  EXPECT_EQ(WriteCheckpoint(dir.path(), 1, 0, {{"a", t}, {"a", t}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCheckpoint(dir.path(), 1, 0, {{"", t}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCheckpoint(dir.path(), 1, 0, {{"a", at::Tensor()}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteCheckpoint(dir.path(), -1, 0, {{"a", t}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ListDirectory(dir.path()), ::testing::IsEmpty());
}

TEST(CheckpointTest, LatestCompleteCheckpointSkipsIncompleteSteps) {
  TestDirectory dir;
  EXPECT_EQ(LatestCompleteCheckpoint(dir / "none", 2).status().code(),
            absl::StatusCode::kNotFound);
  const NamedTensors tensors = {{"w", at::randn({2}, at::kFloat)}};
  for (int64_t step : {100, 200}) {
    for (int rank : {0, 1}) {
      ASSERT_TRUE(WriteCheckpoint(dir.path(), step, rank, tensors).ok());
    }
  }
  // Step 300: rank 1 crashed while writing, leaving only its temporary file.
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 300, 0, tensors).ok());
  WriteFile(dir / "step-00000300/rank-001.pt.tmp-4242", "partial");
  std::filesystem::create_directories(dir / "step-junk");

  absl::StatusOr<int64_t> latest = LatestCompleteCheckpoint(dir.path(), 2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 200);
  latest = LatestCompleteCheckpoint(dir.path(), 1);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 300);
  EXPECT_EQ(LatestCompleteCheckpoint(dir.path(), 3).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LatestCompleteCheckpoint(dir.path(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// keep_last: each rank removes its files of steps older than the N newest
// complete ones; an incomplete newer step does not count, and nothing goes
// while fewer than N are complete.
TEST(CheckpointTest, PruneKeepsTheNewestCompleteStepsOfEachRank) {
  TestDirectory dir;
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  for (int64_t step : {10, 20, 30}) {
    for (int rank : {0, 1}) ASSERT_TRUE(WriteCheckpoint(dir.path(), step, rank, tensors).ok());
  }
  // Step 40: only rank 0 finished (a crash before rank 1 wrote).
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 40, 0, tensors).ok());
  auto exists = [&](int64_t step, int rank) {
    return std::filesystem::exists(CheckpointPath(dir.path(), step, rank));
  };

  absl::StatusOr<int> none = PruneCheckpoints(dir.path(), 0, 2, 4);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0) << "only 3 complete steps: keep_last 4 keeps them all";

  absl::StatusOr<int> pruned = PruneCheckpoints(dir.path(), 0, 2, 2);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);
  EXPECT_FALSE(exists(10, 0));
  EXPECT_TRUE(exists(10, 1)) << "rank 0 removes only its own files";
  EXPECT_TRUE(exists(20, 0)) << "20 and 30 are the 2 newest complete steps";
  EXPECT_TRUE(exists(30, 0));
  EXPECT_TRUE(exists(40, 0));
  ASSERT_TRUE(PruneCheckpoints(dir.path(), 1, 2, 2).ok());
  EXPECT_FALSE(exists(10, 1));
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(CheckpointPath(dir.path(), 10, 0))
                                           .parent_path()))
      << "the emptied step directory goes too";
  absl::StatusOr<int64_t> latest = LatestCompleteCheckpoint(dir.path(), 2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 30);

  EXPECT_EQ(PruneCheckpoints(dir.path(), 2, 2, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PruneCheckpoints(dir.path(), 0, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointTest, UnfinishedWritesOfTheRankAreRemovedAtStart) {
  TestDirectory dir;
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 5, 0, tensors).ok());
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 5, 1, tensors).ok());
  const std::string rank0 = CheckpointPath(dir.path(), 5, 0);
  const std::string rank1 = CheckpointPath(dir.path(), 5, 1);
  WriteFile(rank0 + ".tmp-4242", "partial");
  WriteFile(rank0 + ".tmp-77", "partial");
  WriteFile(rank1 + ".tmp-4242", "partial");

  absl::StatusOr<int> removed = RemoveUnfinishedCheckpointWrites(dir.path(), 0);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_FALSE(std::filesystem::exists(rank0 + ".tmp-4242"));
  EXPECT_FALSE(std::filesystem::exists(rank0 + ".tmp-77"));
  EXPECT_TRUE(std::filesystem::exists(rank1 + ".tmp-4242")) << "another rank's write";
  EXPECT_TRUE(std::filesystem::exists(rank0)) << "the finished file stays";
  absl::StatusOr<int> empty = RemoveUnfinishedCheckpointWrites(dir.path() + "/absent", 0);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, 0);
}

}  // namespace
}  // namespace zbpp::worker
