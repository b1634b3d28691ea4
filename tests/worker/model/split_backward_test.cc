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
#include "tests/worker/tiny_gpt.h"

namespace zbpp::worker {
namespace {

using Gradients = std::map<std::string, at::Tensor>;

// Gradients of one microbatch's loss through a one-chunk model, split into B
// and W (`split`; the W pass as `buckets` partial ones, one per gradient
// bucket, last bucket first) or fused.
Gradients Backward(at::ScalarType compute_type, bool split, int buckets = 1) {
  const GptConfig config = TinyGptConfig(compute_type);
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
