#include "worker/model/gpt.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/counter_hash.h"
#include "worker/model/split_linear.h"

namespace zbpp::worker {
namespace {

// A parameter's generator seed from (job seed, name), so that its initial
// value does not depend on which other parameters a process holds.
uint64_t NameSeed(uint64_t seed, const std::string& name) {
  uint64_t h = SplitMix64(seed);
  for (unsigned char c : name) h = HashCombine(h, c);
  return h;
}

}  // namespace

at::ScalarType ComputeTypeOf(v1::Precision precision) {
  switch (precision) {
    case v1::PRECISION_BF16:
      return at::kBFloat16;
    case v1::PRECISION_FP16:
      return at::kHalf;
    default:
      return at::kFloat;
  }
}

absl::StatusOr<GptConfig> GptConfigFromSpec(const v1::ModelSpec& spec) {
  if (spec.architecture() != "gpt") {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.architecture must be \"gpt\", got \"", std::string(spec.architecture()), "\""));
  }
  auto positive = [](int value, const char* field) -> absl::Status {
    if (value >= 1) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(field, " must be >= 1, got ", value));
  };
  for (auto [value, field] : {std::pair{spec.layers(), "model.layers"},
                              std::pair{spec.hidden(), "model.hidden"},
                              std::pair{spec.heads(), "model.heads"},
                              std::pair{spec.vocab(), "model.vocab"},
                              std::pair{spec.seq_len(), "model.seq_len"}}) {
    if (absl::Status st = positive(value, field); !st.ok()) return st;
  }
  if (spec.hidden() % spec.heads() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model.hidden (", spec.hidden(),
                                                   ") must be divisible by model.heads (",
                                                   spec.heads(), ")"));
  }
  GptConfig config;
  config.layers = spec.layers();
  config.hidden = spec.hidden();
  config.heads = spec.heads();
  config.vocab = spec.vocab();
  config.seq_len = spec.seq_len();
  config.ffn_hidden = spec.has_ffn_hidden() ? spec.ffn_hidden() : 4 * spec.hidden();
  if (absl::Status st = positive(config.ffn_hidden, "model.ffn_hidden"); !st.ok()) return st;
  return config;
}

absl::StatusOr<std::unique_ptr<GptChunk>> GptChunk::Create(const GptConfig& config, int stage,
                                                           int num_stages, uint64_t seed,
                                                           c10::Device device) {
  if (num_stages < 1 || stage < 0 || stage >= num_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("virtual stage ", stage, " is not in [0, ", num_stages, ")"));
  }
  if (config.layers % num_stages != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model.layers (", config.layers,
                                                   ") must be divisible by the ", num_stages,
                                                   " virtual stages"));
  }
  std::unique_ptr<GptChunk> chunk(new GptChunk(config, stage, num_stages));
  const int per_stage = config.layers / num_stages;
  chunk->first_layer_ = stage * per_stage;
  chunk->end_layer_ = (stage + 1) * per_stage;

  const int64_t h = config.hidden;
  const double residual_std = 0.02 / std::sqrt(2.0 * config.layers);
  auto add = [&](const std::string& name, std::vector<int64_t> shape,
                 std::function<void(at::Tensor&, at::Generator&)> init) {
    at::Generator gen = at::detail::createCPUGenerator(NameSeed(seed, name));
    at::Tensor t = at::empty(shape, at::kFloat);
    init(t, gen);
    t = t.to(device);
    t.set_requires_grad(true);
    chunk->index_[name] = chunk->parameters_.size();
    chunk->parameters_.emplace_back(name, t);
  };
  auto normal = [](double std) {
    return [std](at::Tensor& t, at::Generator& gen) { t.normal_(0.0, std, gen); };
  };
  auto fill = [](double value) {
    return [value](at::Tensor& t, at::Generator&) { t.fill_(value); };
  };
  auto linear = [&](const std::string& name, int64_t out, int64_t in, double std) {
    add(name + ".weight", {out, in}, normal(std));
    add(name + ".bias", {out}, fill(0.0));
    chunk->linear_layers_.push_back({chunk->parameters_[chunk->parameters_.size() - 2].second,
                                     chunk->parameters_.back().second});
  };
  auto layer_norm = [&](const std::string& name) {
    add(name + ".weight", {h}, fill(1.0));
    add(name + ".bias", {h}, fill(0.0));
  };
  if (chunk->is_first()) {
    add("embed.token", {config.vocab, h}, normal(0.02));
    add("embed.position", {config.seq_len, h}, normal(0.02));
  }
  for (int l = chunk->first_layer_; l < chunk->end_layer_; ++l) {
    const std::string p = absl::StrCat("block", l);
    layer_norm(p + ".ln1");
    linear(p + ".attn.qkv", 3 * h, h, 0.02);
    linear(p + ".attn.proj", h, h, residual_std);
    layer_norm(p + ".ln2");
    linear(p + ".mlp.fc", config.ffn_hidden, h, 0.02);
    linear(p + ".mlp.proj", h, config.ffn_hidden, residual_std);
  }
  if (chunk->is_last()) {
    layer_norm("final_ln");
    add("head.weight", {config.vocab, h}, normal(0.02));
    chunk->linear_layers_.push_back({chunk->parameters_.back().second, at::Tensor()});
  }
  return chunk;
}

absl::StatusOr<std::vector<std::vector<at::Tensor>>> GradientBuckets(const GptChunk& chunk,
                                                                     int buckets) {
  const auto& layers = chunk.linear_layers();
  const int n = static_cast<int>(layers.size());
  if (buckets < 1 || buckets > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "virtual stage ", chunk.stage(), " has ", n, " linear layers: it cannot be split into ",
        buckets, " gradient buckets"));
  }
  auto size = [](const std::pair<at::Tensor, at::Tensor>& layer) {
    return layer.first.numel() + (layer.second.defined() ? layer.second.numel() : 0);
  };
  double total = 0;
  for (const auto& layer : layers) total += size(layer);
  std::vector<std::vector<at::Tensor>> out(buckets);
  int b = 0;
  double filled = 0;
  for (int i = 0; i < n; ++i) {
    // The next bucket starts once this one holds its share, or when every
    // later bucket needs one of the layers left.
    if (!out[b].empty() && b + 1 < buckets &&
        (filled >= (b + 1) * total / buckets || n - i <= buckets - 1 - b)) {
      ++b;
    }
    out[b].push_back(layers[i].first);
    if (layers[i].second.defined()) out[b].push_back(layers[i].second);
    filled += size(layers[i]);
  }
  for (const NamedTensor& p : chunk.parameters()) {
    const bool linear = std::any_of(layers.begin(), layers.end(), [&](const auto& layer) {
      return layer.first.is_same(p.second) ||
             (layer.second.defined() && layer.second.is_same(p.second));
    });
    if (!linear) out[0].push_back(p.second);
  }
  return out;
}

const at::Tensor& GptChunk::Param(const std::string& name) const {
  auto it = index_.find(name);
  // Names are built by Create from the same strings; a miss is a bug here.
  TORCH_CHECK(it != index_.end(), "GptChunk: no parameter ", name);
  return parameters_[it->second].second;
}

at::Tensor GptChunk::Block(int layer, const at::Tensor& x) const {
  const std::string p = absl::StrCat("block", layer);
  const int64_t b = x.size(0), s = x.size(1), h = config_.hidden, a = config_.heads;
  const int64_t d = h / a;
  auto ln = [&](const std::string& name, const at::Tensor& in) {
    return at::layer_norm(in, {h}, Param(name + ".weight"), Param(name + ".bias"), 1e-5);
  };
  const at::ScalarType type = config_.compute_type;
  auto lin = [&](const std::string& name, const at::Tensor& in) {
    return SplitLinear(in, Param(name + ".weight"), Param(name + ".bias"), type);
  };

  // Causal self-attention: [b, s, h] -> q, k, v [b, a, s, d] in the compute
  // type (the linear's output type; views, no copies), then one fused kernel
  // instead of s x s scores and a materialised mask: flash / cuDNN /
  // memory-efficient attention on a GPU, LibTorch's CPU flash kernel on the
  // CPU. Each keeps the softmax's running max and sum in float32 for 16-bit
  // inputs (as the float32 softmax of autocast does) and saves only its
  // output and a [b, a, s] log-sum-exp for the backward, not the s x s
  // probabilities. It has no weights, so its whole backward is autograd's and
  // belongs to B; the projections around it stay SplitLinear. On the CPU the
  // flash kernel's bfloat16 backward is slower than the unfused attention was
  // (bench/results/compute.md, run 6): the fused kernels are for the GPU.
  at::Tensor qkv = lin(p + ".attn.qkv", ln(p + ".ln1", x));
  std::vector<at::Tensor> parts = qkv.split(h, /*dim=*/2);
  auto heads = [&](const at::Tensor& t) { return t.view({b, s, a, d}).transpose(1, 2); };
  at::Tensor attention = at::scaled_dot_product_attention(
      heads(parts[0]), heads(parts[1]), heads(parts[2]), /*attn_mask=*/{}, /*dropout_p=*/0.0,
      /*is_causal=*/true);
  at::Tensor y = attention.transpose(1, 2).reshape({b, s, h});
  // The residual stream stays float32: float32 + compute type promotes.
  at::Tensor out = x + lin(p + ".attn.proj", y);

  at::Tensor inner = at::gelu(lin(p + ".mlp.fc", ln(p + ".ln2", out)));
  return out + lin(p + ".mlp.proj", inner);
}

at::Tensor GptChunk::Forward(const at::Tensor& input) const {
  at::Tensor x;
  if (is_first()) {
    x = at::embedding(Param("embed.token"), input) +
        Param("embed.position").narrow(0, 0, input.size(1)).unsqueeze(0);
  } else {
    x = input;
  }
  for (int l = first_layer_; l < end_layer_; ++l) x = Block(l, x);
  if (!is_last()) return x;
  x = at::layer_norm(x, {config_.hidden}, Param("final_ln.weight"), Param("final_ln.bias"),
                     1e-5);
  return SplitLinear(x, Param("head.weight"), at::Tensor(), config_.compute_type);
}

at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits.to(at::kFloat).reshape({-1, logits.size(-1)}),
                                targets.reshape({-1}));
}

}  // namespace zbpp::worker
