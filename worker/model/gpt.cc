#include "worker/model/gpt.h"

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

class GptChunkImpl final : public ModelChunk {
 public:
  GptChunkImpl(const ModelConfig& config, int virtual_stage, int num_virtual_stages, uint64_t seed,
               c10::Device device)
      : ModelChunk(config, virtual_stage, num_virtual_stages, seed, device) {}

 private:
  void AddParameters() override;
  at::Tensor AddPositions(const at::Tensor& token_embedding) const override;
  at::Tensor Block(int layer, const at::Tensor& x) const override;
  at::Tensor FinalNorm(const at::Tensor& x) const override;
  at::Tensor LayerNorm(const std::string& name, const at::Tensor& x) const;
};

void GptChunkImpl::AddParameters() {
  const int64_t h = config_.hidden;
  const double residual_std = 0.02 / std::sqrt(2.0 * config_.layers);
  auto layer_norm = [&](const std::string& name) {
    AddParameter(name + ".weight", {h}, /*std=*/0.0, /*fill=*/1.0);
    AddParameter(name + ".bias", {h}, /*std=*/0.0);
  };
  if (is_first()) {
    AddTokenEmbedding();
    AddParameter("embed.position", {config_.seq_len, h}, 0.02);
  }
  for (int l = first_layer_; l < end_layer_; ++l) {
    const std::string p = absl::StrCat("block", l);
    layer_norm(p + ".ln1");
    AddLinear(p + ".attn.qkv", 3 * h, h, 0.02, /*bias=*/true);
    AddLinear(p + ".attn.proj", h, h, residual_std, /*bias=*/true);
    layer_norm(p + ".ln2");
    AddLinear(p + ".mlp.fc", config_.ffn_hidden, h, 0.02, /*bias=*/true);
    AddLinear(p + ".mlp.proj", h, config_.ffn_hidden, residual_std, /*bias=*/true);
  }
  if (is_last()) {
    layer_norm("final_ln");
    AddHead();
  }
}

at::Tensor GptChunkImpl::LayerNorm(const std::string& name, const at::Tensor& x) const {
  return at::layer_norm(x, {config_.hidden}, Param(name + ".weight"), Param(name + ".bias"),
                        config_.norm_eps);
}

at::Tensor GptChunkImpl::AddPositions(const at::Tensor& token_embedding) const {
  return token_embedding +
         Param("embed.position").narrow(0, 0, token_embedding.size(1)).unsqueeze(0);
}

at::Tensor GptChunkImpl::FinalNorm(const at::Tensor& x) const { return LayerNorm("final_ln", x); }

at::Tensor GptChunkImpl::Block(int layer, const at::Tensor& x) const {
  const std::string p = absl::StrCat("block", layer);
  const int64_t b = x.size(0), s = x.size(1), h = config_.hidden, a = config_.heads;
  const int64_t d = h / a;

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
  at::Tensor qkv = Linear(p + ".attn.qkv", LayerNorm(p + ".ln1", x));
  std::vector<at::Tensor> parts = qkv.split(h, /*dim=*/2);
  auto heads = [&](const at::Tensor& t) { return t.view({b, s, a, d}).transpose(1, 2); };
  at::Tensor attention = at::scaled_dot_product_attention(
      heads(parts[0]), heads(parts[1]), heads(parts[2]), /*attn_mask=*/{}, /*dropout_p=*/0.0,
      /*is_causal=*/true);
  at::Tensor y = attention.transpose(1, 2).reshape({b, s, h});
  // The residual stream stays float32: float32 + compute type promotes.
  at::Tensor out = x + Linear(p + ".attn.proj", y);

  at::Tensor inner = at::gelu(Linear(p + ".mlp.fc", LayerNorm(p + ".ln2", out)));
  return out + Linear(p + ".mlp.proj", inner);
}

}  // namespace

absl::Status CheckGptSpec(const v1::ModelSpec& spec) {
  if (spec.has_kv_heads() && spec.kv_heads() != spec.heads()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.kv_heads: gpt has no grouped-query attention; leave it unset or "
                     "equal to model.heads (",
                     spec.heads(), "), got ", spec.kv_heads()));
  }
  if (spec.has_rope_theta()) {
    return absl::InvalidArgumentError(
        "model.rope_theta: gpt learns its positions (no rotary embeddings); leave it unset");
  }
  return absl::OkStatus();
}

std::unique_ptr<ModelChunk> MakeGptChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages,
                                         uint64_t seed, c10::Device device) {
  return std::make_unique<GptChunkImpl>(config, virtual_stage, num_virtual_stages, seed, device);
}

}  // namespace zbpp::worker
