// The model families in the coordinator: the job-spec rules of each family
// (coordinator/core/job_spec_check.cc, each naming its field), and their
// analytic parameters, FLOPs and memory (coordinator/core/model_costs.h)
// against counts known from the published models.

#include <functional>
#include <string>
#include <vector>

#include "coordinator/core/data_parallel.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/model_costs.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/model_specs.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::Llama3_8B;
using zbpp::v1::JobSpec;

// A small llama job every rule accepts: 4 blocks on 2 stages, GQA 4:2.
JobSpec LlamaSpec() {
  JobSpec spec;
  spec.set_name("tiny-llama");
  zbpp::v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("llama");
  model->set_layers(4);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_kv_heads(2);
  model->set_vocab(256);
  model->set_seq_len(64);
  model->set_rope_theta(500000);
  model->set_norm_eps(1e-6);
  model->set_tie_embeddings(true);
  spec.mutable_dataset()->set_builtin("bible-kjv");
  spec.mutable_pipeline()->set_stages(2);
  spec.mutable_pipeline()->set_microbatches(4);
  spec.mutable_pipeline()->set_microbatch_size(2);
  spec.mutable_schedule()->set_name("zb-h1");
  spec.mutable_optimizer()->set_learning_rate(1e-3);
  spec.set_steps(10);
  return spec;
}

std::string Error(const JobSpec& spec) {
  return std::string(ValidateJobSpec(spec).message());
}

TEST(ModelSpecCheck, LlamaSpecPasses) {
  EXPECT_TRUE(ValidateJobSpec(LlamaSpec()).ok()) << ValidateJobSpec(LlamaSpec());
}

TEST(ModelSpecCheck, InconsistentShapesNameTheirField) {
  struct Case {
    std::function<void(zbpp::v1::ModelSpec&)> edit;
    std::string field;
    std::string reason;
  };
  const Case cases[] = {
      {[](auto& m) { m.set_architecture("mamba"); }, "model.architecture", "known: gpt, llama"},
      {[](auto& m) { m.set_hidden(66); }, "model.hidden", "not divisible by model.heads"},
      {[](auto& m) { m.set_kv_heads(3); }, "model.kv_heads", "does not divide model.heads"},
      {[](auto& m) { m.set_kv_heads(8); }, "model.kv_heads", ""},
      {[](auto& m) { m.set_kv_heads(0); }, "model.kv_heads", ""},
      {[](auto& m) { m.set_hidden(72); m.set_heads(8); m.set_kv_heads(4); },
       "model.hidden", "head dim 9 must be even"},
      {[](auto& m) { m.set_rope_theta(0); }, "model.rope_theta", "must be > 0"},
      {[](auto& m) { m.set_rope_theta(1.0 / 0.0); }, "model.rope_theta", ""},
      {[](auto& m) { m.set_norm_eps(1); }, "model.norm_eps", "must be in (0, 1)"},
      {[](auto& m) { m.set_norm_eps(-1e-5); }, "model.norm_eps", ""},
      {[](auto& m) { m.set_architecture("gpt"); m.clear_rope_theta(); }, "model.kv_heads",
       "gpt has no grouped-query attention"},
      {[](auto& m) { m.set_architecture("gpt"); m.clear_kv_heads(); }, "model.rope_theta",
       "gpt learns its positions"},
  };
  for (const Case& c : cases) {
    JobSpec spec = LlamaSpec();
    c.edit(*spec.mutable_model());
    const absl::Status status = ValidateJobSpec(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(Error(spec), ::testing::StartsWith(c.field)) << Error(spec);
    EXPECT_THAT(Error(spec), HasSubstr(c.reason)) << Error(spec);
  }
  // gpt takes kv_heads equal to heads (plain multi-head attention).
  JobSpec gpt = LlamaSpec();
  gpt.mutable_model()->set_architecture("gpt");
  gpt.mutable_model()->clear_rope_theta();
  gpt.mutable_model()->set_kv_heads(4);
  EXPECT_TRUE(ValidateJobSpec(gpt).ok()) << ValidateJobSpec(gpt);
}

TEST(ModelCosts, Llama3_8BHasItsPublishedParameterCount) {
  const zbpp::v1::ModelSpec model = Llama3_8B();
  // q 4096², k and v 4096·1024, o 4096², gate/up/down 3·4096·14336, two
  // RMSNorms: 218,112,000 per layer.
  EXPECT_DOUBLE_EQ(BlockCostsOf(model, 1).parameters, 218112000);
  double total = 0;
  for (int stage = 0; stage < 8; ++stage) {
    total += StageParameterCount(model, model.layers() / 8, stage, 8, false);
  }
  // 8.03B: 32 layers, embedding and head 128256·4096 each, the final norm.
  EXPECT_DOUBLE_EQ(total, 8030261248.0);
  // Tied on one stage: one matrix fewer; split, the last stage holds a copy.
  zbpp::v1::ModelSpec tied = model;
  tied.set_tie_embeddings(true);
  EXPECT_DOUBLE_EQ(StageParameterCount(tied, tied.layers(), 0, 1, false), 8030261248.0 - 128256.0 * 4096);
  EXPECT_DOUBLE_EQ(StageParameterCount(tied, tied.layers() / 8, 7, 8, false),
                   StageParameterCount(model, model.layers() / 8, 7, 8, false));
}

TEST(ModelCosts, LlamaFlopsAndMemoryFollowItsProjections) {
  const zbpp::v1::ModelSpec model = Llama3_8B();
  const double s = 8192, b = 1, h = 4096, f = 14336, kv = 1024, a = 32;
  const BlockCosts llama = BlockCostsOf(model, b);
  // 2 FLOPs per multiply-add of every projection, plus QK^T and AV.
  EXPECT_DOUBLE_EQ(llama.forward_flops,
                   2 * s * b * (2 * h * h + 2 * h * kv + 3 * h * f) + 4 * s * s * b * h);
  EXPECT_DOUBLE_EQ(llama.m_b_bytes, s * b * (12 * h + 4 * kv + 8 * f + 5 * a * s));
  EXPECT_DOUBLE_EQ(llama.m_w_bytes, s * b * (12 * h + 4 * kv + 6 * f));
  // gpt keeps the paper's §2 formulas.
  zbpp::v1::ModelSpec gpt = model;
  gpt.set_architecture("gpt");
  gpt.clear_ffn_hidden();
  const BlockCosts paper = BlockCostsOf(gpt, b);
  EXPECT_DOUBLE_EQ(paper.m_b_bytes, s * b * (34 * h + 5 * a * s));
  EXPECT_DOUBLE_EQ(paper.m_w_bytes, 32 * s * b * h);
  EXPECT_DOUBLE_EQ(paper.forward_flops, 24 * s * b * h * h + 4 * s * s * b * h);
}

TEST(ModelCosts, InitialProblemUsesTheFamilysCosts) {
  JobSpec spec = LlamaSpec();
  absl::StatusOr<sched::Problem> llama = InitialProblem(spec);
  ASSERT_TRUE(llama.ok()) << llama.status();
  const BlockCosts block = BlockCostsOf(spec.model(), 2);
  // 2 blocks per virtual stage.
  EXPECT_DOUBLE_EQ(llama->virtual_stages[0].m_b_bytes, 2 * block.m_b_bytes);
  EXPECT_DOUBLE_EQ(llama->virtual_stages[0].m_w_bytes, 2 * block.m_w_bytes);
  spec.mutable_model()->set_architecture("gpt");
  spec.mutable_model()->clear_kv_heads();
  spec.mutable_model()->clear_rope_theta();
  absl::StatusOr<sched::Problem> gpt = InitialProblem(spec);
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  // GQA and SwiGLU at f = 4h: 2h² + h² + 12h² per block against gpt's 12h².
  EXPECT_GT(llama->virtual_stages[0].f_seconds, gpt->virtual_stages[0].f_seconds);
}

TEST(ModelCosts, LogitsBytesCountTheLossCopies) {
  JobSpec spec = LlamaSpec();  // b 2, s 64, vocab 256.
  EXPECT_DOUBLE_EQ(LogitsBytes(spec), 2 * 64 * 256 * 12.0);
  spec.set_precision(zbpp::v1::PRECISION_BF16);
  EXPECT_DOUBLE_EQ(LogitsBytes(spec), 2 * 64 * 256 * 16.0);
}

TEST(ModelCosts, MemoryEstimatePutsTheLogitsOnTheLastStagesRank) {
  JobSpec spec = LlamaSpec();
  spec.mutable_model()->set_vocab(1 << 20);
  // V placement over 2 stages: stage 0 holds virtual stages 0 and 3.
  zbpp::v1::ScheduleVersion version;
  version.mutable_schedule()->set_stages(2);
  version.mutable_schedule()->set_chunks(2);
  for (int stage : {0, 1, 1, 0}) version.mutable_schedule()->add_stage_of(stage);
  const std::vector<StageMemoryEstimate> ranks = EstimateStageMemory(spec, version);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(ranks[0].logits_bytes, LogitsBytes(spec));
  EXPECT_DOUBLE_EQ(ranks[1].logits_bytes, 0);
  EXPECT_DOUBLE_EQ(ranks[0].total_bytes(),
                   ranks[0].state_bytes + ranks[0].activation_bytes + LogitsBytes(spec));
  EXPECT_THAT(DescribeStageMemory(0, ranks[0]), HasSubstr("1.50 GiB of logits)"));
  EXPECT_THAT(DescribeStageMemory(1, ranks[1]), ::testing::Not(HasSubstr("logits")));
}

}  // namespace
}  // namespace zbpp::coordinator
