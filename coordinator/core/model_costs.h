#ifndef ZBPP_COORDINATOR_CORE_MODEL_COSTS_H_
#define ZBPP_COORDINATOR_CORE_MODEL_COSTS_H_

#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// The analytic costs of one transformer block of a model family, before
/// anything is measured (planning.h's InitialProblem, data_parallel.h's
/// StageParameterCount, memory_estimate.h). s = seq_len, b = microbatch
/// size, h = hidden, a = heads, f = ffn_hidden (or 4h), h_kv = kv_heads·h/a
/// (the width of llama's key and value projections).
///
/// gpt (GPT-2's block):
///   parameters 4h² + 2hf + 9h + f (q/k/v, projection, the two MLP layers
///     with biases, two LayerNorms);
///   forward FLOPs 2sb(4h² + 2hf) + 4s²bh — Megatron-LM's 24sbh² + 4s²bh
///     for f = 4h (Narayanan et al. 2021, §5.1), the causal mask's savings
///     ignored;
///   M_B = sb(34h + 5as), M_W = 32sbh bytes (the Zero Bubble paper's §2,
///     16-bit activations).
/// llama (llama.h's block: RMSNorms, GQA, SwiGLU, no biases):
///   parameters 2h² + 2h·h_kv + 3hf + 2h;
///   forward FLOPs 2sb(2h² + 2h·h_kv + 3hf) + 4s²bh;
///   M_B = sb(12h + 4h_kv + 8f + 5as) bytes, counted as the paper counts
///     GPT's: two norm inputs (4sbh), the projections' input (2sbh), q, k,
///     v (2sbh + 4sb·h_kv), the attention output (2sbh), the MLP input
///     (2sbh), gate, up, silu(gate) and their product (8sbf), and the
///     paper's 5as²b for the scores;
///   M_W = sb(12h + 4h_kv + 6f) bytes: what the W pass keeps, each linear
///     layer's input (2sbh for q/k/v, o and gate/up each, 2sbf for down)
///     and output gradient (q 2sbh, k and v 4sb·h_kv, o 2sbh, gate and up
///     4sbf, down 2sbh) — the paper's 32sbh for GPT counted the same way.
/// Requires a model that passed the spec check. Thread-safe (pure).
struct BlockCosts {
  double parameters = 0;
  double forward_flops = 0;  ///< One microbatch's forward pass.
  double m_b_bytes = 0;      ///< Paper §2: held from F to B.
  double m_w_bytes = 0;      ///< Paper §2: held from B to W.
};
BlockCosts BlockCostsOf(const zbpp::v1::ModelSpec& model, double microbatch_size);

/// Parameters outside the blocks that virtual stage `stage` of `num_virtual_stages`
/// holds: on the first, the token embedding (vocab·h) and gpt's position
/// embedding (seq_len·h); on the last, the final norm (gpt 2h, llama h)
/// and the LM head (vocab·h: with tie_embeddings the last stage holds a copy
/// of the embedding, unless it is also the first); under `vocab_parallel`
/// (pipeline.vocab_parallel) neither matrix (the stages hold their rows,
/// VocabularyRangeOf). Thread-safe (pure).
double EndParameters(const zbpp::v1::ModelSpec& model, int stage, int num_virtual_stages,
                     bool vocab_parallel);

/// Bytes the LM head's logits and the loss take on the stage holding the
/// last virtual stage, for one microbatch: b·s·vocab elements of the logits
/// in the compute type, the loss's float32 copy of them (16-bit passes),
/// its float32 log-softmax and the float32 gradient, and the gradient in the
/// compute type that the head's W pass keeps: 12 bytes per element in fp32
/// (the copy is the logits themselves and the gradient is not cast), 16 in
/// bf16 / fp16. With vocab = 2²⁰ and b·s = 512 that is 6 GiB in fp32.
/// Thread-safe (pure).
double LogitsBytes(const zbpp::v1::JobSpec& spec);

/// FLOPs of the LM head's forward for one microbatch: 2·b·s·h·vocab (one
/// [b·s, h] × [h, vocab] GEMM); its input-gradient and weight-gradient
/// GEMMs cost the same each. Thread-safe (pure).
double HeadForwardFlops(const zbpp::v1::JobSpec& spec);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_MODEL_COSTS_H_
