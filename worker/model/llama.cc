#include "worker/model/llama.h"

#include <cmath>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

class LlamaChunk final : public ModelChunk {
 public:
  LlamaChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages, uint64_t seed,
             c10::Device device)
      : ModelChunk(config, virtual_stage, num_virtual_stages, seed, device) {
    std::tie(cos_, sin_) = RotaryCosSin(config.seq_len, config.hidden / config.heads,
                                        config.rope_theta);
    cos_ = cos_.to(device);
    sin_ = sin_.to(device);
  }

 private:
  void AddParameters() override;
  // Rotary: the blocks rotate queries and keys; nothing to add.
  at::Tensor AddPositions(const at::Tensor& token_embedding) const override {
    return token_embedding;
  }
  at::Tensor Block(int layer, const at::Tensor& x) const override;
  at::Tensor FinalNorm(const at::Tensor& x) const override;
  // transformers' LlamaRMSNorm on a float32 x [..., h].
  at::Tensor RmsNorm(const std::string& name, const at::Tensor& x) const;

  at::Tensor cos_, sin_;  // [seq_len, d] float32, on the chunk's device.
};

void LlamaChunk::AddParameters() {
  const int64_t h = config_.hidden;
  const int64_t d = h / config_.heads;
  const int64_t kv = config_.kv_heads * d;
  const int64_t f = config_.ffn_hidden;
  if (is_first()) AddTokenEmbedding();
  for (int l = first_layer_; l < end_layer_; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    AddParameter(p + "input_layernorm.weight", {h}, /*std=*/0.0, /*fill=*/1.0);
    AddLinear(p + "self_attn.q_proj", config_.heads * d, h, 0.02, /*bias=*/false);
    AddLinear(p + "self_attn.k_proj", kv, h, 0.02, /*bias=*/false);
    AddLinear(p + "self_attn.v_proj", kv, h, 0.02, /*bias=*/false);
    AddLinear(p + "self_attn.o_proj", h, config_.heads * d, 0.02, /*bias=*/false);
    AddParameter(p + "post_attention_layernorm.weight", {h}, /*std=*/0.0, /*fill=*/1.0);
    AddLinear(p + "mlp.gate_proj", f, h, 0.02, /*bias=*/false);
    AddLinear(p + "mlp.up_proj", f, h, 0.02, /*bias=*/false);
    AddLinear(p + "mlp.down_proj", h, f, 0.02, /*bias=*/false);
  }
  if (is_last()) {
    AddParameter("model.norm.weight", {h}, /*std=*/0.0, /*fill=*/1.0);
    AddHead();
  }
}

at::Tensor LlamaChunk::RmsNorm(const std::string& name, const at::Tensor& x) const {
  at::Tensor variance = x.pow(2).mean({-1}, /*keepdim=*/true);
  return Param(name) * (x * at::rsqrt(variance + config_.norm_eps));
}

at::Tensor LlamaChunk::FinalNorm(const at::Tensor& x) const {
  return RmsNorm("model.norm.weight", x);
}

at::Tensor LlamaChunk::Block(int layer, const at::Tensor& x) const {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  const int64_t b = x.size(0), s = x.size(1), a = config_.heads, g = config_.kv_heads;
  const int64_t d = config_.hidden / a;
  // The normalised input in the compute type once, so that the three
  // projections reading it share one saved copy (SplitLinear keeps its
  // input for W).
  at::Tensor in = RmsNorm(p + "input_layernorm.weight", x).to(config_.compute_type);
  auto heads = [&](const at::Tensor& t, int64_t n) { return t.view({b, s, n, d}).transpose(1, 2); };
  const at::Tensor cos = cos_.narrow(0, 0, s), sin = sin_.narrow(0, 0, s);
  at::Tensor q = ApplyRotary(heads(Linear(p + "self_attn.q_proj", in), a), cos, sin);
  at::Tensor k = ApplyRotary(heads(Linear(p + "self_attn.k_proj", in), g), cos, sin);
  at::Tensor v = heads(Linear(p + "self_attn.v_proj", in), g);
  if (g < a) {
    // Query head i reads key/value head i / (a/g) (transformers' repeat_kv).
    k = k.repeat_interleave(a / g, /*dim=*/1);
    v = v.repeat_interleave(a / g, /*dim=*/1);
  }
  // As gpt.cc: one fused causal kernel, no weights, its backward all B.
  at::Tensor attention = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{},
                                                          /*dropout_p=*/0.0, /*is_causal=*/true);
  at::Tensor y = attention.transpose(1, 2).reshape({b, s, a * d});
  // The residual stream stays float32: float32 + compute type promotes.
  at::Tensor out = x + Linear(p + "self_attn.o_proj", y);

  at::Tensor mlp_in =
      RmsNorm(p + "post_attention_layernorm.weight", out).to(config_.compute_type);
  at::Tensor inner =
      at::silu(Linear(p + "mlp.gate_proj", mlp_in)) * Linear(p + "mlp.up_proj", mlp_in);
  return out + Linear(p + "mlp.down_proj", inner);
}

}  // namespace

absl::Status CheckLlamaSpec(const v1::ModelSpec& spec) {
  const int kv_heads = spec.has_kv_heads() ? spec.kv_heads() : spec.heads();
  if (kv_heads < 1 || kv_heads > spec.heads() || spec.heads() % kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model.kv_heads (", kv_heads,
                                                   ") must be in [1, model.heads] and divide "
                                                   "model.heads (",
                                                   spec.heads(), ")"));
  }
  if ((spec.hidden() / spec.heads()) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.hidden / model.heads (head dim ", spec.hidden() / spec.heads(),
        ") must be even for rotary position embeddings"));
  }
  if (spec.has_rope_theta() && !(spec.rope_theta() > 0 && std::isfinite(spec.rope_theta()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.rope_theta must be finite and > 0, got ", spec.rope_theta()));
  }
  return absl::OkStatus();
}

std::unique_ptr<ModelChunk> MakeLlamaChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages,
                                           uint64_t seed, c10::Device device) {
  return std::make_unique<LlamaChunk>(config, virtual_stage, num_virtual_stages, seed, device);
}

std::pair<at::Tensor, at::Tensor> RotaryCosSin(int64_t seq_len, int64_t head_dim, double theta) {
  // transformers: inv_freq = 1 / (θ ** (arange(0, d, 2).float() / d)), all
  // in float32; angles = positions ⊗ inv_freq; emb = cat(angles, angles).
  at::Tensor exponents = at::arange(0, head_dim, 2, at::kLong).to(at::kFloat) / double(head_dim);
  at::Tensor inv_freq = 1.0 / at::pow(theta, exponents);
  at::Tensor positions = at::arange(seq_len, at::kLong).to(at::kFloat);
  at::Tensor angles = at::outer(positions, inv_freq);
  at::Tensor emb = at::cat({angles, angles}, /*dim=*/-1);
  return {emb.cos(), emb.sin()};
}

at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, /*dim=*/-1);
  return x * cos.to(x.scalar_type()) + rotated * sin.to(x.scalar_type());
}

}  // namespace zbpp::worker
