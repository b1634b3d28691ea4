// Vocabulary parallelism end to end in the runtime (docs/training.md,
// "Vocabulary parallelism"): with the LM head split by vocabulary over the
// p stages and the schedule's S and T passes placed by
// sched::AddVocabularyPasses, three optimizer steps (clipped, validated
// post-update where the prefixes allow) leave the parameters of the
// single-process, unsharded reference (tests/worker/runtime/equivalence.h),
// the shards equal to the reference embedding's and head's rows. Ranks are
// threads over the order-strict communicator (messages matched by order, as
// NCCL).

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "scheduler/vocabulary_passes.h"
#include "tests/worker/runtime/equivalence.h"
#include "worker/comm/order_strict_communicator.h"
#include "worker/model/vocabulary_shard.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/embedding_exchange.h"
#include "worker/runtime/executor.h"

namespace zbpp::worker {
namespace {

using Case = std::tuple<std::string, int, std::string>;  // schedule, p, architecture

// `name` for p stages with the vocabulary passes placed on a problem whose
// head is about a block's work split over the stages.
absl::StatusOr<sched::Schedule> VocabularySchedule(const std::string& name, int p) {
  absl::StatusOr<sched::Schedule> schedule = ScheduleFor(name, p, 1);
  if (!schedule.ok()) return schedule;
  sched::Problem problem = sched::Problem::Uniform(p, schedule->chunks, schedule->microbatches,
                                                   sched::VirtualStageCost{}, 0.0);
  sched::VocabularyCost vocabulary;
  vocabulary.s_seconds = 1.0 / p;
  vocabulary.t_seconds = 2.0 / p;
  vocabulary.m_bytes = 0.5;
  problem.vocabulary.assign(static_cast<size_t>(p), vocabulary);
  return sched::AddVocabularyPasses(problem, *schedule);
}

// "<architecture>_<schedule>_p<p>", e.g. "llama_zb_2p_p4".
std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return std::get<2>(info.param) + "_" +
         EquivalenceCaseName(std::get<0>(info.param), std::get<1>(info.param), 1,
                             v1::PRECISION_FP32);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const std::string name : {"1f1b", "zb-h1", "zb-2p", "zb-v", "1f1b-interleaved"}) {
    for (int p : {2, 3}) cases.emplace_back(name, p, "gpt");
  }
  for (const std::string name : {"zb-h1", "zb-v"}) cases.emplace_back(name, 2, "llama");
  cases.emplace_back("zb-2p", 4, "llama");
  return cases;
}

// One step's gradients computed by the executor on p ranks with the
// embedding and the head split by vocabulary (gathered and scattered by
// EmbeddingExchange, as StageTrainer does), by name (a shard under its
// VocabularyShardName), and the loss the stage holding the last virtual
// stage recorded.
struct PipelineStep {
  std::map<std::string, at::Tensor> gradients;
  double loss = 0;
  /// Then an evaluation (RunForwardOnly) of step 1's microbatches: its mean
  /// loss, from every shard's statistics.
  double eval_loss = 0;
};

absl::StatusOr<PipelineStep> RunOneStep(const sched::Schedule& schedule,
                                        const v1::JobSpec& spec) {
  const int p = schedule.stages;
  ModelConfig config = *ModelConfigFromSpec(spec.model());
  config.vocab_parallel = true;
  OrderStrictGroup group = CreateOrderStrictGroup(p);
  std::vector<std::vector<std::unique_ptr<ModelChunk>>> chunks(p);
  std::vector<std::vector<std::unique_ptr<WeightGradStore>>> stores(p);
  std::vector<std::unique_ptr<VocabularyShard>> shards;
  std::vector<std::unique_ptr<EmbeddingExchange>> exchanges;
  std::vector<ExecutorOptions> options(p);
  for (int r = 0; r < p; ++r) {
    absl::StatusOr<std::unique_ptr<VocabularyShard>> shard =
        VocabularyShard::Create(config, r, p, spec.seed());
    if (!shard.ok()) return shard.status();
    shards.push_back(*std::move(shard));
    exchanges.push_back(
        std::make_unique<EmbeddingExchange>(shards.back().get(), schedule.stage_of.front() == r));
    ExecutorOptions& o = options[r];
    o.stage = r;
    o.communicator = group.ranks[r].get();
    o.vocabulary = shards.back().get();
    o.microbatch_size = 2;
    o.seq_len = 16;
    o.hidden = spec.model().hidden();
    o.batches = exchanges.back()->Batches(Batch);
    o.recv_timeout = absl::Seconds(20);
    for (int v = 0; v < schedule.num_virtual_stages(); ++v) {
      if (schedule.stage_of[v] != r) continue;
      absl::StatusOr<std::unique_ptr<ModelChunk>> chunk =
          ModelChunk::Create(config, v, schedule.num_virtual_stages(), spec.seed());
      if (!chunk.ok()) return chunk.status();
      chunks[r].push_back(*std::move(chunk));
      stores[r].push_back(std::make_unique<WeightGradStore>());
      o.chunks[v] = {chunks[r].back().get(), stores[r].back().get()};
    }
  }
  std::vector<absl::StatusOr<StepTimeline>> timelines(p, absl::UnknownError("not run"));
  std::vector<absl::StatusOr<StepTimeline>> evaluations(p, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < p; ++r) {
    ranks.emplace_back([&, r] {
      PipelineExecutor executor(options[r]);
      if (absl::Status st = executor.Validate(schedule); !st.ok()) {
        timelines[r] = st;
        return;
      }
      EmbeddingExchange& exchange = *exchanges[r];
      Communicator& pipeline = *group.ranks[r];
      const absl::Duration timeout = absl::Seconds(20);
      const int m = schedule.microbatches;
      absl::Status st = exchange.Gather(pipeline, timeout, 0, m, Batch, /*training=*/true);
      timelines[r] = st.ok() ? executor.RunStep(0, schedule) : st;
      if (!timelines[r].ok()) return;
      st = exchange.Scatter(pipeline, timeout, 0);
      if (st.ok()) st = exchange.Gather(pipeline, timeout, 1, m, Batch, /*training=*/false);
      evaluations[r] = st.ok() ? executor.RunForwardOnly(1, schedule, m, exchange.Batches(Batch))
                               : absl::StatusOr<StepTimeline>(st);
    });
  }
  for (std::thread& t : ranks) t.join();
  PipelineStep out;
  for (int r = 0; r < p; ++r) {
    if (!timelines[r].ok()) return timelines[r].status();
    if (!evaluations[r].ok()) return evaluations[r].status();
    if (timelines[r]->loss_count > 0) {
      out.loss = timelines[r]->loss_sum / timelines[r]->loss_count;
    }
    if (evaluations[r]->loss_count > 0) {
      out.eval_loss = evaluations[r]->loss_sum / evaluations[r]->loss_count;
    }
    for (const auto& chunk : chunks[r]) {
      for (const auto& [name, t] : chunk->parameters()) out.gradients[name] = t.grad();
    }
    for (const auto& [name, t] : shards[r]->parameters()) out.gradients[name] = t.grad();
  }
  if (absl::Status st = group.check_idle(); !st.ok()) return st;
  return out;
}

// The matrices the stages' shards hold: the token embedding and, untied,
// the LM head (a tied model's head is the embedding).
std::vector<std::string> ShardedMatrices(const v1::JobSpec& spec) {
  const VocabularyNames names = VocabularyNamesOf(spec.model().architecture());
  if (spec.model().tie_embeddings()) return {names.embedding};
  return {names.embedding, names.head};
}

class VocabularyGradientTest : public ::testing::TestWithParam<Case> {};

// The gradients of one step equal autograd's on the whole, unsharded model
// (every F, B, W, S and T pass and every message of the schedule), within
// float32 rounding: the shards sum the hidden state's gradient in another
// order than one GEMM does. Tight where the optimizer is not involved.
TEST_P(VocabularyGradientTest, OneStepsGradientsAndLossMatchAutograd) {
  const auto& [name, p, architecture] = GetParam();
  absl::StatusOr<sched::Schedule> schedule = VocabularySchedule(name, p);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  const v1::JobSpec spec = TinySpec(p, schedule->chunks, schedule->microbatches, architecture);
  absl::StatusOr<PipelineStep> step = RunOneStep(*schedule, spec);
  ASSERT_TRUE(step.ok()) << step.status();

  auto model = *ModelChunk::Create(*ModelConfigFromSpec(spec.model()), 0, 1, spec.seed());
  double loss = 0;
  const int m = schedule->microbatches;
  for (int mb = 0; mb < m; ++mb) {
    const MicrobatchData data = Batch(0, mb);
    const at::Tensor l = LanguageModelLoss(model->Forward(data.inputs), data.targets);
    loss += l.item<double>() / m;
    (l / double(m)).backward();
  }
  EXPECT_NEAR(step->loss, loss, 1e-5 * loss);
  double eval_loss = 0;
  {
    at::NoGradGuard no_grad;
    for (int mb = 0; mb < m; ++mb) {
      const MicrobatchData data = Batch(1, mb);
      eval_loss += LanguageModelLoss(model->Forward(data.inputs), data.targets).item<double>() / m;
    }
  }
  EXPECT_NEAR(step->eval_loss, eval_loss, 1e-5 * eval_loss);
  std::map<std::string, at::Tensor> expected;
  double largest = 0;
  for (const auto& [n, t] : model->parameters()) {
    expected[n] = t.grad();
    largest = std::max(largest, t.grad().abs().max().item<double>());
  }
  // The embedding's and the head's rows (one matrix when tied) by shard.
  for (const std::string& matrix : ShardedMatrices(spec)) {
    for (int r = 0; r < p; ++r) {
      const VocabularyRange range = VocabularyRangeOf(spec.model().vocab(), p, r);
      expected[VocabularyShardName(matrix, range)] =
          expected.at(matrix).narrow(0, range.begin, range.size());
    }
    expected.erase(matrix);
  }
  const std::map<std::string, at::Tensor>& got = step->gradients;
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [n, g] : got) {
    ASSERT_EQ(expected.count(n), 1u) << n;
    const at::Tensor& want = expected.at(n);
    const double error = (g - want).abs().max().item<double>();
    // Relative to the tensor's own scale, or to the model's largest
    // gradient for one that is zero in exact arithmetic (the key bias).
    EXPECT_LE(error, 1e-5 * want.abs().max().item<double>() + 1e-6 * largest) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, VocabularyGradientTest, ::testing::ValuesIn(Cases()),
                         CaseName);

// After three AdamW steps. The shards' arithmetic differs from one GEMM's in
// its rounding (VocabularyGradientTest bounds it at 1e-5), and AdamW's
// first steps move every weight by about the learning rate whatever its
// gradient's size, so where a gradient is near zero (the key bias's is zero
// in exact arithmetic) the rounding decides the step's sign: measured up to
// 1.1e-3 of a tensor's largest entry. A wrong gradient (a shard's loss term
// lost, a part not summed) moves weights by far more.
constexpr double kTrainedTolerance = 5e-3;

class VocabularyEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(VocabularyEquivalenceTest, ParametersMatchTheUnshardedHead) {
  const auto& [name, p, architecture] = GetParam();
  absl::StatusOr<sched::Schedule> schedule = VocabularySchedule(name, p);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  ASSERT_TRUE(sched::HoldsVocabularyPasses(*schedule));
  v1::JobSpec spec = TinySpec(p, schedule->chunks, schedule->microbatches, architecture);
  spec.mutable_pipeline()->set_vocab_parallel(true);
  OrderStrictGroup pipeline = CreateOrderStrictGroup(p);
  std::vector<absl::StatusOr<std::map<std::string, at::Tensor>>> params(p);
  std::vector<std::thread> ranks;
  for (int r = 0; r < p; ++r) {
    ranks.emplace_back([&, r] {
      params[r] = TrainWorker(*schedule, spec, r, pipeline.ranks[r].get(), nullptr);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < p; ++r) ASSERT_TRUE(params[r].ok()) << "rank " << r << ": " << params[r].status();
  EXPECT_TRUE(pipeline.check_idle().ok()) << pipeline.check_idle();

  // The reference's embedding and head by rows: what each stage's shards
  // must hold.
  std::map<std::string, at::Tensor> expected = Reference(spec, 1);
  const std::map<std::string, at::Tensor> reference = expected;
  const std::vector<std::string> matrices = ShardedMatrices(spec);
  const VocabularyNames names = VocabularyNamesOf(architecture);
  for (const std::string& matrix : matrices) {
    for (int r = 0; r < p; ++r) {
      const VocabularyRange range = VocabularyRangeOf(spec.model().vocab(), p, r);
      const std::string shard = VocabularyShardName(matrix, range);
      ASSERT_EQ(params[r]->count(shard), 1u) << "rank " << r << " lacks " << shard;
      expected[shard] = reference.at(matrix).narrow(0, range.begin, range.size());
    }
  }
  size_t compared = 0;
  for (int r = 0; r < p; ++r) {
    ExpectNearReference(*params[r], expected,
                        absl::StrCat(architecture, " ", name, " p=", p, " rank ", r),
                        kTrainedTolerance);
    compared += params[r]->size();
    for (const std::string& matrix : {names.embedding, names.head}) {
      EXPECT_EQ(params[r]->count(matrix), 0u) << "rank " << r << " holds the whole " << matrix;
    }
  }
  // Every reference parameter on one rank, the sharded matrices (and the
  // reference's tied copy of the head) as p shards each.
  const size_t whole = reference.count(names.embedding) + reference.count(names.head);
  EXPECT_EQ(compared, reference.size() - whole + p * matrices.size());
}

INSTANTIATE_TEST_SUITE_P(Schedules, VocabularyEquivalenceTest, ::testing::ValuesIn(Cases()),
                         CaseName);

}  // namespace
}  // namespace zbpp::worker
