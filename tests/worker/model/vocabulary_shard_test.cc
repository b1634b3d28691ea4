// Vocabulary parallelism's arithmetic (worker/model/vocabulary_shard.h): the
// shards' S and T passes give the loss and the gradients of the unsharded
// head (LanguageModelLoss through at::linear and autograd), and their
// embedding lookups and gradients those of the unsharded embedding.
#include "worker/model/vocabulary_shard.h"

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace zbpp::worker {
namespace {

ModelConfig Config(int vocab, bool tied) {
  ModelConfig config;
  config.architecture = "llama";
  config.layers = 2;
  config.hidden = 16;
  config.heads = 2;
  config.vocab = vocab;
  config.seq_len = 8;
  config.ffn_hidden = 32;
  config.tie_embeddings = tied;
  config.vocab_parallel = true;
  return config;
}

TEST(VocabularyRangeTest, ShardsCoverTheVocabularyInOrderWithinOneRow) {
  for (int stages : {1, 2, 3, 4, 7}) {
    int64_t next = 0;
    for (int s = 0; s < stages; ++s) {
      const VocabularyRange r = VocabularyRangeOf(50, stages, s);
      EXPECT_EQ(r.begin, next) << stages << " stages, shard " << s;
      EXPECT_GE(r.size(), 50 / stages);
      EXPECT_LE(r.size(), 50 / stages + 1);
      next = r.end;
    }
    EXPECT_EQ(next, 50) << stages << " stages";
  }
}

TEST(VocabularyShardTest, RefusesMoreStagesThanVocabularyRowsAndAStageOutOfRange) {
  EXPECT_EQ(VocabularyShard::Create(Config(3, false), 0, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VocabularyShard::Create(Config(64, false), 4, 4, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The shards of p stages against the whole head: the same initial rows, the
// same mean loss, the same hidden-state gradient (summed over the shards)
// and the same weight gradient (the shards' rows), for a vocabulary that p
// does not divide.
void ExpectShardsEqualTheWholeHead(int stages, bool tied) {
  SCOPED_TRACE(testing::Message() << stages << " stages, tied " << tied);
  const ModelConfig config = Config(61, tied);
  const uint64_t seed = 7;
  const VocabularyNames names = VocabularyNamesOf(config.architecture);
  at::Tensor head = InitialParameter(seed, tied ? names.embedding : names.head,
                                     {config.vocab, config.hidden}, 0.02)
                        .requires_grad_(true);
  at::Generator gen = at::detail::createCPUGenerator(11);
  const at::Tensor hidden_value = at::randn({2, 5, config.hidden}, gen, at::kFloat);
  const at::Tensor targets = at::randint(config.vocab, {2, 5}, gen, at::kLong);
  const double scale = 0.25;  // 1/m with m = 4.

  at::Tensor hidden = hidden_value.clone().requires_grad_(true);
  const at::Tensor reference_loss = LanguageModelLoss(at::linear(hidden, head), targets);
  (reference_loss * scale).backward();

  std::vector<std::unique_ptr<VocabularyShard>> shards;
  std::vector<VocabularyForward> states(stages);
  std::vector<at::Tensor> statistics;
  for (int s = 0; s < stages; ++s) {
    absl::StatusOr<std::unique_ptr<VocabularyShard>> shard =
        VocabularyShard::Create(config, s, stages, seed);
    ASSERT_TRUE(shard.ok()) << shard.status();
    const VocabularyRange r = (*shard)->range();
    EXPECT_TRUE(at::equal((*shard)->weight(), head.detach().narrow(0, r.begin, r.size())));
    statistics.push_back((*shard)->Forward(hidden_value, targets, &states[s]));
    EXPECT_EQ(statistics.back().sizes(), (std::vector<int64_t>{3, 2, 5}));
    shards.push_back(*std::move(shard));
  }
  at::Tensor hidden_grad = at::zeros_like(hidden_value);
  std::vector<at::Tensor> losses;
  for (int s = 0; s < stages; ++s) {
    at::Tensor loss;
    hidden_grad += shards[s]->Backward(states[s], statistics, scale, &loss);
    losses.push_back(loss);
    const VocabularyRange r = shards[s]->range();
    EXPECT_TRUE(at::allclose(shards[s]->weight().grad(), head.grad().narrow(0, r.begin, r.size()),
                             1e-5, 1e-7))
        << "shard " << s << " weight gradient";
  }
  for (int s = 0; s < stages; ++s) {
    EXPECT_NEAR(losses[s].item<double>(), reference_loss.item<double>(), 1e-5);
    EXPECT_TRUE(at::equal(losses[s], losses[0])) << "stage " << s << "'s loss differs";
  }
  EXPECT_TRUE(at::allclose(hidden_grad, hidden.grad(), 1e-5, 1e-7));
}

TEST(VocabularyShardTest, ShardsEqualTheWholeHead) {
  for (int stages : {1, 2, 3, 4}) ExpectShardsEqualTheWholeHead(stages, /*tied=*/false);
}

TEST(VocabularyShardTest, TiedShardsStartFromTheEmbeddingsRows) {
  ExpectShardsEqualTheWholeHead(3, /*tied=*/true);
}

TEST(VocabularyShardTest, BackwardAccumulatesIntoTheWeightGradient) {
  const ModelConfig config = Config(20, false);
  absl::StatusOr<std::unique_ptr<VocabularyShard>> shard = VocabularyShard::Create(config, 1, 2, 3);
  ASSERT_TRUE(shard.ok()) << shard.status();
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor hidden = at::randn({1, 4, config.hidden}, gen, at::kFloat);
  const at::Tensor targets = at::randint(config.vocab, {1, 4}, gen, at::kLong);
  VocabularyForward state;
  // One shard of two: the other's statistics are those of a shard whose
  // logits are all very negative (it adds nothing to the normaliser).
  const at::Tensor mine = (*shard)->Forward(hidden, targets, &state);
  at::Tensor other = at::zeros_like(mine);
  other.select(0, 0).fill_(-1e4);
  other.select(0, 1).fill_(1);
  (*shard)->Backward(state, {other, mine}, 1.0, nullptr);
  const at::Tensor once = (*shard)->weight().grad().clone();
  EXPECT_GT(once.abs().max().item<double>(), 0);
  (*shard)->Backward(state, {other, mine}, 1.0, nullptr);
  EXPECT_TRUE(at::allclose((*shard)->weight().grad(), 2 * once));
}

// The stages' Embed sum to the whole embedding's lookup, bit for bit, and
// their AddEmbeddingGradient give its gradient's rows; untied the shard
// holds the embedding's and the head's rows under their names, tied one
// tensor under the embedding's name.
TEST(VocabularyShardTest, EmbeddingShardsSumToTheWholeLookupAndItsGradient) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(testing::Message() << "tied " << tied);
    const ModelConfig config = Config(61, tied);
    const uint64_t seed = 7;
    const int stages = 3;
    const VocabularyNames names = VocabularyNamesOf(config.architecture);
    at::Tensor embedding =
        InitialParameter(seed, names.embedding, {config.vocab, config.hidden}, 0.02)
            .requires_grad_(true);
    at::Generator gen = at::detail::createCPUGenerator(13);
    // Repeated tokens: a row's gradient sums its tokens' gradients.
    const at::Tensor tokens = at::randint(config.vocab, {2, 40}, gen, at::kLong);
    const at::Tensor grad_output = at::randn({2, 40, config.hidden}, gen, at::kFloat);
    const at::Tensor lookup = at::embedding(embedding, tokens);
    lookup.backward(grad_output);

    at::Tensor sum = at::zeros_like(lookup);
    for (int s = 0; s < stages; ++s) {
      absl::StatusOr<std::unique_ptr<VocabularyShard>> shard =
          VocabularyShard::Create(config, s, stages, seed);
      ASSERT_TRUE(shard.ok()) << shard.status();
      const VocabularyRange r = (*shard)->range();
      std::vector<std::string> want{VocabularyShardName(names.embedding, r)};
      if (!tied) want.push_back(VocabularyShardName(names.head, r));
      std::vector<std::string> got;
      for (const NamedTensor& t : (*shard)->parameters()) got.push_back(t.first);
      EXPECT_EQ(got, want);
      EXPECT_EQ((*shard)->embedding().is_same((*shard)->weight()), tied);
      EXPECT_TRUE(at::equal((*shard)->embedding(), embedding.detach().narrow(0, r.begin, r.size())));
      sum += (*shard)->Embed(tokens);
      (*shard)->AddEmbeddingGradient(tokens, grad_output);
      EXPECT_TRUE(at::allclose((*shard)->embedding().grad(),
                               embedding.grad().narrow(0, r.begin, r.size()), 1e-5, 1e-7))
          << "shard " << s << " embedding gradient";
    }
    EXPECT_TRUE(at::equal(sum, lookup.detach()));
  }
}

}  // namespace
}  // namespace zbpp::worker
