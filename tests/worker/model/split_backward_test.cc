// The split backward (worker/model/split_linear.h): B (autograd through
// SplitLinear inside a WeightGradScope) followed by W (the store) gives the
// gradients of one fused backward (at::linear), in float32 and in the mixed
// precisions, over a whole GptChunk (embeddings, blocks, head, loss) and over
// a chunk fed hidden states; the compute-type copies of the weights follow
// their parameters.

#include <algorithm>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "worker/model/gpt.h"
#include "worker/model/split_linear.h"
#include "worker/model/weight_grad_store.h"
#include "tests/worker/test_device.h"
#include "tests/worker/tiny_gpt.h"

namespace zbpp::worker {
namespace {

using Gradients = std::map<std::string, at::Tensor>;

// Gradients of one microbatch's loss through chunk `stage` of a model cut
// in `num_stages`, split into B and W (`split`; the W pass as `buckets`
// partial ones, one per gradient bucket, last bucket first) or fused. A
// chunk after the first takes hidden states as a leaf that requires its
// gradient, as the executor's received activation does; its gradient is
// returned as "input".
Gradients Backward(at::ScalarType compute_type, bool split, int buckets = 1, int stage = 0,
                   int num_stages = 1) {
  const GptConfig config = TinyGptConfig(compute_type);
  const c10::Device device = TestDevice();
  auto chunk = GptChunk::Create(config, stage, num_stages, /*seed=*/11, device);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::Tensor tokens = at::randint(config.vocab, {2, 17}, gen, at::kLong).to(device);
  const at::Tensor targets = tokens.narrow(1, 1, 16).contiguous();
  at::Tensor inputs = tokens.narrow(1, 0, 16).contiguous();
  if (stage > 0) {
    inputs = at::randn({2, 16, config.hidden}, gen).to(device).requires_grad_(true);
  }
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
    if (buckets == 1) {
      EXPECT_TRUE(store.RunW(0).ok());  // W
    } else {
      absl::StatusOr<std::vector<std::vector<at::Tensor>>> split_params =
          GradientBuckets(**chunk, buckets);
      EXPECT_TRUE(split_params.ok()) << split_params.status();
      for (int b = buckets - 1; b >= 0; --b) EXPECT_TRUE(store.RunW(0, &(*split_params)[b]).ok());
      // Every entry ran: nothing of the microbatch is left.
      EXPECT_EQ(store.RunW(0).code(), absl::StatusCode::kFailedPrecondition);
    }
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
  if (stage > 0) out["input"] = inputs.grad().clone();
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

// A chunk whose input is a leaf: its first residual hands one gradient
// tensor both to the leaf (whose AccumulateGrad may keep it as .grad and
// later add the other branch's gradient into it in place) and to the
// attention's output projection, which queues it for W. B then W must still
// equal the fused backward, the input's gradient included.
TEST(SplitBackwardTest, AChunkWithALeafInputEqualsTheFusedBackward) {
  for (auto [type, tolerance] :
       {std::pair{at::kFloat, 1e-5}, std::pair{at::kBFloat16, 1e-2}, std::pair{at::kHalf, 1e-2}}) {
    SCOPED_TRACE(at::toString(type));
    const Gradients fused = Backward(type, false, 1, /*stage=*/1, /*num_stages=*/2);
    const Gradients split = Backward(type, true, 1, /*stage=*/1, /*num_stages=*/2);
    ASSERT_EQ(split.count("input"), 1u);
    EXPECT_LE(MaxRelativeError(split, fused), tolerance);
  }
}

// W's queued ∂L/∂y is never the memory of a leaf's .grad: y = x + h·Wᵀ
// hands one gradient tensor to the leaf x and to the linear layer, which
// queues it uncopied; a later in-place write to x.grad (an accumulation)
// must not reach W.
TEST(SplitBackwardTest, TheQueuedGradientIsNotALeafsGradient) {
  at::manual_seed(7);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor h = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor weight = at::randn({8, 8}).requires_grad_(true);
  const at::Tensor dy = at::randn({4, 8});
  WeightGradStore store;
  at::Tensor y;
  {
    WeightGradScope scope(&store, /*microbatch=*/0);
    y = x + SplitLinear(h, weight, at::Tensor());
  }
  y.backward(dy.clone());  // The engine holds the only reference to the gradient.
  {
    at::NoGradGuard no_grad;
    x.mutable_grad().mul_(-3);
  }
  ASSERT_TRUE(store.RunW(0).ok());
  EXPECT_TRUE(at::allclose(weight.grad(), dy.t().mm(h.detach()), 1e-5, 1e-6));
}

// The compute-type copies of the weights (ComputeTypeCopies): one copy per
// parameter while it is unchanged, a new one after an in-place write, and a
// chunk's passes always read the parameters' current values.
TEST(ComputeTypeCopiesTest, FollowTheParametersThroughInPlaceWrites) {
  const c10::Device device = TestDevice();
  at::Tensor param = at::randn({8, 4}).to(device).requires_grad_(true);
  ComputeTypeCopies copies;
  const at::Tensor first = copies.Get(param, at::kBFloat16);
  EXPECT_EQ(first.scalar_type(), at::kBFloat16);
  EXPECT_FALSE(first.requires_grad());
  EXPECT_TRUE(at::equal(first, param.detach().to(at::kBFloat16)));
  EXPECT_TRUE(copies.Get(param, at::kBFloat16).is_same(first)) << "reused while unchanged";
  {
    at::NoGradGuard no_grad;
    param.mul_(3);
  }
  const at::Tensor second = copies.Get(param, at::kBFloat16);
  EXPECT_FALSE(second.is_same(first));
  EXPECT_TRUE(at::equal(second, param.detach().to(at::kBFloat16)));
  EXPECT_TRUE(at::equal(first, (param.detach() / 3).to(at::kBFloat16)))
      << "a copy an earlier pass holds is not overwritten";
  // The parameter's own type: the parameter itself, without autograd.
  const at::Tensor same = copies.Get(param, at::kFloat);
  EXPECT_EQ(same.data_ptr(), param.data_ptr());
  EXPECT_FALSE(same.requires_grad());

  // A whole bf16 chunk: evaluation (grad mode off) and a split F read the
  // copies; after an in-place update of every parameter both equal the
  // fused path, which casts afresh in every pass.
  auto chunk = GptChunk::Create(TinyGptConfig(at::kBFloat16), 0, 1, 11, device);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  const at::Tensor tokens = at::randint(64, {2, 16}, at::kLong).to(device);
  auto evaluate = [&] {
    at::NoGradGuard no_grad;
    return (*chunk)->Forward(tokens);
  };
  WeightGradStore store;
  auto split_forward = [&] {
    WeightGradScope scope(&store, 0);
    return (*chunk)->Forward(tokens).detach();
  };
  auto fused_forward = [&] { return (*chunk)->Forward(tokens).detach(); };
  const at::Tensor before = evaluate();
  EXPECT_TRUE(at::equal(split_forward(), before));
  {
    at::NoGradGuard no_grad;
    for (const NamedTensor& p : (*chunk)->parameters()) p.second.mul_(1.5);
  }
  const at::Tensor after = fused_forward();
  EXPECT_FALSE(at::equal(after, before));
  EXPECT_TRUE(at::equal(evaluate(), after));
  EXPECT_TRUE(at::equal(split_forward(), after));
}

// Gradient buckets (the partial W passes and reductions of data
// parallelism): every parameter in exactly one bucket, none empty, and the
// partial W passes give the whole W's gradients exactly.
TEST(GradientBucketsTest, PartitionTheParametersAndPartialWPassesEqualTheWhole) {
  auto chunk = GptChunk::Create(TinyGptConfig(), 0, 1, 11, TestDevice());
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  // 2 blocks x 4 linear layers + the LM head.
  ASSERT_EQ((*chunk)->linear_layers().size(), 9u);
  for (int k : {1, 2, 4, 9}) {
    absl::StatusOr<std::vector<std::vector<at::Tensor>>> buckets = GradientBuckets(**chunk, k);
    ASSERT_TRUE(buckets.ok()) << buckets.status();
    ASSERT_EQ(buckets->size(), static_cast<size_t>(k));
    size_t total = 0;
    for (const auto& bucket : *buckets) {
      EXPECT_FALSE(bucket.empty()) << k;
      total += bucket.size();
    }
    EXPECT_EQ(total, (*chunk)->parameters().size()) << k;
    for (const NamedTensor& p : (*chunk)->parameters()) {
      int found = 0;
      for (const auto& bucket : *buckets) {
        for (const at::Tensor& t : bucket) found += t.is_same(p.second);
      }
      EXPECT_EQ(found, 1) << p.first << " in " << k << " buckets";
    }
  }
  EXPECT_EQ(GradientBuckets(**chunk, 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientBuckets(**chunk, 0).status().code(), absl::StatusCode::kInvalidArgument);

  const Gradients whole = Backward(at::kFloat, /*split=*/true);
  for (int k : {2, 4}) {
    const Gradients partial = Backward(at::kFloat, /*split=*/true, k);
    for (const auto& [name, g] : whole) EXPECT_TRUE(at::equal(partial.at(name), g)) << name;
  }
}

}  // namespace
}  // namespace zbpp::worker
