// The llama family (worker/model/llama.cc) against the transformers
// LlamaForCausalLM computation written out in float64 (explicit per-pair
// rotations, query head i reading key/value head i / (heads/kv_heads), s x s
// scores with a materialised causal mask, silu(gate)·up), the split into
// chunks, tied embeddings, and the spec rules naming their fields.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "tests/worker/test_device.h"
#include "worker/model/llama.h"

namespace zbpp::worker {
namespace {

ModelConfig TinyLlama(bool tied, at::ScalarType type = at::kFloat) {
  ModelConfig c;
  c.architecture = "llama";
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.kv_heads = 2;
  c.vocab = 64;
  c.seq_len = 16;
  c.ffn_hidden = 48;
  c.rope_theta = 500000;
  c.norm_eps = 1e-6;
  c.tie_embeddings = tied;
  c.compute_type = type;
  return c;
}

double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor want = b.to(at::kCPU).to(at::kDouble);
  const double scale = std::max(want.abs().max().item<double>(), 1e-30);
  return (a.to(at::kCPU).to(at::kDouble) - want).abs().max().item<double>() / scale;
}

// Rotates pairs (x_i, x_{i+d/2}) of x [b, n, s, d] by position·θ^(−2i/d),
// angles in float64.
at::Tensor Rotate(const at::Tensor& x, double theta) {
  const int64_t s = x.size(2), d = x.size(3), half = d / 2;
  at::Tensor angle = at::empty({s, half}, x.options());
  for (int64_t pos = 0; pos < s; ++pos) {
    for (int64_t i = 0; i < half; ++i) {
      angle[pos][i] = double(pos) * std::pow(theta, -2.0 * double(i) / double(d));
    }
  }
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * angle.cos() - x2 * angle.sin(), x2 * angle.cos() + x1 * angle.sin()}, -1);
}

// Logits of the whole model from `params` (by name), float64.
at::Tensor ReferenceLogits(const ModelConfig& c, const std::map<std::string, at::Tensor>& params,
                           const at::Tensor& tokens) {
  auto p = [&](const std::string& name) { return params.at(name); };
  const int64_t b = tokens.size(0), s = tokens.size(1), a = c.heads, g = c.kv_heads;
  const int64_t d = c.hidden / a;
  auto norm = [&](const std::string& name, const at::Tensor& x) {
    return p(name) * x / at::sqrt((x * x).mean({-1}, true) + c.norm_eps);
  };
  at::Tensor x = at::embedding(p("model.embed_tokens.weight"), tokens);
  const at::Tensor future = at::ones({s, s}, tokens.options().dtype(at::kBool)).triu(1);
  for (int l = 0; l < c.layers; ++l) {
    const std::string n = "model.layers." + std::to_string(l) + ".";
    const at::Tensor in = norm(n + "input_layernorm.weight", x);
    auto proj = [&](const std::string& name, int64_t heads) {
      return at::linear(in, p(n + name + ".weight")).view({b, s, heads, d}).transpose(1, 2);
    };
    const at::Tensor q = Rotate(proj("self_attn.q_proj", a), c.rope_theta);
    const at::Tensor k = Rotate(proj("self_attn.k_proj", g), c.rope_theta);
    const at::Tensor v = proj("self_attn.v_proj", g);
    std::vector<at::Tensor> outputs;
    for (int64_t i = 0; i < a; ++i) {
      const int64_t j = i / (a / g);
      const at::Tensor scores =
          at::matmul(q.select(1, i), k.select(1, j).transpose(-2, -1)) / std::sqrt(double(d));
      outputs.push_back(
          at::matmul(at::softmax(scores.masked_fill(future, -INFINITY), -1), v.select(1, j)));
    }
    const at::Tensor y = at::stack(outputs, 1).transpose(1, 2).reshape({b, s, a * d});
    x = x + at::linear(y, p(n + "self_attn.o_proj.weight"));
    const at::Tensor m = norm(n + "post_attention_layernorm.weight", x);
    const at::Tensor gate = at::linear(m, p(n + "mlp.gate_proj.weight"));
    x = x + at::linear(gate * at::sigmoid(gate) * at::linear(m, p(n + "mlp.up_proj.weight")),
                       p(n + "mlp.down_proj.weight"));
  }
  const std::string head = c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  return at::linear(norm("model.norm.weight", x), p(head));
}

std::map<std::string, at::Tensor> Float64Leaves(const ModelChunk& chunk) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : chunk.parameters()) {
    out[name] = t.detach().to(at::kCPU).to(at::kDouble).requires_grad_(true);
  }
  return out;
}

TEST(LlamaChunkTest, LogitsAndGradientsEqualTheWrittenOutModel) {
  const c10::Device device = TestDevice();
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const ModelConfig config = TinyLlama(tied);
    auto chunk = ModelChunk::Create(config, 0, 1, /*seed=*/5, device);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    // One chunk holding both ends: tied means no lm_head.weight at all.
    bool has_head = false;
    for (const auto& [name, t] : (*chunk)->parameters()) has_head |= name == "lm_head.weight";
    EXPECT_EQ(has_head, !tied);
    EXPECT_FALSE((*chunk)->tied_embedding().defined());

    const at::Tensor tokens = at::randint(config.vocab, {2, 12}, at::kLong);
    const at::Tensor targets = at::randint(config.vocab, {2, 12}, at::kLong);
    auto params = Float64Leaves(**chunk);
    const at::Tensor want = ReferenceLogits(config, params, tokens);
    const at::Tensor got = (*chunk)->Forward(tokens.to(device));
    EXPECT_LT(RelativeError(got, want), 1e-5);

    LanguageModelLoss(want, targets).backward();
    LanguageModelLoss(got, targets.to(device)).backward();
    for (const auto& [name, t] : (*chunk)->parameters()) {
      ASSERT_TRUE(t.grad().defined()) << name;
      EXPECT_LT(RelativeError(t.grad(), params.at(name).grad()), 1e-4) << name;
    }
  }
}

TEST(LlamaChunkTest, BFloat16LogitsStayCloseToTheFloat64Model) {
  const ModelConfig config = TinyLlama(false, at::kBFloat16);
  auto chunk = ModelChunk::Create(config, 0, 1, /*seed=*/5, TestDevice());
  ASSERT_TRUE(chunk.ok());
  const at::Tensor tokens = at::randint(config.vocab, {2, 12}, at::kLong);
  at::Tensor got;
  {
    c10::NoGradGuard no_grad;
    got = (*chunk)->Forward(tokens.to(TestDevice()));
  }
  EXPECT_EQ(got.scalar_type(), at::kBFloat16);
  EXPECT_LT(RelativeError(got, ReferenceLogits(config, Float64Leaves(**chunk), tokens)), 0.05);
}

TEST(LlamaChunkTest, ChunksComposeToTheWholeModelAndTiedCopiesStartEqual) {
  const c10::Device device = TestDevice();
  c10::NoGradGuard no_grad;
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const ModelConfig config = TinyLlama(tied);
    auto whole = ModelChunk::Create(config, 0, 1, 9, device);
    auto first = ModelChunk::Create(config, 0, 2, 9, device);
    auto last = ModelChunk::Create(config, 1, 2, 9, device);
    ASSERT_TRUE(whole.ok() && first.ok() && last.ok());
    const at::Tensor tokens = at::randint(config.vocab, {2, 10}, at::kLong).to(device);
    EXPECT_TRUE(at::equal((*last)->Forward((*first)->Forward(tokens)), (*whole)->Forward(tokens)));
    EXPECT_EQ((*first)->tied_embedding().defined(), tied);
    EXPECT_EQ((*last)->tied_embedding().defined(), tied);
    if (tied) {
      EXPECT_TRUE(at::equal((*first)->tied_embedding(), (*last)->tied_embedding()));
      EXPECT_FALSE((*first)->tied_embedding().is_same((*last)->tied_embedding()));
    }
    // Every linear layer goes through the split backward: 7 per block, and
    // the head on the last chunk.
    EXPECT_EQ((*first)->linear_layers().size(), 7u);
    EXPECT_EQ((*last)->linear_layers().size(), 8u);
  }
}

// PipelineSpec.layout: any split of the blocks gives the same parameters,
// bit for bit, under their global names (each is initialised from the seed
// and its name), and the chunks compose to the whole model.
TEST(LlamaChunkTest, EveryLayoutHoldsTheSameParametersAndComposesToTheWholeModel) {
  const c10::Device device = TestDevice();
  c10::NoGradGuard no_grad;
  ModelConfig config = TinyLlama(/*tied=*/true);
  config.layers = 6;
  auto whole = ModelChunk::Create(config, 0, 1, 9, device);
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::map<std::string, at::Tensor> expected((*whole)->parameters().begin(),
                                             (*whole)->parameters().end());
  const at::Tensor tokens = at::randint(config.vocab, {2, 10}, at::kLong).to(device);
  const at::Tensor logits = (*whole)->Forward(tokens);
  for (const std::vector<int>& layout :
       std::vector<std::vector<int>>{{6}, {3, 3}, {5, 1}, {1, 5}, {1, 2, 3}, {2, 1, 1, 2}}) {
    SCOPED_TRACE(::testing::PrintToString(layout));
    config.layout = layout;
    const int n = static_cast<int>(layout.size());
    at::Tensor x = tokens;
    int next_block = 0;
    for (int v = 0; v < n; ++v) {
      auto chunk = ModelChunk::Create(config, v, n, 9, device);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      EXPECT_EQ((*chunk)->first_block(), next_block);
      EXPECT_EQ((*chunk)->end_block() - (*chunk)->first_block(), layout[v]);
      next_block = (*chunk)->end_block();
      for (const auto& [name, t] : (*chunk)->parameters()) {
        // The head's copy of a tied embedding carries the head's name.
        if (expected.count(name) == 0) continue;
        EXPECT_TRUE(at::equal(t, expected.at(name))) << name;
      }
      x = (*chunk)->Forward(x);
    }
    EXPECT_EQ(next_block, config.layers);
    EXPECT_TRUE(at::equal(x, logits));
  }
}

TEST(LlamaChunkTest, ALayoutThatDoesNotFitIsRefusedNamingTheField) {
  ModelConfig config = TinyLlama(false);
  config.layers = 6;
  for (const std::vector<int>& layout :
       std::vector<std::vector<int>>{{3, 2}, {6, 0}, {2, 2, 2}, {7, -1}}) {
    SCOPED_TRACE(::testing::PrintToString(layout));
    config.layout = layout;
    auto chunk = ModelChunk::Create(config, 0, 2, 9, TestDevice());
    ASSERT_FALSE(chunk.ok());
    EXPECT_EQ(chunk.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(chunk.status().message().find("pipeline.layout"), std::string::npos)
        << chunk.status();
  }
}

TEST(LlamaChunkTest, ForwardIsCausal) {
  c10::NoGradGuard no_grad;
  auto chunk = ModelChunk::Create(TinyLlama(false), 0, 1, 3, TestDevice());
  ASSERT_TRUE(chunk.ok());
  at::Tensor tokens = at::randint(64, {1, 12}, at::kLong);
  const at::Tensor before = (*chunk)->Forward(tokens.to(TestDevice()));
  tokens[0][8] = (tokens[0][8].item<int64_t>() + 1) % 64;
  const at::Tensor after = (*chunk)->Forward(tokens.to(TestDevice()));
  EXPECT_TRUE(at::equal(before.narrow(1, 0, 8), after.narrow(1, 0, 8)));
  EXPECT_FALSE(at::allclose(before.narrow(1, 8, 4), after.narrow(1, 8, 4)));
}

TEST(RotaryTest, CosSinFollowTheFrequencies) {
  // d = 4, θ = 100: frequencies 1 and 0.1, repeated over both halves.
  auto [cos, sin] = RotaryCosSin(/*seq_len=*/3, /*head_dim=*/4, /*theta=*/100);
  ASSERT_EQ(cos.sizes(), (at::IntArrayRef{3, 4}));
  EXPECT_FLOAT_EQ(cos[2][0].item<float>(), std::cos(2.0f));
  EXPECT_FLOAT_EQ(sin[2][1].item<float>(), std::sin(0.2f));
  EXPECT_FLOAT_EQ(sin[2][2].item<float>(), std::sin(2.0f));
  EXPECT_FLOAT_EQ(cos[0][3].item<float>(), 1.0f);
}

v1::ModelSpec LlamaSpec() {
  v1::ModelSpec spec;
  spec.set_architecture("llama");
  spec.set_layers(2);
  spec.set_hidden(32);
  spec.set_heads(4);
  spec.set_kv_heads(2);
  spec.set_vocab(64);
  spec.set_seq_len(16);
  return spec;
}

TEST(LlamaSpecTest, DefaultsAndInconsistentShapesNamingTheField) {
  absl::StatusOr<ModelConfig> config = ModelConfigFromSpec(LlamaSpec());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kv_heads, 2);
  EXPECT_EQ(config->rope_theta, 10000);
  EXPECT_EQ(config->norm_eps, 1e-5);
  EXPECT_EQ(config->ffn_hidden, 128);
  auto error = [](const v1::ModelSpec& spec) {
    return std::string(ModelConfigFromSpec(spec).status().message());
  };
  v1::ModelSpec spec = LlamaSpec();
  spec.set_kv_heads(3);
  EXPECT_NE(error(spec).find("model.kv_heads"), std::string::npos) << error(spec);
  spec = LlamaSpec();
  spec.set_hidden(36);  // Head dim 9: RoPE needs an even one.
  EXPECT_NE(error(spec).find("head dim 9"), std::string::npos) << error(spec);
  spec = LlamaSpec();
  spec.set_rope_theta(-1);
  EXPECT_NE(error(spec).find("model.rope_theta"), std::string::npos) << error(spec);
  spec = LlamaSpec();
  spec.set_norm_eps(0);
  EXPECT_NE(error(spec).find("model.norm_eps"), std::string::npos) << error(spec);
  spec = LlamaSpec();
  spec.set_architecture("gpt");  // gpt has no GQA.
  EXPECT_NE(error(spec).find("model.kv_heads"), std::string::npos) << error(spec);
  spec.set_architecture("mamba");
  EXPECT_NE(error(spec).find("known: gpt, llama"), std::string::npos) << error(spec);
}

}  // namespace
}  // namespace zbpp::worker
