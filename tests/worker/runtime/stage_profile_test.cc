// The calibration profile (StageTrainer::Profile) and the steps' peak
// activation memory, on one rank (p = 1) over the in-process communicator.

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "tests/worker/test_device.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/runtime/stage_trainer.h"
#include "worker/runtime/synthetic_compute.h"

namespace zbpp::worker {
namespace {

constexpr int kMicrobatches = 4;

MicrobatchData Batch(int64_t step, int microbatch) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * step + microbatch + 1);
  at::Tensor tokens = at::randint(64, {2, 17}, gen, at::kLong);
  return {tokens.narrow(1, 0, 16).contiguous(), tokens.narrow(1, 1, 16).contiguous()};
}

// A GPT of `layers` blocks (h = 32, 4 heads, vocabulary `vocab`, s = 16) on
// one stage, microbatches of `b` sequences.
v1::JobSpec Spec(int layers, int b, v1::Precision precision = v1::PRECISION_FP32,
                 int vocab = 64) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(layers);
  model->set_hidden(32);
  model->set_heads(4);
  model->set_vocab(vocab);
  model->set_seq_len(16);
  spec.mutable_pipeline()->set_stages(1);
  spec.mutable_pipeline()->set_microbatches(kMicrobatches);
  spec.mutable_pipeline()->set_microbatch_size(b);
  spec.mutable_optimizer()->set_learning_rate(1e-2);
  spec.set_seed(11);
  spec.set_precision(precision);
  return spec;
}

// One rank holding `virtual_stages` of spec's model; keeps its
// communicator.
struct Rank {
  Rank(const v1::JobSpec& spec, std::vector<int> virtual_stages)
      : comms(CreateInProcessGroup(1)) {
    StageTrainerOptions o;
    o.spec = spec;
    o.virtual_stages = std::move(virtual_stages);
    o.communicator = comms[0].get();
    o.device = TestDevice();
    o.train_batches = Batch;
    o.eval_batches = Batch;
    absl::StatusOr<std::unique_ptr<StageTrainer>> created = StageTrainer::Create(o);
    EXPECT_TRUE(created.ok()) << created.status();
    if (created.ok()) trainer = *std::move(created);
  }
  std::vector<std::unique_ptr<Communicator>> comms;
  std::unique_ptr<StageTrainer> trainer;
};

sched::Schedule GPipe() {
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(
      "gpipe", sched::Problem::Uniform(1, 1, kMicrobatches, sched::VirtualStageCost{}, 0.0));
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *schedule;
}

std::map<std::string, at::Tensor> Grads(const StageTrainer& trainer) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : trainer.Parameters()) out[name] = t.grad().clone();
  return out;
}

TEST(StageProfileTest, EveryVirtualStageIsTimedAndABlockChunkHoldsMoreForBThanForW) {
  Rank rank(Spec(3, 2), {0, 1, 2});
  ASSERT_NE(rank.trainer, nullptr);
  absl::StatusOr<std::vector<StageProfile>> profiles = rank.trainer->Profile(3);
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  ASSERT_EQ(profiles->size(), 3u);
  for (int s = 0; s < 3; ++s) {
    const StageProfile& p = (*profiles)[s];
    EXPECT_EQ(p.virtual_stage, s);
    EXPECT_GT(p.f_seconds, 0);
    EXPECT_GT(p.b_seconds, 0);
    EXPECT_GT(p.w_seconds, 0);
    EXPECT_LE(p.m_w_bytes, p.m_b_bytes);
  }
  // Virtual stage 1 is one transformer block: [b, s, h] in and out.
  const StageProfile& block = (*profiles)[1];
  EXPECT_GT(block.m_b_bytes, block.m_w_bytes);
  EXPECT_GT(block.m_w_bytes, 0);
  // At least the output [2, 16, 32] float32 and W's inputs are held.
  EXPECT_GE(block.m_b_bytes, 2 * 16 * 32 * 4);
  std::cout << "block b=2: F " << block.f_seconds << " s, B " << block.b_seconds << " s, W "
            << block.w_seconds << " s, M_B " << block.m_b_bytes << " B, M_W " << block.m_w_bytes
            << " B\n";
  EXPECT_EQ(rank.trainer->Profile(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StageProfileTest, TheHeadsWorkingMemoryGrowsWithTheVocabularyABlocksDoesNot) {
  // Vocabulary 64 against 4096: the head's passes hold logits-sized buffers
  // [b, s, vocab] float32 only while they run (the logits' gradient in B at
  // least), so its transient grows by at least one such buffer; a middle
  // block's working memory has nothing of the vocabulary.
  constexpr int kLarge = 4096;
  Rank small(Spec(3, 2), {0, 1, 2});
  Rank large(Spec(3, 2, v1::PRECISION_FP32, kLarge), {0, 1, 2});
  ASSERT_NE(small.trainer, nullptr);
  ASSERT_NE(large.trainer, nullptr);
  absl::StatusOr<std::vector<StageProfile>> a = small.trainer->Profile(1);
  absl::StatusOr<std::vector<StageProfile>> b = large.trainer->Profile(1);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (int s = 0; s < 3; ++s) EXPECT_GE((*b)[s].transient_bytes, 0) << "virtual stage " << s;
  const int64_t logits_growth = int64_t{2} * 16 * (kLarge - 64) * 4;
  EXPECT_GE((*b)[2].transient_bytes - (*a)[2].transient_bytes, logits_growth);
  EXPECT_EQ((*b)[1].transient_bytes, (*a)[1].transient_bytes);
  EXPECT_LT((*b)[1].transient_bytes, (*b)[2].transient_bytes / 4);
  std::cout << "transient, vocabulary 64 / " << kLarge << ": block " << (*a)[1].transient_bytes
            << " / " << (*b)[1].transient_bytes << " B, head " << (*a)[2].transient_bytes
            << " / " << (*b)[2].transient_bytes << " B (M_B " << (*b)[2].m_b_bytes << " B)\n";
}

// Vocabulary parallelism on one stage: its S and T are timed and metered,
// S leaving at least the hidden state and the shard's logits held for T,
// and T working on at least the logits' gradient; the shard's gradient is
// put back; a job without it has nothing to profile.
TEST(StageProfileTest, TheVocabularyShardsPassesAreTimedAndMetered) {
  constexpr int kVocab = 4096;
  v1::JobSpec spec = Spec(2, 2, v1::PRECISION_FP32, kVocab);
  Rank plain(spec, {0});
  ASSERT_NE(plain.trainer, nullptr);
  absl::StatusOr<std::optional<sched::VocabularyCost>> none = plain.trainer->ProfileVocabulary(1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  spec.mutable_pipeline()->set_vocab_parallel(true);
  Rank rank(spec, {0});
  ASSERT_NE(rank.trainer, nullptr);
  const std::map<std::string, at::Tensor> before = Grads(*rank.trainer);
  absl::StatusOr<std::optional<sched::VocabularyCost>> cost = rank.trainer->ProfileVocabulary(2);
  ASSERT_TRUE(cost.ok()) << cost.status();
  ASSERT_TRUE(cost->has_value());
  const sched::VocabularyCost& c = **cost;
  EXPECT_GT(c.s_seconds, 0);
  EXPECT_GT(c.t_seconds, 0);
  const double tokens = 2 * 16;
  EXPECT_GE(c.m_bytes, tokens * (32 + kVocab) * 4) << "the hidden state and the logits";
  EXPECT_GE(c.transient_bytes, tokens * kVocab * 4) << "the logits' gradient";
  for (const auto& [name, grad] : Grads(*rank.trainer)) {
    EXPECT_TRUE(at::equal(grad, before.at(name))) << name << "'s gradient was not put back";
  }
  std::cout << "vocabulary shard of " << kVocab << ": S " << c.s_seconds << " s, T "
            << c.t_seconds << " s, held " << c.m_bytes << " B, transient " << c.transient_bytes
            << " B\n";
}

TEST(StageProfileTest, ActivationMemoryScalesWithTheMicrobatchSize) {
  Rank one(Spec(3, 2), {0, 1, 2});
  Rank two(Spec(3, 4), {0, 1, 2});
  ASSERT_NE(one.trainer, nullptr);
  ASSERT_NE(two.trainer, nullptr);
  absl::StatusOr<std::vector<StageProfile>> small = one.trainer->Profile(1);
  absl::StatusOr<std::vector<StageProfile>> large = two.trainer->Profile(1);
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_TRUE(large.ok()) << large.status();
  for (int s = 0; s < 3; ++s) {
    const double ratio = double((*large)[s].m_b_bytes) / double((*small)[s].m_b_bytes);
    EXPECT_GE(ratio, 1.8) << "virtual stage " << s;
    EXPECT_LE(ratio, 2.2) << "virtual stage " << s;
  }
}

// Profiling between steps changes nothing a step computes: the .grad
// buffers, the global generator and the parameters are as they were, and
// the following steps' losses and parameters are bit for bit those of a
// trainer that never profiled.
void ExpectProfileLeavesTheModelAsItFoundIt(v1::Precision precision) {
  const v1::JobSpec spec = Spec(2, 2, precision);
  const sched::Schedule schedule = GPipe();
  Rank profiled(spec, {0});
  Rank plain(spec, {0});
  ASSERT_NE(profiled.trainer, nullptr);
  ASSERT_NE(plain.trainer, nullptr);
  std::vector<double> losses[2];
  for (int64_t step = 0; step < 3; ++step) {
    if (step == 1) {
      const std::map<std::string, at::Tensor> grads = Grads(*profiled.trainer);
      std::map<std::string, at::Tensor> params;
      for (const auto& [name, t] : profiled.trainer->Parameters()) params[name] = t.detach().clone();
      const at::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
      ASSERT_TRUE(profiled.trainer->Profile(2).ok());
      EXPECT_TRUE(at::equal(rng, at::detail::getDefaultCPUGenerator().get_state()));
      for (const auto& [name, t] : profiled.trainer->Parameters()) {
        EXPECT_TRUE(at::equal(t.grad(), grads.at(name))) << name << "'s .grad";
        EXPECT_TRUE(at::equal(t, params.at(name))) << name;
      }
    }
    Rank* ranks[2] = {&profiled, &plain};
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<StepResult> result = ranks[i]->trainer->RunStep(step, schedule);
      ASSERT_TRUE(result.ok()) << result.status();
      ASSERT_TRUE(result->loss.has_value());
      losses[i].push_back(*result->loss);
    }
  }
  EXPECT_EQ(losses[0], losses[1]);
  const std::vector<NamedTensor> a = profiled.trainer->OptimizerState();
  const std::vector<NamedTensor> b = plain.trainer->OptimizerState();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

TEST(StageProfileTest, ProfilingLeavesTheModelAsItFoundItFp32) {
  ExpectProfileLeavesTheModelAsItFoundIt(v1::PRECISION_FP32);
}

TEST(StageProfileTest, ProfilingLeavesTheModelAsItFoundItBf16) {
  ExpectProfileLeavesTheModelAsItFoundIt(v1::PRECISION_BF16);
}

// The layout parts (StageTrainer::ProfileLayoutParts): the model cut into
// three virtual stages of one block (then two), whatever the stage holds
// (here all four blocks as one chunk). With a vocabulary of 4096 on h = 32
// the head part
// holds the logits' [b, s, vocab] for its B, which a block never does; the
// stage's own model and gradients are left as they were.
TEST(StageProfileTest, LayoutPartsProfileABlockTheEmbeddingAndTheHeadApart) {
  v1::JobSpec spec = Spec(4, 2);
  spec.mutable_model()->set_vocab(4096);
  Rank rank(spec, {0});
  ASSERT_NE(rank.trainer, nullptr);
  const std::map<std::string, at::Tensor> grads = Grads(*rank.trainer);
  absl::StatusOr<std::vector<StageProfile>> parts = rank.trainer->ProfileLayoutParts(2, 1);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  for (int k = 0; k < 3; ++k) {
    const StageProfile& p = (*parts)[k];
    EXPECT_EQ(p.virtual_stage, k);
    EXPECT_GT(p.f_seconds, 0);
    EXPECT_GT(p.b_seconds, 0);
    EXPECT_GT(p.w_seconds, 0);
    EXPECT_GT(p.bw_seconds, 0);
    EXPECT_GT(p.m_b_bytes, 0);
    EXPECT_LE(p.m_w_bytes, p.m_b_bytes);
  }
  const double logits_bytes = 2.0 * 16 * 4096 * 4;
  EXPECT_GE((*parts)[2].m_b_bytes - (*parts)[1].m_b_bytes, logits_bytes)
      << "the head part holds its logits";
  std::cout << "parts F: " << (*parts)[0].f_seconds << " " << (*parts)[1].f_seconds << " "
            << (*parts)[2].f_seconds << " s\n";
  for (const auto& [name, t] : rank.trainer->Parameters()) {
    EXPECT_TRUE(at::equal(t.grad(), grads.at(name))) << name << "'s .grad";
  }
  // Parts of two blocks: the middle part holds two blocks' activations.
  absl::StatusOr<std::vector<StageProfile>> pairs = rank.trainer->ProfileLayoutParts(2, 2);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 3u);
  EXPECT_NEAR((*pairs)[1].m_b_bytes / (*parts)[1].m_b_bytes, 2.0, 0.1);
  EXPECT_NEAR((*pairs)[2].m_b_bytes - (*pairs)[1].m_b_bytes,
              (*parts)[2].m_b_bytes - (*parts)[1].m_b_bytes, 0.1 * logits_bytes)
      << "the head part holds the same head on two blocks";
  for (const auto& [name, t] : rank.trainer->Parameters()) {
    EXPECT_TRUE(at::equal(t.grad(), grads.at(name))) << name << "'s .grad";
  }
  EXPECT_EQ(rank.trainer->ProfileLayoutParts(0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rank.trainer->ProfileLayoutParts(1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The checksum's sum (StageTrainer::ParameterSum) counts a tied embedding
// once: one rank holding both chunks of a two-chunk model, whose last chunk
// keeps a copy of the embedding as its head, sums what the one-chunk model
// does, where the head is the embedding itself.
TEST(StageTrainerTest, ParameterSumCountsATiedEmbeddingOnce) {
  v1::JobSpec whole = Spec(2, 2);
  whole.mutable_model()->set_tie_embeddings(true);
  v1::JobSpec split = whole;
  split.mutable_pipeline()->set_chunks(2);
  Rank one(whole, {0});
  Rank two(split, {0, 1});
  ASSERT_NE(one.trainer, nullptr);
  ASSERT_NE(two.trainer, nullptr);
  double all = 0;
  for (const auto& [name, t] : two.trainer->Parameters()) all += t.sum().item<double>();
  const double embedding = std::abs(all - one.trainer->ParameterSum());
  EXPECT_GT(embedding, 1e-3) << "the two-chunk rank holds the embedding twice";
  EXPECT_NEAR(two.trainer->ParameterSum(), one.trainer->ParameterSum(), 1e-9 * embedding);
}

// Under synthetic compute the passes wait the cost model's times and the
// memories are the cost model's: the profile echoes it.
TEST(StageProfileTest, SyntheticComputeEchoesTheCostModel) {
  SyntheticCompute synthetic;
  synthetic.stages.assign(1, sched::VirtualStageCost{0.004, 0.008, 0.002, 5000, 2000, 0});
  std::vector<std::unique_ptr<Communicator>> comms = CreateInProcessGroup(1);
  StageTrainerOptions o;
  o.spec = Spec(2, 2);
  o.virtual_stages = {0};
  o.communicator = comms[0].get();
  o.train_batches = Batch;
  o.eval_batches = Batch;
  o.synthetic = synthetic;
  absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(o);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::StatusOr<std::vector<StageProfile>> profile = (*trainer)->Profile(3);
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_EQ(profile->size(), 1u);
  const StageProfile& p = (*profile)[0];
  // A wait lasts at least its time; a loaded machine may add to it.
  EXPECT_GE(p.f_seconds, 0.004);
  EXPECT_LT(p.f_seconds, 0.004 + 0.05);
  EXPECT_GE(p.b_seconds, 0.008);
  EXPECT_LT(p.b_seconds, 0.008 + 0.05);
  EXPECT_GE(p.w_seconds, 0.002);
  EXPECT_LT(p.w_seconds, 0.002 + 0.05);
  EXPECT_EQ(p.m_b_bytes, 5000);
  EXPECT_EQ(p.m_w_bytes, 2000);
  // No model to cut into parts.
  EXPECT_EQ((*trainer)->ProfileLayoutParts(1, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// With GPipe every microbatch's F runs before any B: the step holds all m
// microbatches' activations at once, m·M_B of the one chunk, and B's own
// working set stays below one more M_B. An evaluation after the first step
// (whose forwards remake the mixed-precision weight copies, which a later
// step replaces) changes no step's peak.
void ExpectPeakIsTheMicrobatchesInFlight(v1::Precision precision) {
  Rank rank(Spec(2, 2, precision), {0});
  ASSERT_NE(rank.trainer, nullptr);
  absl::StatusOr<std::vector<StageProfile>> profile = rank.trainer->Profile(1);
  ASSERT_TRUE(profile.ok()) << profile.status();
  const double m_b = (*profile)[0].m_b_bytes;
  const sched::Schedule schedule = GPipe();
  std::vector<double> peaks;
  for (int64_t step = 0; step < 4; ++step) {
    absl::StatusOr<StepResult> result = rank.trainer->RunStep(step, schedule);
    ASSERT_TRUE(result.ok()) << result.status();
    const double peak = result->peak_activation_bytes;
    std::cout << "step " << step << ": peak " << peak << " B, M_B " << m_b << " B\n";
    EXPECT_GE(peak, kMicrobatches * m_b) << "step " << step;
    EXPECT_LE(peak, (kMicrobatches + 1) * m_b) << "step " << step;
    peaks.push_back(peak);
    if (step == 0) ASSERT_TRUE(rank.trainer->Evaluate(step, schedule, 2).ok());
  }
  EXPECT_EQ(peaks[1], peaks[2]);
  EXPECT_EQ(peaks[2], peaks[3]);
}

TEST(StageProfileTest, AStepsPeakActivationMemoryIsItsMicrobatchesInFlightFp32) {
  ExpectPeakIsTheMicrobatchesInFlight(v1::PRECISION_FP32);
}

TEST(StageProfileTest, AStepsPeakActivationMemoryIsItsMicrobatchesInFlightBf16) {
  ExpectPeakIsTheMicrobatchesInFlight(v1::PRECISION_BF16);
}

}  // namespace
}  // namespace zbpp::worker
