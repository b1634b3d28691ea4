// The split backward (worker/model/split_linear.h): B (autograd through
// SplitLinear inside a WeightGradScope) followed by W (the store) gives the
// gradients of one fused backward (at::linear), in float32 and in the mixed
// precisions, over a whole GptChunk (embeddings, blocks, head, loss).

#include <algorithm>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "worker/model/gpt.h"
#include "worker/model/split_linear.h"
#include "worker/model/weight_grad_store.h"
#include "tests/worker/test_device.h"

namespace zbpp::worker {
namespace {

using Gradients = std::map<std::string, at::Tensor>;

// Gradients of one microbatch's loss through a one-chunk model, split into B
// and W (`split`) or fused.
Gradients Backward(at::ScalarType compute_type, bool split) {
  GptConfig config;
  config.layers = 2;
  config.hidden = 32;
  config.heads = 4;
  config.vocab = 64;
  config.seq_len = 16;
  config.ffn_hidden = 128;
  config.compute_type = compute_type;
  const c10::Device device = TestDevice();
  auto chunk = GptChunk::Create(config, /*stage=*/0, /*num_stages=*/1, /*seed=*/11, device);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor tokens = at::randint(config.vocab, {2, 17}, gen, at::kLong).to(device);
  const at::Tensor inputs = tokens.narrow(1, 0, 16).contiguous();
  const at::Tensor targets = tokens.narrow(1, 1, 16).contiguous();
  WeightGradStore store;
  if (split) {
    at::Tensor loss;
    {
      WeightGradScope scope(&store, /*microbatch=*/0);
      loss = LanguageModelLoss((*chunk)->Forward(inputs), targets);
    }
    loss.backward();  // B
    for (const NamedTensor& p : (*chunk)->parameters()) {
      if (p.first.find("mlp.fc.weight") != std::string::npos) {
        EXPECT_FALSE(p.second.grad().defined()) << p.first << " got its gradient in B";
      }
    }
    EXPECT_TRUE(store.RunW(0).ok());  // W
  } else {
    LanguageModelLoss((*chunk)->Forward(inputs), targets).backward();
  }
  Gradients out;
  for (const auto& [name, p] : (*chunk)->parameters()) {
    EXPECT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().scalar_type(), at::kFloat) << name << ": master gradients are float32";
    EXPECT_EQ(p.grad().device(), TestDevice()) << name;
    out[name] = p.grad().clone();
  }
  return out;
}

// max over parameters of max|a - b| / max|b|.
double MaxRelativeError(const Gradients& a, const Gradients& b) {
  double worst = 0;
  for (const auto& [name, want] : b) {
    const double scale = std::max(want.abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (a.at(name) - want).abs().max().item<double>() / scale);
  }
  return worst;
}

TEST(SplitBackwardTest, BThenWEqualsTheFusedBackward) {
  const Gradients fp32 = Backward(at::kFloat, /*split=*/false);
  EXPECT_LE(MaxRelativeError(Backward(at::kFloat, true), fp32), 1e-5);
  for (auto [type, tolerance] : {std::pair{at::kBFloat16, 1e-2}, std::pair{at::kHalf, 1e-2}}) {
    SCOPED_TRACE(at::toString(type));
    const Gradients fused = Backward(type, false);
    const Gradients split = Backward(type, true);
    EXPECT_LE(MaxRelativeError(split, fused), tolerance);
    // The 16-bit products ran: the gradients are not float32's.
    EXPECT_GT(MaxRelativeError(split, fp32), 1e-6);
  }
}

}  // namespace
}  // namespace zbpp::worker
