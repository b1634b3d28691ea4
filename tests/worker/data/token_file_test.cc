// DatasetSpec.tokens: flat files of little-endian uint16 or uint32 ids,
// read where needed (never mapped), checked against the vocabulary before
// training and again in every batch.

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/data/token_ids.h"
#include "worker/data/corpus.h"
#include "worker/data/sampler.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;
using testing::Ids;
using testing::TestDirectory;
using testing::WriteFile;

constexpr int kSeqLen = 8;

// `ids` as the file scripts/tokenize writes: little-endian, `width` bytes.
std::string Encode(const std::vector<int64_t>& ids, int width) {
  std::string bytes;
  for (int64_t id : ids) {
    for (int b = 0; b < width; ++b) bytes.push_back(static_cast<char>((id >> (8 * b)) & 0xff));
  }
  return bytes;
}

std::vector<int64_t> Iota(int64_t count, int64_t first, int64_t stride) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < count; ++i) ids.push_back(first + i * stride);
  return ids;
}

CorpusOptions Options(int64_t vocab) {
  CorpusOptions options;
  options.seq_len = kSeqLen;
  options.vocab = vocab;
  return options;
}

v1::DatasetSpec Tokens(const std::string& path, v1::TokenDtype dtype) {
  v1::DatasetSpec spec;
  spec.mutable_tokens()->set_path(path);
  spec.mutable_tokens()->set_dtype(dtype);
  return spec;
}

TEST(TokenFileTest, Uint16FileSplitsItsEndOffAndBatchesHoldItsIds) {
  TestDirectory dir;
  // 1000 ids above 255 (so that a byte-level reading would differ).
  const std::vector<int64_t> ids = Iota(1000, 300, 37);
  WriteFile(dir / "train.bin", Encode(ids, 2));
  v1::DatasetSpec spec = Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UNSPECIFIED);  // uint16
  spec.mutable_tokens()->set_eval_fraction(0.1);
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus = LoadCorpus(spec, Options(50000));
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ((*corpus)->description(), absl::StrCat("dataset.tokens.path \"", dir / "train.bin", "\""));
  EXPECT_EQ(Ids((*corpus)->tokens(Split::kTrain)),
            std::vector<int64_t>(ids.begin(), ids.begin() + 900));
  EXPECT_EQ(Ids((*corpus)->tokens(Split::kEval)),
            std::vector<int64_t>(ids.begin() + 900, ids.end()));

  // Each row is a window of the split: consecutive ids, stride 37.
  absl::StatusOr<Batch> batch = SampleBatch(**corpus, Split::kEval, 7, 3, 1, 4, kSeqLen);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const auto inputs = batch->inputs.accessor<int64_t, 2>();
  const auto targets = batch->targets.accessor<int64_t, 2>();
  for (int r = 0; r < 4; ++r) {
    EXPECT_GE(inputs[r][0], ids[900]);
    for (int j = 0; j < kSeqLen; ++j) EXPECT_EQ(targets[r][j], inputs[r][j] + 37);
  }
}

TEST(TokenFileTest, Uint32FileWithItsOwnEvalFile) {
  TestDirectory dir;
  const std::vector<int64_t> train = Iota(100, 70000, 1001);  // needs 4 bytes
  const std::vector<int64_t> eval = Iota(20, 90000, 3);
  WriteFile(dir / "train.bin", Encode(train, 4));
  WriteFile(dir / "val.bin", Encode(eval, 4));
  v1::DatasetSpec spec = Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT32);
  spec.mutable_tokens()->set_eval_path(dir / "val.bin");
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus = LoadCorpus(spec, Options(200000));
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(Ids((*corpus)->tokens(Split::kTrain)), train);
  EXPECT_EQ(Ids((*corpus)->tokens(Split::kEval)), eval);

  // Another eval file is another corpus: the fingerprint tells.
  WriteFile(dir / "val2.bin", Encode(Iota(20, 90001, 3), 4));
  spec.mutable_tokens()->set_eval_path(dir / "val2.bin");
  absl::StatusOr<std::shared_ptr<const Corpus>> other = LoadCorpus(spec, Options(200000));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->fingerprint(), (*corpus)->fingerprint());
}

TEST(TokenFileTest, SizeNotAMultipleOfTheWidthNamesTheField) {
  TestDirectory dir;
  WriteFile(dir / "odd.bin", Encode(Iota(100, 1, 1), 2) + "x");
  absl::Status status =
      LoadCorpus(Tokens(dir / "odd.bin", v1::TOKEN_DTYPE_UINT16), Options(1000)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            absl::StrCat("dataset.tokens.path \"", dir / "odd.bin",
                         "\": 201 bytes is not a multiple of 2 (dataset.tokens.dtype uint16)"));

  WriteFile(dir / "train.bin", Encode(Iota(100, 1, 1), 4));
  WriteFile(dir / "val.bin", Encode(Iota(31, 1, 1), 2));  // 62 bytes: not uint32
  v1::DatasetSpec spec = Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT32);
  spec.mutable_tokens()->set_eval_path(dir / "val.bin");
  status = LoadCorpus(spec, Options(1000)).status();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("dataset.tokens.eval_path \"" + (dir / "val.bin") +
                        "\": 62 bytes is not a multiple of 4"));
}

TEST(TokenFileTest, IdAtOrAboveTheVocabularyIsRefusedWithItsIndex) {
  TestDirectory dir;
  std::vector<int64_t> ids = Iota(1000, 0, 1);
  ids[321] = 1000;
  WriteFile(dir / "train.bin", Encode(ids, 2));
  const absl::Status status =
      LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16), Options(1000)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("dataset.tokens.path: token id 1000 at index 321 of the file is >= "
                        "model.vocab = 1000"));
  // One more entry in the vocabulary and the same file is fine.
  EXPECT_TRUE(
      LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16), Options(1001)).ok());

  // In the held-out end of the file: the index is still the file's.
  ids[321] = 5;
  ids[999] = 4000;
  WriteFile(dir / "train.bin", Encode(ids, 2));
  EXPECT_THAT(std::string(LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16),
                                     Options(1000))
                              .status()
                              .message()),
              HasSubstr("token id 4000 at index 999 of the file"));
}

// A token file truncated under a running job: the batch that reads past
// its end is an error naming the file, and the worker lives on (a mapped
// file would kill it with SIGBUS, silently).
TEST(TokenFileTest, FileTruncatedAfterLoadingFailsTheBatchNamingTheFile) {
  TestDirectory dir;
  const std::vector<int64_t> ids = Iota(20000, 1, 0);  // 40,000 bytes: several pages
  WriteFile(dir / "train.bin", Encode(ids, 2));
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16), Options(512));
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_TRUE(SampleBatch(**corpus, Split::kTrain, 7, 0, 0, 4, kSeqLen).ok());

  ASSERT_EQ(::truncate((dir / "train.bin").c_str(), 100), 0);
  // Rows start anywhere in the 19,800 train ids: within a few batches one
  // reads beyond the 50 ids left.
  absl::Status failed;
  for (int step = 0; step < 20 && failed.ok(); ++step) {
    failed = SampleBatch(**corpus, Split::kTrain, 7, step, 0, 4, kSeqLen).status();
  }
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss) << failed;
  EXPECT_THAT(std::string(failed.message()),
              HasSubstr(absl::StrCat("dataset.tokens.path \"", dir / "train.bin", "\": ")));
  EXPECT_THAT(std::string(failed.message()),
              HasSubstr("the file holds 100 bytes now, 40000 when the job opened it"));
}

// The file rewritten in place, same size, with ids beyond the vocabulary:
// caught in the batch, before an id reaches an embedding (on CUDA, a
// device-side assert that ends the process).
TEST(TokenFileTest, IdsRewrittenOutOfRangeAfterLoadingFailTheBatch) {
  TestDirectory dir;
  WriteFile(dir / "train.bin", Encode(Iota(2000, 1, 0), 2));
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16), Options(512));
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ((*corpus)->vocab(), 512);

  WriteFile(dir / "train.bin", Encode(Iota(2000, 600, 0), 2));
  const absl::StatusOr<Batch> batch = SampleBatch(**corpus, Split::kTrain, 7, 0, 0, 4, kSeqLen);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kDataLoss) << batch.status();
  EXPECT_THAT(std::string(batch.status().message()),
              HasSubstr(absl::StrCat("dataset.tokens.path \"", dir / "train.bin",
                                     "\": token id 600 at index ")));
  EXPECT_THAT(std::string(batch.status().message()),
              HasSubstr("is >= the vocabulary of 512: the file changed after the job loaded it"));
}

TEST(TokenFileTest, SplitShorterThanOneSequenceNamesBothNumbers) {
  TestDirectory dir;
  // 400 ids: the default eval_fraction 0.01 holds out 4, fewer than 9.
  WriteFile(dir / "train.bin", Encode(Iota(400, 0, 1), 2));
  const absl::Status status =
      LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16), Options(1000)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("the eval split has 4 tokens (of 400, eval_fraction 0.01), fewer than "
                        "seq_len + 1 = 9"));

  WriteFile(dir / "val.bin", Encode(Iota(8, 0, 1), 2));  // one short of a sequence
  v1::DatasetSpec spec = Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16);
  spec.mutable_tokens()->set_eval_path(dir / "val.bin");
  EXPECT_THAT(std::string(LoadCorpus(spec, Options(1000)).status().message()),
              HasSubstr("the eval split has 8 tokens (path and eval_path)"));
  WriteFile(dir / "val.bin", Encode(Iota(9, 0, 1), 2));
  EXPECT_TRUE(LoadCorpus(spec, Options(1000)).ok());
}

TEST(TokenFileTest, EvalPathAndFractionTogetherAndCancelledScans) {
  TestDirectory dir;
  WriteFile(dir / "train.bin", Encode(Iota(1000, 0, 1), 2));
  v1::DatasetSpec spec = Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16);
  spec.mutable_tokens()->set_eval_path(dir / "train.bin");
  spec.mutable_tokens()->set_eval_fraction(0.5);
  EXPECT_EQ(LoadCorpus(spec, Options(1000)).status().message(),
            "dataset.tokens: set eval_path or eval_fraction, not both");

  CorpusOptions options = Options(1000);
  options.cancelled = [] { return true; };
  EXPECT_EQ(LoadCorpus(Tokens(dir / "train.bin", v1::TOKEN_DTYPE_UINT16), options).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace zbpp::worker
