// StageTrainer's calibration profile (docs/control-plane.md, "How a job
// runs"): its virtual stages and the layout parts, each pass timed and
// metered by ProfileVirtualStage (stage_profile.h), the gradients left as
// they were (stage_trainer.h).

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {
namespace {

absl::Status WithVirtualStage(const absl::Status& st, int virtual_stage) {
  return absl::Status(st.code(), absl::StrCat("profiling virtual stage ", virtual_stage, ": ",
                                              std::string(st.message())));
}

}  // namespace

StageTrainer::SavedGradients StageTrainer::SaveGradients() const {
  SavedGradients saved;
  if (options_.synthetic.has_value()) return saved;  // No pass defines a gradient.
  for (const NamedTensor& t : Parameters()) {
    const at::Tensor& grad = t.second.grad();
    saved.emplace_back(t.second, grad.defined() ? grad.clone() : at::Tensor());
  }
  return saved;
}

void StageTrainer::RestoreGradients(SavedGradients& saved) {
  at::NoGradGuard no_grad;
  for (auto& [param, grad] : saved) {
    if (grad.defined()) {
      param.mutable_grad().copy_(grad);
    } else {
      param.mutable_grad().reset();
    }
  }
}

absl::StatusOr<std::vector<StageProfile>> StageTrainer::Profile(int repetitions) {
  SavedGradients saved = SaveGradients();
  std::vector<StageProfile> profiles;
  absl::Status status;
  for (size_t i = 0; i < chunks_.size() && status.ok(); ++i) {
    const StageProfileOptions o =
        ProfileOptions(*chunks_[i], *stores_[i], options_.virtual_stages[i], repetitions);
    absl::StatusOr<StageProfile> profile = ProfileVirtualStage(o);
    if (profile.ok()) {
      profiles.push_back(*profile);
    } else {
      status = WithVirtualStage(profile.status(), o.virtual_stage);
    }
  }
  RestoreGradients(saved);
  if (!status.ok()) return status;
  return profiles;
}

absl::StatusOr<std::vector<StageProfile>> StageTrainer::ProfileLayoutParts(int repetitions,
                                                                         int blocks) {
  if (blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout parts: blocks per part must be >= 1, got ", blocks));
  }
  if (options_.synthetic.has_value()) {
    return absl::FailedPreconditionError(
        "layout parts: synthetic compute has no model to profile");
  }
  absl::StatusOr<ModelConfig> config = ModelConfigFromSpec(options_.spec.model());
  if (!config.ok()) return config.status();
  constexpr int kParts = 3;  // Embedding + blocks, blocks, blocks + head.
  config->compute_type = ComputeTypeOf(options_.spec.precision());
  config->layers = kParts * blocks;
  config->layout.assign(kParts, blocks);
  std::vector<StageProfile> profiles;
  for (int part = 0; part < kParts; ++part) {
    absl::StatusOr<std::unique_ptr<ModelChunk>> chunk =
        ModelChunk::Create(*config, part, kParts, options_.spec.seed(), options_.device);
    if (!chunk.ok()) return chunk.status();
    {
      // As Create does for the stage's own chunks: B and W add into
      // gradient buffers that exist before, so M_W counts activations only.
      at::NoGradGuard no_grad;
      for (const NamedTensor& t : (*chunk)->parameters()) {
        at::Tensor param = t.second;  // The same tensor.
        param.mutable_grad() = at::zeros_like(param);
      }
    }
    WeightGradStore store;
    StageProfileOptions o = ProfileOptions(**chunk, store, part, repetitions);
    absl::StatusOr<StageProfile> profile = ProfileVirtualStage(o);
    if (!profile.ok()) {
      return absl::Status(profile.status().code(),
                          absl::StrCat("layout part ", part, ": ", profile.status().message()));
    }
    profiles.push_back(*profile);
  }
  return profiles;
}

StageProfileOptions StageTrainer::ProfileOptions(const ModelChunk& chunk,
                                                 WeightGradStore& store, int virtual_stage,
                                                 int repetitions) {
  StageProfileOptions o;
  o.chunk = &chunk;
  o.store = &store;
  o.virtual_stage = virtual_stage;
  o.microbatch_size = options_.spec.pipeline().microbatch_size();
  o.seq_len = chunk.config().seq_len;
  o.hidden = chunk.config().hidden;
  o.vocab = chunk.config().vocab;
  o.microbatches = options_.spec.pipeline().microbatches();
  o.loss_scale = loss_scaler_.scale();
  o.repetitions = repetitions;
  o.seed = options_.spec.seed() + static_cast<uint64_t>(virtual_stage);
  o.device = options_.device;
  o.memory = &memory_;
  o.synthetic = options_.synthetic.has_value() ? &*options_.synthetic : nullptr;
  return o;
}

}  // namespace zbpp::worker
