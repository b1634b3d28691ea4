#ifndef ZBPP_WORKER_MODEL_LLAMA_H_
#define ZBPP_WORKER_MODEL_LLAMA_H_

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "worker/model/model_chunk.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// The "llama" family of the architecture registry (model_chunk.h), with
/// the numerics of Hugging Face transformers' LlamaForCausalLM (default
/// RoPE, no scaling), so that exported weights give the same logits:
///
/// * RMSNorm (Zhang & Sennrich 2019) in float32: x · rsqrt(mean(x²) + ε) · g,
///   ε = config.norm_eps, unit gains g.
/// * Grouped-query attention (Ainslie et al. 2023): `heads` query heads,
///   `kv_heads` key/value heads each shared by heads/kv_heads consecutive
///   query heads (transformers' repeat_kv), head dim d = h/heads; causal
///   at::scaled_dot_product_attention, scale 1/√d.
/// * Rotary position embeddings (Su et al. 2021, "RoFormer" eq. 34) in the
///   rotate_half convention: frequency i of d/2 is θ^(−2i/d), cos and sin
///   of position·frequency repeated over both halves, q·cos +
///   rotate_half(q)·sin with rotate_half(x) = [−x₂, x₁]; positions 0..s−1.
/// * SwiGLU MLP (Shazeer 2020): down(silu(gate(x)) · up(x)), inner size
///   config.ffn_hidden.
/// * No biases; a final RMSNorm and the LM head, tied to the token
///   embedding when config.tie_embeddings.
///
/// Parameters have transformers' own names, so a checkpoint maps to a
/// LlamaForCausalLM state dict name for name (l is the block's global
/// index; q/k/v/o/gate/up/down are linear weights [out, in]):
///   model.embed_tokens.weight [vocab, h]                      (first chunk)
///   model.layers.<l>.input_layernorm.weight [h]
///   model.layers.<l>.self_attn.q_proj.weight [heads·d, h]
///   model.layers.<l>.self_attn.k_proj.weight [kv_heads·d, h]
///   model.layers.<l>.self_attn.v_proj.weight [kv_heads·d, h]
///   model.layers.<l>.self_attn.o_proj.weight [h, heads·d]
///   model.layers.<l>.post_attention_layernorm.weight [h]
///   model.layers.<l>.mlp.gate_proj.weight [f, h]
///   model.layers.<l>.mlp.up_proj.weight [f, h]
///   model.layers.<l>.mlp.down_proj.weight [h, f]
///   model.norm.weight [h], lm_head.weight [vocab, h]          (last chunk)
/// With tied embeddings on one chunk there is no lm_head.weight (the head
/// is model.embed_tokens.weight); split over two chunks, the last chunk's
/// lm_head.weight is a copy kept equal to it (ModelChunk).
/// Initialised as transformers does: normal(0, 0.02) for every matrix
/// (initializer_range), unit RMSNorm gains.

/// The family's own spec rules, each naming its field: kv_heads in
/// [1, heads] dividing heads, an even head dim (hidden/heads) for RoPE,
/// rope_theta finite and > 0.
absl::Status CheckLlamaSpec(const v1::ModelSpec& spec);

/// An uninitialised llama chunk (ModelChunk::Create adds its parameters).
std::unique_ptr<ModelChunk> MakeLlamaChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages,
                                           uint64_t seed, c10::Device device);

/// RoPE's cos and sin for positions 0..seq_len−1 and head dim `head_dim`
/// (even): two float32 [seq_len, head_dim] tensors, computed as
/// transformers' LlamaRotaryEmbedding does (inverse frequencies
/// 1/θ^(2i/d) in float32, angles position·frequency, both halves equal).
std::pair<at::Tensor, at::Tensor> RotaryCosSin(int64_t seq_len, int64_t head_dim, double theta);

/// x·cos + rotate_half(x)·sin over the last dimension: x [..., s, d],
/// cos / sin [s, d] (cast to x's type, as transformers does). Returns x's
/// shape and type.
at::Tensor ApplyRotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_LLAMA_H_
