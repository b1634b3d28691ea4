#include "worker/data/sampler.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/counter_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/data/test_files.h"
#include "tests/worker/data/token_ids.h"
#include "worker/data/corpus.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {
namespace {

using testing::Ids;
using testing::TestDirectory;
using testing::WriteFile;

constexpr int kSeqLen = 16;
constexpr int kRows = 4;

// Rows of a [rows, seq_len] int64 tensor.
std::vector<std::vector<int64_t>> Rows(const at::Tensor& tensor) {
  EXPECT_EQ(tensor.scalar_type(), at::kLong);
  EXPECT_TRUE(tensor.device().is_cpu());
  EXPECT_EQ(tensor.dim(), 2);
  std::vector<std::vector<int64_t>> rows;
  const auto data = tensor.accessor<int64_t, 2>();
  for (int64_t r = 0; r < tensor.size(0); ++r) {
    rows.emplace_back(data[r].data(), data[r].data() + tensor.size(1));
  }
  return rows;
}

Batch Sample(const Corpus& corpus, Split split, uint64_t seed, int64_t step,
             int microbatch, int rows = kRows) {
  absl::StatusOr<Batch> batch =
      SampleBatch(corpus, split, seed, step, microbatch, rows, kSeqLen);
  EXPECT_TRUE(batch.ok()) << batch.status();
  return batch.ok() ? *std::move(batch) : Batch{};
}

// Checks the batch's shape and range and that targets are inputs shifted
// by one token: row r of both is one window of seq_len + 1 tokens.
std::vector<std::vector<int64_t>> Windows(const Batch& batch, int rows) {
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{rows, kSeqLen}));
  EXPECT_EQ(batch.targets.sizes(), (std::vector<int64_t>{rows, kSeqLen}));
  const auto inputs = Rows(batch.inputs);
  const auto targets = Rows(batch.targets);
  std::vector<std::vector<int64_t>> windows;
  for (size_t r = 0; r < inputs.size(); ++r) {
    std::vector<int64_t> window = inputs[r];
    window.push_back(targets[r].back());
    EXPECT_TRUE(
        std::equal(targets[r].begin(), targets[r].end(), window.begin() + 1))
        << "row " << r << ": targets are not inputs shifted by one";
    for (int64_t token : window) {
      EXPECT_GE(token, 0);
      EXPECT_LT(token, 256);
    }
    windows.push_back(std::move(window));
  }
  return windows;
}

bool Contains(const TokenView& view, const std::vector<int64_t>& window) {
  const std::vector<int64_t> tokens = Ids(view);
  return std::search(tokens.begin(), tokens.end(), window.begin(),
                     window.end()) != tokens.end();
}

class TextSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Pseudo-random bytes, so every window of 17 tokens occurs once.
    std::string text(20000, '\0');
    uint32_t state = 12345;
    for (char& c : text) {
      state = state * 1103515245u + 12345u;
      c = static_cast<char>(state >> 24);
    }
    WriteFile(dir_ / "text.bin", text);
    v1::DatasetSpec spec;
    spec.set_text_file(dir_ / "text.bin");
    CorpusOptions options;
    options.seq_len = kSeqLen;
    options.eval_fraction = 0.1;
    absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
        LoadCorpus(spec, options);
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    corpus_ = *std::move(corpus);
  }

  TestDirectory dir_;
  std::shared_ptr<const Corpus> corpus_;
};

TEST_F(TextSamplerTest, RowsAreShiftedWindowsOfTheirSplit) {
  for (Split split : {Split::kTrain, Split::kEval}) {
    const Split other = split == Split::kTrain ? Split::kEval : Split::kTrain;
    for (int step = 0; step < 5; ++step) {
      for (const auto& window :
           Windows(Sample(*corpus_, split, 7, step, 0), kRows)) {
        EXPECT_TRUE(Contains(corpus_->tokens(split), window));
        EXPECT_FALSE(Contains(corpus_->tokens(other), window));
      }
    }
  }
}

TEST_F(TextSamplerTest, SameKeySameBatchWhateverWasSampledBefore) {
  const Batch first = Sample(*corpus_, Split::kTrain, 7, 3, 1);
  // Another "process" samples other batches first.
  for (int mb = 0; mb < 4; ++mb) Sample(*corpus_, Split::kTrain, 7, 2, mb);
  Sample(*corpus_, Split::kEval, 7, 3, 1);
  const Batch again = Sample(*corpus_, Split::kTrain, 7, 3, 1);
  EXPECT_EQ(Rows(again.inputs), Rows(first.inputs));
  EXPECT_EQ(Rows(again.targets), Rows(first.targets));

  // Changing any part of the key changes the batch.
  const auto inputs = Rows(first.inputs);
  EXPECT_NE(Rows(Sample(*corpus_, Split::kTrain, 7, 4, 1).inputs), inputs);
  EXPECT_NE(Rows(Sample(*corpus_, Split::kTrain, 7, 3, 2).inputs), inputs);
  EXPECT_NE(Rows(Sample(*corpus_, Split::kTrain, 8, 3, 1).inputs), inputs);
  // Rows of one microbatch differ from each other.
  EXPECT_EQ(std::set<std::vector<int64_t>>(inputs.begin(), inputs.end()).size(),
            inputs.size());
}

TEST(CounterHashTest, SplitMix64MatchesTheReferenceOutput) {
  // The first output of the reference splitmix64.c with state 0.
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(UniformIndex(~uint64_t{0}, 10), 9u);
  EXPECT_EQ(UniformIndex(uint64_t{1} << 63, 10), 5u);
}

// The documented definition, recomputed: resumed jobs and other tools rely
// on it.
TEST_F(TextSamplerTest, StartOffsetsFollowTheDocumentedHash) {
  const uint64_t seed = 42, step = 9, microbatch = 2;
  const Batch batch = Sample(*corpus_, Split::kEval, seed, step, microbatch);
  const std::vector<int64_t> eval = Ids(corpus_->tokens(Split::kEval));
  const auto inputs = Rows(batch.inputs);
  for (uint64_t row = 0; row < kRows; ++row) {
    const uint64_t hash = HashCombine(
        HashCombine(HashCombine(HashCombine(SplitMix64(seed), 1), step),
                    microbatch),
        row);
    const uint64_t start = UniformIndex(hash, eval.size() - kSeqLen);
    EXPECT_EQ(inputs[row],
              std::vector<int64_t>(eval.begin() + start,
                                   eval.begin() + start + kSeqLen));
  }
}

TEST_F(TextSamplerTest, RejectsBadSizes) {
  EXPECT_EQ(
      SampleBatch(*corpus_, Split::kTrain, 1, 0, 0, 0, kSeqLen).status().code(),
      absl::StatusCode::kInvalidArgument);
  // The eval split holds 2000 tokens.
  absl::Status status =
      SampleBatch(*corpus_, Split::kEval, 1, 0, 0, 1, 2000).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr("eval split has 2000 tokens"));
  EXPECT_TRUE(SampleBatch(*corpus_, Split::kEval, 1, 0, 0, 1, 1999).ok());
}

std::shared_ptr<const Corpus> Synthetic(std::optional<int64_t> sequences) {
  v1::DatasetSpec spec;
  if (sequences.has_value()) {
    spec.mutable_synthetic()->set_sequences(*sequences);
  } else {
    spec.mutable_synthetic();
  }
  CorpusOptions options;
  options.seq_len = kSeqLen;
  absl::StatusOr<std::shared_ptr<const Corpus>> corpus =
      LoadCorpus(spec, options);
  EXPECT_TRUE(corpus.ok()) << corpus.status();
  return corpus.ok() ? *corpus : nullptr;
}

TEST(SyntheticSamplerTest, DeterministicShiftedAndBoundedBySequences) {
  const std::shared_ptr<const Corpus> bounded = Synthetic(3);
  ASSERT_NE(bounded, nullptr);
  std::set<std::vector<int64_t>> distinct;
  for (int step = 0; step < 20; ++step) {
    const Batch batch = Sample(*bounded, Split::kTrain, 5, step, 0);
    for (auto& window : Windows(batch, kRows)) distinct.insert(window);
    EXPECT_EQ(Rows(Sample(*bounded, Split::kTrain, 5, step, 0).inputs),
              Rows(batch.inputs));
  }
  EXPECT_EQ(distinct.size(), 3u);  // 80 rows drawn from 3 sequences

  // Eval draws its own sequences.
  std::set<std::vector<int64_t>> eval;
  for (int step = 0; step < 20; ++step) {
    for (auto& window :
         Windows(Sample(*bounded, Split::kEval, 5, step, 0), kRows)) {
      EXPECT_EQ(distinct.count(window), 0u);
      eval.insert(window);
    }
  }
  EXPECT_EQ(eval.size(), 3u);
}

TEST(SyntheticSamplerTest, EndlessRowsDifferAndSpanAllByteValues) {
  const std::shared_ptr<const Corpus> endless = Synthetic(std::nullopt);
  ASSERT_NE(endless, nullptr);
  std::set<std::vector<int64_t>> distinct;
  std::set<int64_t> values;
  for (int step = 0; step < 50; ++step) {
    for (auto& window :
         Windows(Sample(*endless, Split::kTrain, 5, step, 1), kRows)) {
      values.insert(window.begin(), window.end());
      distinct.insert(std::move(window));
    }
  }
  EXPECT_EQ(distinct.size(), 200u);
  EXPECT_EQ(values.size(), 256u);  // 3400 uniform tokens cover every byte
}

}  // namespace
}  // namespace zbpp::worker
