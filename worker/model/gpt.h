#ifndef ZBPP_WORKER_MODEL_GPT_H_
#define ZBPP_WORKER_MODEL_GPT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// Sizes of the GPT-style decoder (zbpp.v1.ModelSpec after defaults).
struct GptConfig {
  int layers = 1;      ///< Transformer blocks in the whole model.
  int hidden = 64;     ///< h.
  int heads = 4;       ///< a; divides h.
  int vocab = 256;     ///< Tokens; byte-level data needs 256.
  int seq_len = 64;    ///< s: positions of the position embedding.
  int ffn_hidden = 256;  ///< MLP inner size (4h by default).
  /// The type of the matrix products (linear layers, attention): float32,
  /// or bfloat16 / float16 for mixed precision (ComputeTypeOf). Parameters,
  /// LayerNorm, the loss and the residual stream stay float32; the
  /// attention's softmax runs inside at::scaled_dot_product_attention, which
  /// accumulates it in float32.
  at::ScalarType compute_type = at::kFloat;
};

/// The compute type of a job's precision: FP32 (and unset) float32, BF16
/// bfloat16, FP16 float16 (zbpp.v1.Precision).
at::ScalarType ComputeTypeOf(v1::Precision precision);

/// The config of `spec`; InvalidArgument naming the field for an unknown
/// architecture or sizes out of range (the coordinator checks the same at
/// submission; a worker checks again because it trusts nobody's bytes).
absl::StatusOr<GptConfig> GptConfigFromSpec(const v1::ModelSpec& spec);

/// A named parameter: the name is global to the model (e.g.
/// "block3.attn.qkv.weight", "embed.token"), the same in every partition.
using NamedTensor = std::pair<std::string, at::Tensor>;

/// One virtual stage (chunk) of the decoder: the blocks
/// [stage·L/S, (stage+1)·L/S) of S virtual stages, plus the embeddings on
/// the first stage and the final LayerNorm and LM head on the last.
///
/// Every linear layer runs through SplitLinear, so inside a WeightGradScope
/// backward is the B pass and the W pass is the scope's store. LayerNorm,
/// embedding and attention gradients are computed in B (README.md, "Split
/// backward"); the attention is causal at::scaled_dot_product_attention,
/// which has no weights.
///
/// Parameters are initialised from (seed, parameter name) alone, as GPT-2
/// does (normal(0, 0.02), residual projections scaled by 1/√(2L), zero
/// biases, unit LayerNorm gains): every partition of a model starts from the
/// same weights. Parameters are float32 (master weights) on the chunk's
/// device; the products run in config.compute_type. Thread-compatible.
class GptChunk {
 public:
  /// Parameters are initialised on the CPU, then moved to `device`, so that
  /// every device starts from the same weights. InvalidArgument when stage
  /// is not in [0, num_stages) or layers is not divisible by num_stages.
  static absl::StatusOr<std::unique_ptr<GptChunk>> Create(
      const GptConfig& config, int stage, int num_stages, uint64_t seed,
      c10::Device device = c10::Device(c10::kCPU));

  /// First stage: tokens int64 [b, s] -> hidden [b, s, h]. Other stages:
  /// hidden [b, s, h] -> hidden [b, s, h]; the last stage returns logits
  /// [b, s, vocab] instead. s <= seq_len.
  at::Tensor Forward(const at::Tensor& input) const;

  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == num_stages_ - 1; }
  int stage() const { return stage_; }

  /// Every parameter, in a fixed order (leaves with requires_grad).
  const std::vector<NamedTensor>& parameters() const { return parameters_; }
  /// The linear layers (those whose weight gradient the W pass computes),
  /// in model order: (weight [out, in], bias [out] or undefined), the same
  /// tensors as in parameters().
  const std::vector<std::pair<at::Tensor, at::Tensor>>& linear_layers() const {
    return linear_layers_;
  }

 private:
  GptChunk(const GptConfig& config, int stage, int num_stages)
      : config_(config), stage_(stage), num_stages_(num_stages) {}
  const at::Tensor& Param(const std::string& name) const;
  // One pre-LayerNorm transformer block: [b, s, h] float32 -> the same.
  at::Tensor Block(int layer, const at::Tensor& x) const;

  GptConfig config_;
  int stage_;
  int num_stages_;
  int first_layer_ = 0;
  int end_layer_ = 0;
  std::vector<NamedTensor> parameters_;
  std::map<std::string, size_t> index_;  // Name -> position in parameters_.
  std::vector<std::pair<at::Tensor, at::Tensor>> linear_layers_;
};

/// The parameters of `chunk` in `buckets` gradient buckets (the partial W
/// passes and reductions of scheduler/schedule.h): contiguous groups of its
/// linear layers in model order, of about equal parameter counts, each with
/// the layers' weights and biases; the other parameters (LayerNorm,
/// embeddings, whose gradients B computes) go to bucket 0. The same split
/// for the same chunk on every replica. InvalidArgument when `buckets` is
/// below 1 or above the number of linear layers (4 per block, plus the LM
/// head on the last stage).
absl::StatusOr<std::vector<std::vector<at::Tensor>>> GradientBuckets(const GptChunk& chunk,
                                                                     int buckets);

/// Mean next-token cross-entropy in nats: logits [b, s, vocab] (any floating
/// type; computed in float32), targets int64 [b, s]; returns a float32
/// scalar.
at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_GPT_H_
