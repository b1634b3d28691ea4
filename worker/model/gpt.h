#ifndef ZBPP_WORKER_MODEL_GPT_H_
#define ZBPP_WORKER_MODEL_GPT_H_

#include <cstdint>
#include <memory>

#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "worker/model/model_chunk.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// The "gpt" family of the architecture registry (model_chunk.h): a
/// GPT-2-style decoder. Token plus learned position embeddings, pre-
/// LayerNorm blocks of causal multi-head self-attention (one fused q/k/v
/// projection) and a GELU MLP, biases on every linear but the head, a final
/// LayerNorm (ε = config.norm_eps) and the LM head.
///
/// Parameters (global names; l is the block's global index):
///   embed.token [vocab, h], embed.position [seq_len, h]   (first chunk)
///   block<l>.ln1.{weight,bias} [h]
///   block<l>.attn.qkv.{weight [3h, h], bias [3h]}
///   block<l>.attn.proj.{weight [h, h], bias [h]}
///   block<l>.ln2.{weight,bias} [h]
///   block<l>.mlp.fc.{weight [f, h], bias [f]}
///   block<l>.mlp.proj.{weight [h, f], bias [h]}
///   final_ln.{weight,bias} [h], head.weight [vocab, h]     (last chunk)
/// Initialised as GPT-2: normal(0, 0.02), residual projections scaled by
/// 1/√(2L), zero biases, unit LayerNorm gains.

/// The family's own spec rules: kv_heads unset or equal to heads (no
/// grouped-query attention), rope_theta unset (positions are learned).
absl::Status CheckGptSpec(const v1::ModelSpec& spec);

/// An uninitialised gpt chunk (ModelChunk::Create adds its parameters).
std::unique_ptr<ModelChunk> MakeGptChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages,
                                         uint64_t seed, c10::Device device);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_GPT_H_
