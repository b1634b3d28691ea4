#include "worker/model/model_chunk.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/counter_hash.h"
#include "worker/model/gpt.h"
#include "worker/model/llama.h"
#include "worker/model/split_linear.h"

namespace zbpp::worker {
namespace {

// The architecture registry: adding a family is a subclass of ModelChunk and
// one line here (plus its costs in the coordinator's analytic model,
// coordinator/core/model_costs.h).
struct Architecture {
  const char* name;
  // The token embedding's and the LM head's global names (VocabularyNames).
  const char* embedding;
  const char* head;
  // The family's own rules on a spec whose common fields are valid.
  absl::Status (*check)(const v1::ModelSpec& spec);
  std::unique_ptr<ModelChunk> (*make)(const ModelConfig& config, int virtual_stage, int num_virtual_stages,
                                      uint64_t seed, c10::Device device);
};

constexpr Architecture kArchitectures[] = {
    {"gpt", "embed.token", "head.weight", CheckGptSpec, MakeGptChunk},
    {"llama", "model.embed_tokens.weight", "lm_head.weight", CheckLlamaSpec, MakeLlamaChunk},
};

const Architecture* FindArchitecture(const std::string& name) {
  for (const Architecture& a : kArchitectures) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

// A parameter's generator seed from (job seed, name), so that its initial
// value does not depend on which other parameters a process holds.
uint64_t NameSeed(uint64_t seed, const std::string& name) {
  uint64_t h = SplitMix64(seed);
  for (unsigned char c : name) h = HashCombine(h, c);
  return h;
}

}  // namespace

VocabularyNames VocabularyNamesOf(const std::string& architecture) {
  const Architecture* a = FindArchitecture(architecture);
  return a == nullptr ? VocabularyNames{} : VocabularyNames{a->embedding, a->head};
}

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

absl::StatusOr<ModelConfig> ModelConfigFromSpec(const v1::ModelSpec& spec) {
  const Architecture* architecture = FindArchitecture(spec.architecture());
  if (architecture == nullptr) {
    std::vector<std::string> known;
    for (const Architecture& a : kArchitectures) known.push_back(a.name);
    return absl::InvalidArgumentError(
        absl::StrCat("model.architecture: unknown architecture \"",
                     std::string(spec.architecture()), "\"; known: ", absl::StrJoin(known, ", ")));
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
  if (spec.has_norm_eps() && !(spec.norm_eps() > 0 && spec.norm_eps() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.norm_eps must be in (0, 1), got ", spec.norm_eps()));
  }
  if (absl::Status st = architecture->check(spec); !st.ok()) return st;
  ModelConfig config;
  config.architecture = spec.architecture();
  config.layers = spec.layers();
  config.hidden = spec.hidden();
  config.heads = spec.heads();
  config.vocab = spec.vocab();
  config.seq_len = spec.seq_len();
  config.ffn_hidden = spec.has_ffn_hidden() ? spec.ffn_hidden() : 4 * spec.hidden();
  config.kv_heads = spec.has_kv_heads() ? spec.kv_heads() : spec.heads();
  if (spec.has_rope_theta()) config.rope_theta = spec.rope_theta();
  if (spec.has_norm_eps()) config.norm_eps = spec.norm_eps();
  config.tie_embeddings = spec.tie_embeddings();
  if (absl::Status st = positive(config.ffn_hidden, "model.ffn_hidden"); !st.ok()) return st;
  return config;
}

namespace {

// Global index of the first block of virtual stage `v` of `n` (v = n: one
// past the last block), for a config Create checked.
int FirstBlockOf(const ModelConfig& config, int v, int n) {
  if (config.layout.empty()) return v * (config.layers / n);
  int first = 0;
  for (int k = 0; k < v; ++k) first += config.layout[k];
  return first;
}

// Create's check of the split of config.layers over `n` virtual stages.
absl::Status CheckBlocks(const ModelConfig& config, int n) {
  if (config.layout.empty()) {
    if (config.layers % n == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "model.layers (", config.layers, ") must be divisible by the ", n, " virtual stages"));
  }
  if (static_cast<int>(config.layout.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline.layout has ",
                                                   config.layout.size(), " entries for ", n,
                                                   " virtual stages"));
  }
  int64_t sum = 0;
  for (int blocks : config.layout) {
    if (blocks < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline.layout: every virtual stage holds >= 1 block, got ", blocks));
    }
    sum += blocks;
  }
  if (sum != config.layers) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline.layout sums to ", sum,
                                                   " blocks; model.layers is ", config.layers));
  }
  return absl::OkStatus();
}

}  // namespace

ModelChunk::ModelChunk(const ModelConfig& config, int virtual_stage, int num_virtual_stages, uint64_t seed,
                       c10::Device device)
    : config_(config),
      virtual_stage_(virtual_stage),
      num_virtual_stages_(num_virtual_stages),
      first_layer_(FirstBlockOf(config, virtual_stage, num_virtual_stages)),
      end_layer_(FirstBlockOf(config, virtual_stage + 1, num_virtual_stages)),
      seed_(seed),
      device_(device) {}

v1::ModelSpec ModelSpecOf(const ModelConfig& config) {
  v1::ModelSpec spec;
  spec.set_architecture(config.architecture);
  spec.set_layers(config.layers);
  spec.set_hidden(config.hidden);
  spec.set_heads(config.heads);
  spec.set_vocab(config.vocab);
  spec.set_seq_len(config.seq_len);
  spec.set_ffn_hidden(config.ffn_hidden);
  if (config.kv_heads != 0) spec.set_kv_heads(config.kv_heads);
  if (config.architecture != "gpt") spec.set_rope_theta(config.rope_theta);
  spec.set_norm_eps(config.norm_eps);
  spec.set_tie_embeddings(config.tie_embeddings);
  return spec;
}

absl::StatusOr<std::unique_ptr<ModelChunk>> ModelChunk::Create(const ModelConfig& given,
                                                               int virtual_stage, int num_virtual_stages,
                                                               uint64_t seed,
                                                               c10::Device device) {
  absl::StatusOr<ModelConfig> config = ModelConfigFromSpec(ModelSpecOf(given));
  if (!config.ok()) return config.status();
  config->compute_type = given.compute_type;
  config->layout = given.layout;
  config->vocab_parallel = given.vocab_parallel;
  if (num_virtual_stages < 1 || virtual_stage < 0 || virtual_stage >= num_virtual_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("virtual stage ", virtual_stage, " is not in [0, ", num_virtual_stages, ")"));
  }
  if (absl::Status st = CheckBlocks(*config, num_virtual_stages); !st.ok()) return st;
  std::unique_ptr<ModelChunk> chunk = FindArchitecture(config->architecture)
                                          ->make(*config, virtual_stage, num_virtual_stages, seed, device);
  chunk->AddParameters();
  return chunk;
}

at::Tensor InitialParameter(uint64_t seed, const std::string& init_name,
                            const std::vector<int64_t>& shape, double std, double fill) {
  at::Generator gen = at::detail::createCPUGenerator(NameSeed(seed, init_name));
  at::Tensor t = at::empty(shape, at::kFloat);
  if (std > 0) {
    t.normal_(0.0, std, gen);
  } else {
    t.fill_(fill);
  }
  return t;
}

void ModelChunk::AddParameter(const std::string& name, std::vector<int64_t> shape, double std,
                              double fill, const std::string& init_name) {
  at::Tensor t =
      InitialParameter(seed_, init_name.empty() ? name : init_name, shape, std, fill).to(device_);
  t.set_requires_grad(true);
  index_[name] = parameters_.size();
  parameters_.emplace_back(name, t);
}

void ModelChunk::AddLinear(const std::string& name, int64_t out, int64_t in, double std,
                           bool bias) {
  AddParameter(name + ".weight", {out, in}, std);
  at::Tensor weight = parameters_.back().second;
  if (bias) AddParameter(name + ".bias", {out}, /*std=*/0.0);
  linear_layers_.push_back({weight, bias ? parameters_.back().second : at::Tensor()});
}

void ModelChunk::AddTokenEmbedding() {
  if (config_.vocab_parallel) return;
  AddParameter(VocabularyNamesOf(config_.architecture).embedding,
               {config_.vocab, config_.hidden}, 0.02);
  if (config_.tie_embeddings && !is_last()) tied_ = parameters_.back().second;
}

void ModelChunk::AddHead() {
  if (config_.vocab_parallel) return;
  const VocabularyNames names = VocabularyNamesOf(config_.architecture);
  const std::string& name = names.head;
  const std::string& embedding_name = names.embedding;
  if (config_.tie_embeddings && is_first()) {
    // One chunk holds both ends: the head is the embedding itself. Its
    // weight gradient comes from W (SplitLinear) and B (the embedding);
    // the W pass adds into the same .grad.
    head_ = Param(embedding_name);
    linear_layers_.push_back({head_, at::Tensor()});
    return;
  }
  AddParameter(name, {config_.vocab, config_.hidden}, 0.02, 0.0,
               config_.tie_embeddings ? embedding_name : name);
  head_ = parameters_.back().second;
  if (config_.tie_embeddings) tied_ = head_;
  linear_layers_.push_back({head_, at::Tensor()});
}

const at::Tensor& ModelChunk::Param(const std::string& name) const {
  auto it = index_.find(name);
  // Names are built by the family from the same strings; a miss is a bug.
  TORCH_CHECK(it != index_.end(), "ModelChunk: no parameter ", name);
  return parameters_[it->second].second;
}

at::Tensor ModelChunk::Linear(const std::string& name, const at::Tensor& x) const {
  auto bias = index_.find(name + ".bias");
  return SplitLinear(x, Param(name + ".weight"),
                     bias == index_.end() ? at::Tensor() : parameters_[bias->second].second,
                     config_.compute_type, &copies_);
}

at::Tensor ModelChunk::Forward(const at::Tensor& input) const {
  at::Tensor x = input;
  if (is_first()) {
    x = AddPositions(config_.vocab_parallel
                         ? input
                         : at::embedding(Param(VocabularyNamesOf(config_.architecture).embedding),
                                         input));
  }
  for (int l = first_layer_; l < end_layer_; ++l) x = Block(l, x);
  if (!is_last()) return x;
  if (config_.vocab_parallel) return FinalNorm(x);
  return SplitLinear(FinalNorm(x), head_, at::Tensor(), config_.compute_type, &copies_);
}

absl::StatusOr<std::vector<std::vector<at::Tensor>>> GradientBuckets(const ModelChunk& chunk,
                                                                     int buckets) {
  const auto& layers = chunk.linear_layers();
  const int n = static_cast<int>(layers.size());
  if (buckets < 1 || buckets > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "virtual stage ", chunk.virtual_stage(), " has ", n, " linear layers: it cannot be split into ",
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

at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits.to(at::kFloat).reshape({-1, logits.size(-1)}),
                                targets.reshape({-1}));
}

}  // namespace zbpp::worker
