// GptChunk's attention (worker/model/gpt.cc: causal
// at::scaled_dot_product_attention) against the textbook formula. The
// equivalence tests elsewhere run the same model code on both sides, so they
// would not notice a wrong scale, head layout or mask direction; these do.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include "worker/model/gpt.h"
#include "tests/worker/test_device.h"
#include "tests/worker/tiny_gpt.h"

namespace zbpp::worker {
namespace {

// max|a - b| / max|b|.
double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor want = b.to(at::kDouble);
  const double scale = std::max(want.abs().max().item<double>(), 1e-30);
  return (a.to(at::kDouble) - want).abs().max().item<double>() / scale;
}

// Logits [b, s, vocab] of a one-chunk model from `params` (the chunk's, by
// name), in float64 with the attention written out: Q·Kᵀ/√d over s x s
// scores, a materialised causal mask, softmax, then ·V (GPT-2's block).
at::Tensor ReferenceLogits(const GptConfig& c, const std::map<std::string, at::Tensor>& params,
                           const at::Tensor& tokens) {
  auto p = [&](const std::string& name) { return params.at(name); };
  const int64_t b = tokens.size(0), s = tokens.size(1), h = c.hidden, a = c.heads, d = h / a;
  auto ln = [&](const std::string& name, const at::Tensor& x) {
    return at::layer_norm(x, {h}, p(name + ".weight"), p(name + ".bias"), 1e-5);
  };
  auto linear = [&](const std::string& name, const at::Tensor& x) {
    return at::linear(x, p(name + ".weight"), p(name + ".bias"));
  };
  at::Tensor x = at::embedding(p("embed.token"), tokens) +
                 p("embed.position").narrow(0, 0, s).unsqueeze(0);
  const at::Tensor future = at::ones({s, s}, x.options().dtype(at::kBool)).triu(1);
  for (int l = 0; l < c.layers; ++l) {
    const std::string name = "block" + std::to_string(l);
    std::vector<at::Tensor> qkv = linear(name + ".attn.qkv", ln(name + ".ln1", x)).split(h, 2);
    auto heads = [&](const at::Tensor& t) { return t.view({b, s, a, d}).transpose(1, 2); };
    const at::Tensor scores =
        at::matmul(heads(qkv[0]), heads(qkv[1]).transpose(-2, -1)) / std::sqrt(double(d));
    const at::Tensor probabilities = at::softmax(scores.masked_fill(future, -INFINITY), -1);
    const at::Tensor y = at::matmul(probabilities, heads(qkv[2])).transpose(1, 2).reshape({b, s, h});
    x = x + linear(name + ".attn.proj", y);
    x = x + linear(name + ".mlp.proj", at::gelu(linear(name + ".mlp.fc", ln(name + ".ln2", x))));
  }
  return at::linear(ln("final_ln", x), p("head.weight"));
}

// The chunk's logits in every precision, and its float32 gradients, equal
// the float64 textbook model's with the same parameters.
TEST(GptChunkTest, ForwardAndBackwardEqualTheUnfusedCausalAttention) {
  const c10::Device device = TestDevice();
  at::Generator gen = at::detail::createCPUGenerator(3);
  const at::Tensor tokens = at::randint(64, {2, 16}, gen, at::kLong).to(device);
  const at::Tensor targets = at::randint(64, {2, 16}, gen, at::kLong).to(device);
  for (auto [type, tolerance] :
       {std::pair{at::kFloat, 1e-5}, std::pair{at::kBFloat16, 2e-2}, std::pair{at::kHalf, 5e-3}}) {
    SCOPED_TRACE(at::toString(type));
    const GptConfig config = TinyGptConfig(type);
    auto chunk = GptChunk::Create(config, /*stage=*/0, /*num_stages=*/1, /*seed=*/7, device);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    std::map<std::string, at::Tensor> params;
    for (const auto& [name, t] : (*chunk)->parameters()) {
      params[name] = t.detach().to(at::kDouble).requires_grad_(true);
    }
    const at::Tensor want = ReferenceLogits(config, params, tokens);
    const at::Tensor got = (*chunk)->Forward(tokens);
    EXPECT_EQ(got.scalar_type(), type);
    EXPECT_LE(RelativeError(got, want), tolerance);
    if (type != at::kFloat) continue;
    LanguageModelLoss(want, targets).backward();
    LanguageModelLoss(got, targets).backward();
    for (const auto& [name, t] : (*chunk)->parameters()) {
      at::Tensor grad = t.grad(), want_grad = params[name].grad();
      if (name.find("attn.qkv.bias") != std::string::npos) {
        // The key bias shifts all of a query's scores by the same amount:
        // its true gradient is 0 and both sides hold only rounding there.
        const int64_t h = config.hidden;
        grad = at::cat({grad.narrow(0, 0, h), grad.narrow(0, 2 * h, h)});
        want_grad = at::cat({want_grad.narrow(0, 0, h), want_grad.narrow(0, 2 * h, h)});
      }
      EXPECT_LE(RelativeError(grad, want_grad), 1e-5) << name;
    }
  }
}

// Position i's logits do not depend on tokens after i: changing token 9
// leaves positions 0..8 as they were and changes 9..15.
TEST(GptChunkTest, ForwardIsCausal) {
  const c10::Device device = TestDevice();
  for (at::ScalarType type : {at::kFloat, at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(at::toString(type));
    auto chunk = GptChunk::Create(TinyGptConfig(type), 0, 1, /*seed=*/7, device);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    at::Generator gen = at::detail::createCPUGenerator(4);
    const at::Tensor tokens = at::randint(64, {2, 16}, gen, at::kLong).to(device);
    at::Tensor changed = tokens.clone();
    changed.select(1, 9).add_(1).remainder_(64);
    c10::NoGradGuard no_grad;
    const at::Tensor before = (*chunk)->Forward(tokens).to(at::kFloat);
    const at::Tensor after = (*chunk)->Forward(changed).to(at::kFloat);
    EXPECT_LE(RelativeError(after.narrow(1, 0, 9), before.narrow(1, 0, 9)), 1e-6);
    for (int i = 9; i < 16; ++i) {
      EXPECT_GT(RelativeError(after.select(1, i), before.select(1, i)), 1e-3) << "position " << i;
    }
  }
}

}  // namespace
}  // namespace zbpp::worker
