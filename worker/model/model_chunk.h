#ifndef ZBPP_WORKER_MODEL_MODEL_CHUNK_H_
#define ZBPP_WORKER_MODEL_MODEL_CHUNK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "worker/model/split_linear.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// Sizes of a decoder-only transformer (zbpp.v1.ModelSpec after defaults).
struct ModelConfig {
  /// The family (ModelSpec.architecture): "gpt" or "llama" (the registry in
  /// model_chunk.cc).
  std::string architecture = "gpt";
  int layers = 1;        ///< Transformer blocks in the whole model.
  int hidden = 64;       ///< h.
  int heads = 4;         ///< a; divides h.
  int vocab = 256;       ///< Tokens; byte-level data needs 256.
  int seq_len = 64;      ///< s: longest sequence (gpt: learned positions).
  int ffn_hidden = 256;  ///< MLP inner size (4h by default).
  /// The type of the matrix products (linear layers, attention): float32,
  /// or bfloat16 / float16 for mixed precision (ComputeTypeOf). Parameters,
  /// the norms, the loss and the residual stream stay float32; the
  /// attention's softmax runs inside at::scaled_dot_product_attention, which
  /// accumulates it in float32.
  at::ScalarType compute_type = at::kFloat;
  int kv_heads = 0;           ///< Key/value heads (llama's GQA); 0: heads.
  double rope_theta = 10000;  ///< RoPE base θ (llama).
  double norm_eps = 1e-5;     ///< ε of the LayerNorms / RMSNorms.
  /// The LM head is the token embedding's matrix (see ModelChunk).
  bool tie_embeddings = false;
  /// Blocks per virtual stage in the model's order (PipelineSpec.layout);
  /// empty: layers / num_virtual_stages each.
  std::vector<int> layout;
  /// Vocabulary parallelism (docs/training.md, "Vocabulary parallelism"):
  /// the LM head and the loss are split by vocabulary over the pipeline's
  /// stages (VocabularyShard, vocabulary_shard.h), so the last chunk ends at
  /// the final norm.
  bool vocab_parallel = false;
};

/// The global names of a family's token embedding and LM head (e.g. llama:
/// "model.embed_tokens.weight", "lm_head.weight"), from the architecture
/// registry; both empty for an unknown architecture.
struct VocabularyNames {
  std::string embedding;
  std::string head;
};
VocabularyNames VocabularyNamesOf(const std::string& architecture);

/// The initial value of a parameter of `shape` whose initialisation name is
/// `init_name` (its own global name, or for a tied LM head the embedding's),
/// as every chunk draws it: normal(0, std) from a generator seeded with
/// (seed, init_name) when std > 0, else filled with `fill`. float32 on the
/// CPU. Pure: the same arguments give the same bits.
at::Tensor InitialParameter(uint64_t seed, const std::string& init_name,
                            const std::vector<int64_t>& shape, double std, double fill = 0.0);

/// Former names, still used by the pipeline runtime
/// (worker/runtime/executor.h) and older tests.
using GptConfig = ModelConfig;

/// The compute type of a job's precision: FP32 (and unset) float32, BF16
/// bfloat16, FP16 float16 (zbpp.v1.Precision).
at::ScalarType ComputeTypeOf(v1::Precision precision);

/// The config of `spec` with its defaults (kv_heads = heads, rope_theta
/// 10000, norm_eps 1e-5, ffn_hidden 4h); InvalidArgument naming the field
/// for an unknown architecture or inconsistent sizes (the coordinator checks
/// the same at submission; a worker checks again because it trusts nobody's
/// bytes). compute_type stays float32.
absl::StatusOr<ModelConfig> ModelConfigFromSpec(const v1::ModelSpec& spec);
inline absl::StatusOr<ModelConfig> GptConfigFromSpec(const v1::ModelSpec& spec) {
  return ModelConfigFromSpec(spec);
}

/// The spec of `config` (compute_type aside; kv_heads 0 is left unset):
/// ModelConfigFromSpec(ModelSpecOf(c)) checks a config built by hand.
v1::ModelSpec ModelSpecOf(const ModelConfig& config);

/// A named parameter: the name is global to the model (e.g.
/// "block3.attn.qkv.weight", "model.layers.3.self_attn.q_proj.weight"), the
/// same in every partition.
using NamedTensor = std::pair<std::string, at::Tensor>;

/// One virtual stage (chunk) of a decoder of the architecture registry: the
/// blocks of virtual stage v of S (config.layout's v-th run of blocks, or
/// [v·L/S, (v+1)·L/S) without a layout), plus the token embedding on the
/// first virtual stage and the final norm and LM head on the last (under
/// vocabulary parallelism the stages' VocabularyShards hold the token
/// embedding and the head: the first virtual stage starts after the lookup
/// and the last ends at the final norm). Blocks
/// keep their global indices (and names) whatever the layout.
/// A family (gpt.h, llama.h) is a subclass that adds its parameters and
/// runs its embedding, blocks and final norm; the runtime sees only this
/// class.
///
/// Every linear layer runs through SplitLinear, so inside a WeightGradScope
/// backward is the B pass and the W pass is the scope's store. Norm,
/// embedding and attention gradients are computed in B (docs/training.md, "Split
/// backward"); attention is causal at::scaled_dot_product_attention, which
/// has no weights.
///
/// Parameters are initialised from (seed, parameter name) alone, so every
/// partition of a model starts from the same weights. They are float32
/// (master weights) on the chunk's device; the products run in
/// config.compute_type, with the linear layers' weights and biases cast to
/// it once per change, not per pass (ComputeTypeCopies, split_linear.h:
/// 2 more bytes per linear parameter under bf16 / fp16).
///
/// Tied embeddings (config.tie_embeddings): a chunk that is both first and
/// last uses the token embedding as the LM head (one tensor, autograd sums
/// both gradients). Otherwise the last chunk holds a copy of the embedding
/// under the head's name, initialised from the embedding's name (so equal to
/// it), and tied_embedding() of the first and last chunk returns the two
/// copies: whoever trains them must add the two gradients once before each
/// update and give both copies the sum (StageTrainer does), so that they stay
/// equal. Thread-compatible.
class ModelChunk {
 public:
  /// The chunk of config.architecture. Parameters are initialised on the
  /// CPU, then moved to `device`, so that every device starts from the same
  /// weights. InvalidArgument for a config ModelConfigFromSpec would refuse
  /// (naming the field), when virtual_stage is not in [0, num_virtual_stages),
  /// or config.layout is empty and layers is not divisible by
  /// num_virtual_stages, or config.layout is set and does not hold
  /// num_virtual_stages entries >= 1 summing to layers ("pipeline.layout").
  /// kv_heads 0 means heads.
  static absl::StatusOr<std::unique_ptr<ModelChunk>> Create(
      const ModelConfig& config, int virtual_stage, int num_virtual_stages, uint64_t seed,
      c10::Device device = c10::Device(c10::kCPU));
  virtual ~ModelChunk() = default;
  ModelChunk(const ModelChunk&) = delete;
  ModelChunk& operator=(const ModelChunk&) = delete;

  /// First virtual stage: tokens int64 [b, s] -> hidden float32 [b, s, h];
  /// under vocabulary parallelism the token embedding float32 [b, s, h]
  /// instead (its rows are the stages' VocabularyShards', summed by
  /// EmbeddingExchange: worker/runtime/embedding_exchange.h). Others: hidden [b, s, h] -> hidden [b, s, h]; the last one returns
  /// logits [b, s, vocab] of the compute type instead (computes_loss()), or
  /// under vocabulary parallelism the final norm's output [b, s, h] float32.
  /// s <= seq_len.
  at::Tensor Forward(const at::Tensor& input) const;
  /// Whether Forward returns logits, whose loss ends the model: the last
  /// chunk, unless the head is split by vocabulary (config.vocab_parallel).
  bool computes_loss() const { return is_last() && !config_.vocab_parallel; }

  bool is_first() const { return virtual_stage_ == 0; }
  /// Global index of this chunk's first block, and one past its last.
  int first_block() const { return first_layer_; }
  int end_block() const { return end_layer_; }
  bool is_last() const { return virtual_stage_ == num_virtual_stages_ - 1; }
  int virtual_stage() const { return virtual_stage_; }
  const ModelConfig& config() const { return config_; }

  /// Every parameter, in a fixed order (leaves with requires_grad).
  const std::vector<NamedTensor>& parameters() const { return parameters_; }
  /// The linear layers (those whose weight gradient the W pass computes),
  /// in model order: (weight [out, in], bias [out] or undefined), the same
  /// tensors as in parameters().
  const std::vector<std::pair<at::Tensor, at::Tensor>>& linear_layers() const {
    return linear_layers_;
  }
  /// With tied embeddings split over two chunks: this chunk's copy of the
  /// tied matrix [vocab, h] (the token embedding on the first chunk, the LM
  /// head on the last); undefined otherwise (untied, a middle chunk, or one
  /// chunk holding both ends, or vocabulary parallelism, where the stages'
  /// VocabularyShards hold the one matrix).
  const at::Tensor& tied_embedding() const { return tied_; }

 protected:
  ModelChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages, uint64_t seed,
             c10::Device device);

  // What a family provides. AddParameters (called once by Create) adds the
  // chunk's parameters in model order through the helpers below, calling
  // AddTokenEmbedding first on the first chunk and AddHead last on the last.
  virtual void AddParameters() = 0;
  // The first chunk's input from the token embedding [b, s, h] float32:
  // the family's position embedding added, or nothing for rotary ones.
  virtual at::Tensor AddPositions(const at::Tensor& token_embedding) const = 0;
  // Block `layer` (global index): [b, s, h] float32 -> the same.
  virtual at::Tensor Block(int layer, const at::Tensor& x) const = 0;
  // The final norm before the head (last chunk only).
  virtual at::Tensor FinalNorm(const at::Tensor& x) const = 0;

  // A parameter of `shape`, initialised from (seed, init_name or name):
  // normal(0, std) when std > 0, else filled with `fill`.
  void AddParameter(const std::string& name, std::vector<int64_t> shape, double std,
                    double fill = 0.0, const std::string& init_name = "");
  // "<name>.weight" [out, in] ~ normal(0, std) and, with `bias`,
  // "<name>.bias" [out] = 0; registered as a linear layer.
  void AddLinear(const std::string& name, int64_t out, int64_t in, double std, bool bias);
  // The token embedding [vocab, h] ~ normal(0, 0.02), under the family's
  // name (VocabularyNamesOf). None under vocabulary parallelism (the stages'
  // VocabularyShards hold it).
  void AddTokenEmbedding();
  // The LM head [vocab, h], a linear layer without bias, under the family's
  // name; with tied embeddings the embedding itself (same chunk) or a copy
  // of its initial value. None under vocabulary parallelism (the stages'
  // VocabularyShards hold it).
  void AddHead();
  const at::Tensor& Param(const std::string& name) const;
  // SplitLinear through "<name>.weight" (and "<name>.bias" when present).
  at::Tensor Linear(const std::string& name, const at::Tensor& x) const;

  const ModelConfig config_;
  const int virtual_stage_;
  const int num_virtual_stages_;
  const int first_layer_;  // Global index of this chunk's first block.
  const int end_layer_;    // One past its last block.

 private:
  uint64_t seed_;
  c10::Device device_;
  std::vector<NamedTensor> parameters_;
  std::map<std::string, size_t> index_;  // Name -> position in parameters_.
  std::vector<std::pair<at::Tensor, at::Tensor>> linear_layers_;
  at::Tensor head_;  // The LM head's weight (maybe the embedding itself).
  at::Tensor tied_;
  // The linear layers' compute-type copies (Linear reads them; const
  // methods fill them).
  mutable ComputeTypeCopies copies_;
};

/// The name the pipeline runtime (worker/runtime/executor.h) still uses.
using GptChunk = ModelChunk;

/// The parameters of `chunk` in `buckets` gradient buckets (the partial W
/// passes and reductions of scheduler/schedule.h): contiguous groups of its
/// linear layers in model order, of about equal parameter counts, each with
/// the layers' weights and biases; the other parameters (norms, embeddings,
/// whose gradients B computes) go to bucket 0. The same split for the same
/// chunk on every replica. InvalidArgument when `buckets` is below 1 or
/// above the number of linear layers.
absl::StatusOr<std::vector<std::vector<at::Tensor>>> GradientBuckets(const ModelChunk& chunk,
                                                                     int buckets);

/// Mean next-token cross-entropy in nats: logits [b, s, vocab] (any floating
/// type; computed in float32), targets int64 [b, s]; returns a float32
/// scalar.
at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_MODEL_MODEL_CHUNK_H_
