#include "worker/data/checkpoint.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// A checkpoint written under one layout resumes under another: the names
// are global, so each expected tensor is found in whichever stage's file
// holds it.
TEST(CheckpointTest, AnyLayoutGathersEachTensorFromTheStageFileThatHoldsIt) {
  TestDirectory dir;
  const at::Tensor a = at::randn({2, 3}), b = at::randn({4}), c = at::randn({3, 3});
  const at::Tensor updates = at::scalar_tensor(20, at::kLong);
  // Layout [2, 1] over 2 stages: blocks a and b on stage 0, c on stage 1.
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 19, 0, {{"a", a}, {"b", b}, {"optimizer.step", updates}})
                  .ok());
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 19, 1, {{"c", c}, {"optimizer.step", updates}}).ok());

  // Resumed as layout [1, 2]: stage 0 holds a, stage 1 holds b and c.
  const ExpectedShapes stage0 = {{"a", {2, 3}}, {"optimizer.step", {}}};
  const ExpectedShapes stage1 = {{"b", {4}}, {"c", {3, 3}}, {"optimizer.step", {}}};
  // Stage 0's own file holds more than it needs: the strict read refuses it.
  EXPECT_EQ(ReadCheckpoint(dir.path(), 19, 0, stage0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<NamedTensors> first = ReadCheckpointOfAnyLayout(dir.path(), 19, 0, stage0);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);
  ExpectBitExact((*first)[0].second, a);
  absl::StatusOr<NamedTensors> second = ReadCheckpointOfAnyLayout(dir.path(), 19, 1, stage1);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->size(), 3u);
  EXPECT_EQ((*second)[0].first, "b");
  ExpectBitExact((*second)[0].second, b);
  ExpectBitExact((*second)[1].second, c);
  EXPECT_EQ((*second)[2].second.item<int64_t>(), 20);

  // A tensor no stage holds, or one of another shape, is named.
  absl::Status missing =
      ReadCheckpointOfAnyLayout(dir.path(), 19, 1, {{"b", {4}}, {"d", {1}}}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.message(), HasSubstr("\"d\""));
  absl::Status shape = ReadCheckpointOfAnyLayout(dir.path(), 19, 0, {{"c", {9}}}).status();
  EXPECT_EQ(shape.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(shape.message(), HasSubstr("\"c\" has shape [3, 3]"));
  // No checkpoint at all stays NotFound.
  EXPECT_EQ(ReadCheckpointOfAnyLayout(dir.path(), 7, 0, stage0).status().code(),
            absl::StatusCode::kNotFound);
}

// Checkpoints written before files were named per stage hold rank-NNN.pt:
// they are still found and read, under either layout; the current name wins
// when both exist, and a missing file is reported under the current name.
TEST(CheckpointTest, ReadsFilesOfTheFormerPerRankName) {
  TestDirectory dir;
  const at::Tensor a = at::randn({2, 3}), b = at::randn({4});
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 9, 0, {{"a", a}}).ok());
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 9, 1, {{"b", b}}).ok());
  for (const char* stage : {"000", "001"}) {
    std::filesystem::rename(dir / absl::StrCat("step-00000009/stage-", stage, ".pt"),
                            dir / absl::StrCat("step-00000009/rank-", stage, ".pt"));
  }
  EXPECT_THAT(ListDirectory(dir / "step-00000009"), ElementsAre("rank-000.pt", "rank-001.pt"));

  absl::StatusOr<NamedTensors> read = ReadCheckpoint(dir.path(), 9, 1, {{"b", {4}}});
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitExact((*read)[0].second, b);
  absl::StatusOr<NamedTensors> gathered =
      ReadCheckpointOfAnyLayout(dir.path(), 9, 0, {{"a", {2, 3}}, {"b", {4}}});
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  ExpectBitExact((*gathered)[0].second, a);
  ExpectBitExact((*gathered)[1].second, b);
  absl::StatusOr<int64_t> latest = LatestCompleteCheckpoint(dir.path(), 2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 9);
  // A mismatch names the file that was read.
  absl::Status shape = ReadCheckpoint(dir.path(), 9, 1, {{"b", {5}}}).status();
  EXPECT_THAT(shape.message(), HasSubstr(dir / "step-00000009/rank-001.pt"));

  // Both names: the current one is read.
  const at::Tensor newer = at::randn({4});
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 9, 1, {{"b", newer}}).ok());
  read = ReadCheckpoint(dir.path(), 9, 1, {{"b", {4}}});
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectBitExact((*read)[0].second, newer);

  // Neither: NotFound naming the current name.
  absl::Status missing = ReadCheckpoint(dir.path(), 9, 2, {{"c", {1}}}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("stage-002.pt"));
}

TEST(CheckpointTest, RoundTripIsBitExactAtTheDocumentedPath) {
  TestDirectory dir;
  const NamedTensors tensors = StageTensors();
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 200, 1, tensors).ok());
  EXPECT_EQ(CheckpointPath(dir.path(), 200, 1),
            dir / "step-00000200/stage-001.pt");
  EXPECT_THAT(ListDirectory(dir.path()), ElementsAre("step-00000200"));
  EXPECT_THAT(ListDirectory(dir / "step-00000200"), ElementsAre("stage-001.pt"));

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
  EXPECT_THAT(ListDirectory(dir / "step-00000005"), ElementsAre("stage-000.pt"));
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
  EXPECT_THAT(ListDirectory(dir / "step-00000005"), ElementsAre("stage-000.pt"));
}

TEST(CheckpointTest, MismatchesNameTheTensorAndTheFile) {
  TestDirectory dir;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 200, 1,
                              {{"chunk1.block0.attn.qkv.weight",
                                at::randn({384, 128}, at::kFloat)},
                               {"b", at::randn({3}, at::kFloat)}})
                  .ok());
  const std::string file = dir / "step-00000200/stage-001.pt";

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
              HasSubstr(dir / "step-00000003/stage-000.pt"));

  std::filesystem::create_directories(dir / "step-00000003");
  WriteFile(dir / "step-00000003/stage-000.pt", "not a zip archive");
  status = ReadCheckpoint(dir.path(), 3, 0, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(dir / "step-00000003/stage-000.pt"));
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
    for (int stage : {0, 1}) {
      ASSERT_TRUE(WriteCheckpoint(dir.path(), step, stage, tensors).ok());
    }
  }
  // Step 300: stage 1 crashed while writing, leaving only its temporary file.
  ASSERT_TRUE(WriteCheckpoint(dir.path(), 300, 0, tensors).ok());
  WriteFile(dir / "step-00000300/stage-001.pt.tmp-4242", "partial");
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

constexpr char kOwner[] = "job-1 spec 00000000000000a1";
// Another job (or the same id from another coordinator's database).
constexpr char kOtherOwner[] = "job-1 spec 00000000000000b2";

// What an attempt's stage does for one checkpoint: the owner file, then the
// checkpoint file.
void WriteOwned(const std::string& directory, int64_t step, int stage,
                const NamedTensors& tensors, const std::string& owner = kOwner) {
  const absl::Status claimed = ClaimCheckpoint(directory, step, stage, owner);
  ASSERT_TRUE(claimed.ok()) << claimed;
  const absl::Status written = WriteCheckpoint(directory, step, stage, tensors);
  ASSERT_TRUE(written.ok()) << written;
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// keep_last: each stage removes its files of its job's steps older than the N
// newest complete ones; an incomplete newer step does not count, and
// nothing goes while fewer than N are complete.
TEST(CheckpointTest, PruneKeepsTheNewestCompleteStepsOfEachRank) {
  TestDirectory dir;
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  for (int64_t step : {10, 20, 30}) {
    for (int stage : {0, 1}) WriteOwned(dir.path(), step, stage, tensors);
  }
  // Step 40: only stage 0 finished (a crash before stage 1 wrote).
  WriteOwned(dir.path(), 40, 0, tensors);
  auto exists = [&](int64_t step, int stage) {
    return std::filesystem::exists(CheckpointPath(dir.path(), step, stage));
  };

  absl::StatusOr<int> none = PruneCheckpoints(dir.path(), 0, 2, 4, kOwner, 40);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0) << "only 3 complete steps: keep_last 4 keeps them all";

  absl::StatusOr<int> pruned = PruneCheckpoints(dir.path(), 0, 2, 2, kOwner, 40);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);
  EXPECT_FALSE(exists(10, 0));
  EXPECT_TRUE(exists(10, 1)) << "stage 0 removes only its own files";
  EXPECT_THAT(ListDirectory(dir / "step-00000010"), ElementsAre("stage-001.owner", "stage-001.pt"))
      << "stage 0's owner file goes with its checkpoint";
  EXPECT_TRUE(exists(20, 0)) << "20 and 30 are the 2 newest complete steps";
  EXPECT_TRUE(exists(30, 0));
  EXPECT_TRUE(exists(40, 0));
  ASSERT_TRUE(PruneCheckpoints(dir.path(), 1, 2, 2, kOwner, 30).ok());
  EXPECT_FALSE(exists(10, 1));
  EXPECT_FALSE(std::filesystem::exists(dir / "step-00000010"))
      << "the emptied step directory goes too";
  absl::StatusOr<int64_t> latest = LatestCompleteCheckpoint(dir.path(), 2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 30);

  EXPECT_EQ(PruneCheckpoints(dir.path(), 2, 2, 1, kOwner, 40).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PruneCheckpoints(dir.path(), 0, 2, 0, kOwner, 40).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PruneCheckpoints(dir.path(), 0, 2, 1, "two\nlines", 40).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A leftover of another run at a higher step (complete, with or without an
// owner file) and a step directory that is a link to elsewhere: pruning
// keeps the job's own newest checkpoint and touches nothing else.
TEST(CheckpointTest, PruneLeavesOtherJobsFilesLinksAndTheStepJustWritten) {
  TestDirectory dir;
  const std::string checkpoints = dir / "checkpoints";
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  for (int stage : {0, 1}) {
    WriteOwned(checkpoints, 99999, stage, tensors, kOtherOwner);
    ASSERT_TRUE(WriteCheckpoint(checkpoints, 99998, stage, tensors).ok());  // no owner
  }
  std::filesystem::create_directories(dir / "elsewhere");
  WriteFile(dir / "elsewhere/stage-000.pt", "not zbpp's");
  WriteFile(dir / "elsewhere/stage-000.owner", std::string(kOwner) + "\n");
  WriteFile(dir / "elsewhere/stage-001.pt", "not zbpp's");
  WriteFile(dir / "elsewhere/stage-001.owner", std::string(kOwner) + "\n");
  std::filesystem::create_directory_symlink(dir / "elsewhere", checkpoints + "/step-00000001");
  // An earlier attempt of the job wrote step 8; this one restarted from 2.
  for (int64_t step : {2, 5, 8}) {
    for (int stage : {0, 1}) WriteOwned(checkpoints, step, stage, tensors);
  }
  const std::map<std::string, std::string> foreign = {
      {dir / "elsewhere/stage-000.pt", "not zbpp's"},
      {dir / "elsewhere/stage-001.pt", "not zbpp's"},
      {checkpoints + "/step-00099999/stage-000.pt",
       Contents(CheckpointPath(checkpoints, 99999, 0))},
      {checkpoints + "/step-00099998/stage-001.pt",
       Contents(CheckpointPath(checkpoints, 99998, 1))}};

  for (int stage : {0, 1}) {
    absl::StatusOr<int> pruned = PruneCheckpoints(checkpoints, stage, 2, 1, kOwner, 5);
    ASSERT_TRUE(pruned.ok()) << pruned.status();
    EXPECT_EQ(*pruned, 1) << "only the job's step 2";
  }
  EXPECT_FALSE(std::filesystem::exists(checkpoints + "/step-00000002"));
  for (int64_t step : {5, 8, 99998, 99999}) {
    for (int stage : {0, 1}) {
      EXPECT_TRUE(std::filesystem::is_regular_file(CheckpointPath(checkpoints, step, stage)))
          << "step " << step << " stage " << stage;
    }
  }
  for (const auto& [path, bytes] : foreign) EXPECT_EQ(Contents(path), bytes) << path;
  EXPECT_THAT(ListDirectory(dir / "elsewhere"),
              ElementsAre("stage-000.owner", "stage-000.pt", "stage-001.owner", "stage-001.pt"));
  EXPECT_TRUE(std::filesystem::is_symlink(checkpoints + "/step-00000001"));
  absl::StatusOr<int64_t> latest = LatestCompleteCheckpoint(checkpoints, 2);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 99999) << "whoever wrote it, links skipped";
}

// An attempt starts: the steps it writes must hold nothing but its own
// job's files; temporary files of its stage's crashed writes there go.
TEST(CheckpointTest, PrepareRefusesStepsThatHoldAnotherJobsFiles) {
  TestDirectory dir;
  const std::string checkpoints = dir / "checkpoints";
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  const CheckpointSteps steps{/*first_step=*/0, /*end_step=*/12, /*interval_steps=*/3};
  EXPECT_TRUE(steps.Contains(2) && steps.Contains(11) && !steps.Contains(3) &&
              !steps.Contains(14));
  // Not steps this job writes: left alone, whoever wrote them.
  WriteOwned(checkpoints, 3, 0, tensors, kOtherOwner);
  WriteOwned(checkpoints, 14, 0, tensors, kOtherOwner);
  std::filesystem::create_directories(dir / "elsewhere");
  std::filesystem::create_directory_symlink(dir / "elsewhere", checkpoints + "/step-00000004");
  // Its own earlier attempt's step 5, with a crashed write of each stage.
  WriteOwned(checkpoints, 5, 0, tensors);
  WriteFile(CheckpointPath(checkpoints, 5, 0) + ".tmp-4242", "partial");
  WriteFile(checkpoints + "/step-00000005/stage-000.owner.tmp-77", "partial");
  WriteFile(CheckpointPath(checkpoints, 5, 1) + ".tmp-4242", "partial");
  WriteFile(CheckpointPath(checkpoints, 3, 0) + ".tmp-4242", "another job's write");

  absl::StatusOr<int> removed = PrepareCheckpointDirectory(checkpoints, 0, 2, kOwner, steps);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_THAT(ListDirectory(checkpoints + "/step-00000005"),
              ElementsAre("stage-000.owner", "stage-000.pt", "stage-001.pt.tmp-4242"));
  EXPECT_TRUE(std::filesystem::exists(CheckpointPath(checkpoints, 3, 0) + ".tmp-4242"));

  auto refused = [&](const std::string& expected) {
    absl::Status status = PrepareCheckpointDirectory(checkpoints, 1, 2, kOwner, steps).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(expected));
    EXPECT_THAT(std::string(status.message()), HasSubstr("never overwrites"));
  };
  // Step 8: another job's stage 1; step 8 written by hand or an older zbpp;
  // step 8 a link.
  WriteOwned(checkpoints, 8, 1, tensors, kOtherOwner);
  refused(absl::StrCat("this job writes step 8 but ", checkpoints,
                       "/step-00000008/stage-001 belongs to ", kOtherOwner));
  std::filesystem::remove_all(checkpoints + "/step-00000008");
  ASSERT_TRUE(WriteCheckpoint(checkpoints, 8, 0, tensors).ok());
  refused(CheckpointPath(checkpoints, 8, 0) + " has no owner file");
  std::filesystem::remove_all(checkpoints + "/step-00000008");
  std::filesystem::create_directory_symlink(dir / "elsewhere", checkpoints + "/step-00000008");
  refused(checkpoints + "/step-00000008 is a symbolic link");
  // A later attempt that starts after step 8 does not write it.
  absl::StatusOr<int> later = PrepareCheckpointDirectory(checkpoints, 1, 2, kOwner,
                                                         CheckpointSteps{9, 12, 3});
  EXPECT_TRUE(later.ok()) << later.status();
  EXPECT_THAT(ListDirectory(dir / "elsewhere"), ::testing::IsEmpty());
  EXPECT_EQ(PrepareCheckpointDirectory(checkpoints, 2, 2, kOwner, steps).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Writes and reads never go through a link: a step directory, a stage file
// or a temporary file's name planted as a link to elsewhere.
TEST(CheckpointTest, LinksAreNeverFollowed) {
  TestDirectory dir;
  const std::string checkpoints = dir / "checkpoints";
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  std::filesystem::create_directories(checkpoints);
  std::filesystem::create_directories(dir / "elsewhere");
  ASSERT_TRUE(WriteCheckpoint(dir / "elsewhere", 7, 0, tensors).ok());
  const std::string target = CheckpointPath(dir / "elsewhere", 7, 0);
  const std::string bytes = Contents(target);
  std::filesystem::create_directory_symlink(dir / "elsewhere/step-00000007",
                                            checkpoints + "/step-00000007");

  absl::Status status = WriteCheckpoint(checkpoints, 7, 0, tensors);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("step-00000007 is a symbolic link"));
  status = ClaimCheckpoint(checkpoints, 7, 0, kOwner);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  status = ReadCheckpoint(checkpoints, 7, 0, {{"w", {2}}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("symbolic link"));

  std::filesystem::create_directories(checkpoints + "/step-00000008");
  std::filesystem::create_symlink(target, CheckpointPath(checkpoints, 8, 0));
  status = ReadCheckpoint(checkpoints, 8, 0, {{"w", {2}}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(CheckpointPath(checkpoints, 8, 0) + " is a symbolic link"));
  status = ClaimCheckpoint(checkpoints, 8, 0, kOwner);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;

  // The temporary file's name (this process's id) planted as a link.
  std::filesystem::create_directories(checkpoints + "/step-00000009");
  std::filesystem::create_symlink(
      target, absl::StrCat(CheckpointPath(checkpoints, 9, 0), ".tmp-", ::getpid()));
  EXPECT_FALSE(WriteCheckpoint(checkpoints, 9, 0, {{"v", at::full({3}, 2.0)}}).ok());
  EXPECT_EQ(Contents(target), bytes) << "a link's target was written";
  EXPECT_THAT(ListDirectory(dir / "elsewhere/step-00000007"), ElementsAre("stage-000.pt"));
}

// A step of the job's own files is claimed again (a later attempt), another
// owner's never.
TEST(CheckpointTest, ClaimRefusesAnotherOwnersFile) {
  TestDirectory dir;
  const NamedTensors tensors = {{"w", at::full({2}, 1.0)}};
  WriteOwned(dir.path(), 5, 0, tensors);
  EXPECT_TRUE(ClaimCheckpoint(dir.path(), 5, 0, kOwner).ok());
  const std::string bytes = Contents(CheckpointPath(dir.path(), 5, 0));
  absl::Status status = ClaimCheckpoint(dir.path(), 5, 0, kOtherOwner);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("belongs to ", kOwner)));
  EXPECT_EQ(Contents(dir / "step-00000005/stage-000.owner"), std::string(kOwner) + "\n");
  EXPECT_EQ(Contents(CheckpointPath(dir.path(), 5, 0)), bytes);
  EXPECT_EQ(ClaimCheckpoint(dir.path(), 5, 0, "").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zbpp::worker
