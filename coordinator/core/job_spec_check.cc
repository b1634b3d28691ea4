#include "coordinator/core/job_spec_check.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "api/pipeline_shape.h"
#include "common/job_limits.h"
#include "coordinator/core/checkpoint_directory.h"
#include "coordinator/core/spec_refusal.h"
#include "scheduler/refusal.h"
#include "scheduler/registry.h"

namespace zbpp::coordinator {
namespace {

using zbpp::v1::JobSpec;

// The corpora the worker can read from Debian packages (job_spec.proto,
// DatasetSpec.builtin). The builtin corpora and text files are byte-level.
constexpr const char* kBuiltinCorpora[] = {"bible-kjv", "fortunes",
                                           "jargon-text"};
constexpr int kByteVocab = 256;
constexpr size_t kMaxNameBytes = 128;

absl::Status AtLeast(int64_t value, int64_t min, const std::string& field) {
  if (value < min) return RefuseField(field, "must be >= ", min, ", got ", value);
  return absl::OkStatus();
}

absl::Status InRange(int64_t value, int64_t min, int64_t max,
                     const std::string& field) {
  if (absl::Status st = AtLeast(value, min, field); !st.ok()) return st;
  if (value > max) return RefuseField(field, "must be <= ", max, ", got ", value);
  return absl::OkStatus();
}

// `!(value > 0)` also catches NaN.
absl::Status Positive(double value, const std::string& field) {
  if (!(value > 0) || std::isinf(value)) {
    return RefuseField(field, "must be > 0, got ", value);
  }
  return absl::OkStatus();
}

absl::Status NonNegative(double value, const std::string& field) {
  if (!(value >= 0) || std::isinf(value)) {
    return RefuseField(field, "must be >= 0, got ", value);
  }
  return absl::OkStatus();
}

// [0, 1): betas and the re-solve threshold.
absl::Status Fraction(double value, const std::string& field) {
  if (!(value >= 0 && value < 1)) {
    return RefuseField(field, "must be in [0, 1), got ", value);
  }
  return absl::OkStatus();
}

// The fields one family reads and the other must leave unset (the worker's
// worker/model/gpt.h and llama.h check the same).
absl::Status CheckFamilyShape(const zbpp::v1::ModelSpec& model, bool llama) {
  if (model.has_kv_heads()) {
    if (!llama && model.kv_heads() != model.heads()) {
      return RefuseField("model.kv_heads", "gpt has no grouped-query attention: leave it unset "
                     "or equal to model.heads = ", model.heads(), ", got ", model.kv_heads());
    }
    if (absl::Status st = InRange(model.kv_heads(), 1, model.heads(), "model.kv_heads");
        !st.ok()) {
      return st;
    }
    if (model.heads() % model.kv_heads() != 0) {
      return RefuseField("model.kv_heads", model.kv_heads(),
                     " does not divide model.heads = ", model.heads());
    }
  }
  if (llama && (model.hidden() / model.heads()) % 2 != 0) {
    return RefuseField("model.hidden", "model.hidden / model.heads = head dim ",
                   model.hidden() / model.heads(),
                   " must be even for rotary position embeddings");
  }
  if (model.has_rope_theta()) {
    if (!llama) {
      return RefuseField("model.rope_theta", "gpt learns its positions (no rotary "
                     "embeddings): leave it unset");
    }
    if (absl::Status st = Positive(model.rope_theta(), "model.rope_theta"); !st.ok()) return st;
  }
  if (model.has_norm_eps() && !(model.norm_eps() > 0 && model.norm_eps() < 1)) {
    return RefuseField("model.norm_eps", "must be in (0, 1), got ", model.norm_eps());
  }
  return absl::OkStatus();
}

absl::Status CheckModel(const JobSpec& spec) {
  if (!spec.has_model()) return RefuseField("model", "required");
  const zbpp::v1::ModelSpec& model = spec.model();
  const bool llama = model.architecture() == "llama";
  if (model.architecture() != "gpt" && !llama) {
    return model.architecture().empty()
               ? RefuseField("model.architecture", "required; known: gpt, llama")
               : RefuseField("model.architecture", "unknown architecture \"",
                         model.architecture(), "\"; known: gpt, llama");
  }
  for (auto [value, max, field] :
       {std::tuple{model.layers(), kMaxLayers, "model.layers"},
        std::tuple{model.hidden(), kMaxHidden, "model.hidden"},
        std::tuple{model.heads(), kMaxHidden, "model.heads"},
        std::tuple{model.vocab(), kMaxVocab, "model.vocab"},
        std::tuple{model.seq_len(), kMaxSeqLen, "model.seq_len"}}) {
    if (absl::Status st = InRange(value, 1, max, field); !st.ok()) return st;
  }
  if (model.hidden() % model.heads() != 0) {
    return RefuseField("model.hidden", model.hidden(),
                   " is not divisible by model.heads = ", model.heads());
  }
  if (model.has_ffn_hidden()) {
    if (absl::Status st = InRange(model.ffn_hidden(), 1, kMaxFfnHidden, "model.ffn_hidden");
        !st.ok()) {
      return st;
    }
  }
  return CheckFamilyShape(model, llama);
}

// A path the workers open: absolute, in normal form (no empty, "." or ".."
// component: "../../x" cannot climb out of where it seems to point), at most
// kMaxPathBytes. Which directories a worker may use is its own file
// permissions' matter.
absl::Status CheckPath(const std::string& path, const std::string& field) {
  if (path.size() > kMaxPathBytes) {
    return RefuseField(field, "must be at most ", kMaxPathBytes, " bytes, got ", path.size());
  }
  if (path.empty() || path[0] != '/') {
    return RefuseField(field, "must be an absolute path, got \"", path, "\"");
  }
  if (path.find('\0') != std::string::npos) {
    return RefuseField(field, "must not contain a NUL byte");
  }
  // One trailing slash is fine ("/data/ckpt/").
  absl::string_view rest = absl::string_view(path).substr(1);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty()) return absl::OkStatus();  // "/"
  for (absl::string_view part : absl::StrSplit(rest, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return RefuseField(field, "must be a normal path (no empty, \".\" or \"..\" component), got \"",
                     path, "\"");
    }
  }
  return absl::OkStatus();
}

// DatasetSpec.tokens: what can be told without the files (the workers check
// their sizes and ids when the job starts).
absl::Status CheckTokenFiles(const zbpp::v1::TokenFileDataset& tokens, int64_t vocab) {
  if (absl::Status st = CheckPath(tokens.path(), "dataset.tokens.path"); !st.ok()) return st;
  if (!tokens.eval_path().empty()) {
    if (tokens.has_eval_fraction()) {
      return RefuseField("dataset.tokens.eval_fraction", "must be unset when eval_path is set");
    }
    if (absl::Status st = CheckPath(tokens.eval_path(), "dataset.tokens.eval_path"); !st.ok()) {
      return st;
    }
  }
  if (tokens.has_eval_fraction() &&
      !(tokens.eval_fraction() > 0 && tokens.eval_fraction() < 1)) {
    return RefuseField("dataset.tokens.eval_fraction", "must be in (0, 1), got ",
                   tokens.eval_fraction());
  }
  const bool wide = tokens.dtype() == zbpp::v1::TOKEN_DTYPE_UINT32;
  if (!wide && tokens.dtype() != zbpp::v1::TOKEN_DTYPE_UNSPECIFIED &&
      tokens.dtype() != zbpp::v1::TOKEN_DTYPE_UINT16) {
    return RefuseField("dataset.tokens.dtype", "unknown value ", static_cast<int>(tokens.dtype()));
  }
  // Ids of a uint16 file are below 65536: a larger vocabulary is reachable
  // only with uint32 ids.
  constexpr int64_t kUint16Ids = int64_t{1} << 16;
  if (!wide && vocab > kUint16Ids) {
    return RefuseField("dataset.tokens.dtype", "uint16 ids cannot reach model.vocab = ", vocab,
                   " (at most ", kUint16Ids, "); use uint32");
  }
  return absl::OkStatus();
}

absl::Status CheckDataset(const JobSpec& spec) {
  const zbpp::v1::DatasetSpec& dataset = spec.dataset();
  switch (dataset.source_case()) {
    case zbpp::v1::DatasetSpec::SOURCE_NOT_SET:
      return RefuseField("dataset",
                     "required (one of builtin, text_file, synthetic, tokens)");
    case zbpp::v1::DatasetSpec::kBuiltin: {
      bool known = false;
      for (const char* corpus : kBuiltinCorpora) {
        known = known || dataset.builtin() == corpus;
      }
      if (!known) {
        return RefuseField("dataset.builtin", "unknown corpus \"",
                       dataset.builtin(),
                       "\"; known: ", absl::StrJoin(kBuiltinCorpora, " "));
      }
      break;
    }
    case zbpp::v1::DatasetSpec::kTextFile:
      if (dataset.text_file().empty()) {
        return RefuseField("dataset.text_file", "must not be empty");
      }
      if (absl::Status st = CheckPath(dataset.text_file(), "dataset.text_file"); !st.ok()) {
        return st;
      }
      break;
    case zbpp::v1::DatasetSpec::kSynthetic:
      if (dataset.synthetic().has_sequences()) {
        return AtLeast(dataset.synthetic().sequences(), 1,
                       "dataset.synthetic.sequences");
      }
      return absl::OkStatus();
    case zbpp::v1::DatasetSpec::kTokens:
      return CheckTokenFiles(dataset.tokens(), spec.model().vocab());
  }
  // Text is tokenized byte-level: every byte value needs an embedding row.
  if (spec.model().vocab() < kByteVocab) {
    return RefuseField("model.vocab", "a byte-level dataset needs >= ", kByteVocab,
                   ", got ", spec.model().vocab());
  }
  return absl::OkStatus();
}

absl::Status CheckPipeline(const JobSpec& spec) {
  if (!spec.has_pipeline()) return RefuseField("pipeline", "required");
  const zbpp::v1::PipelineSpec& pipeline = spec.pipeline();
  if (absl::Status st =
          InRange(pipeline.stages(), 1, kMaxStages, "pipeline.stages");
      !st.ok()) {
    return st;
  }
  if (pipeline.has_chunks()) {
    if (absl::Status st = AtLeast(pipeline.chunks(), 1, "pipeline.chunks");
        !st.ok()) {
      return st;
    }
  }
  if (absl::Status st = InRange(pipeline.microbatches(), 1, kMaxMicrobatches,
                                "pipeline.microbatches");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = InRange(pipeline.microbatch_size(), 1, kMaxMicrobatchSize,
                                "pipeline.microbatch_size");
      !st.ok()) {
    return st;
  }
  // 0 (unset) means one replica.
  if (absl::Status st = AtLeast(pipeline.data_parallel(), 0, "pipeline.data_parallel");
      !st.ok()) {
    return st;
  }
  const int64_t workers = int64_t{pipeline.stages()} * DataParallelOf(pipeline);
  if (workers > kMaxWorkersPerJob) {
    return RefuseField("pipeline.data_parallel", "pipeline.stages*data_parallel = ", workers,
                   " workers; at most ", kMaxWorkersPerJob);
  }
  if (!zbpp::v1::LayoutPolicy_IsValid(pipeline.layout_policy())) {
    return RefuseField("pipeline.layout_policy", "unknown value ", pipeline.layout_policy());
  }
  if (pipeline.layout_policy() == zbpp::v1::LAYOUT_POLICY_EVEN && pipeline.layout_size() > 0) {
    return RefuseField("pipeline.layout_policy",
                       "even splits the blocks itself; leave pipeline.layout empty or "
                       "drop layout_policy");
  }
  if (pipeline.vocab_parallel()) {
    // Each stage holds at least one row of the head.
    if (spec.model().vocab() < pipeline.stages()) {
      return RefuseField("pipeline.vocab_parallel", "needs model.vocab (", spec.model().vocab(),
                         ") >= pipeline.stages (", pipeline.stages(), ")");
    }
    // The shards' gradients are not among the virtual stages' REDUCE_GRAD.
    if (DataParallelOf(pipeline) > 1) {
      return RefuseField("pipeline.vocab_parallel", "needs pipeline.data_parallel 1, got ",
                         pipeline.data_parallel());
    }
    // The vocabulary passes are placed by the planner (sched::AddVocabularyPasses).
    if (!spec.schedule().file().empty()) {
      return RefuseField("pipeline.vocab_parallel",
                         "needs a registry schedule (schedule.name), not schedule.file");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string LimitField(const zbpp::v1::SchedulePolicy& schedule) {
  switch (schedule.memory_limit_case()) {
    case zbpp::v1::SchedulePolicy::kMemoryLimitBytes:
      return "schedule.memory_limit_bytes";
    case zbpp::v1::SchedulePolicy::kMemoryLimitMB:
      return "schedule.memory_limit_m_b";
    case zbpp::v1::SchedulePolicy::MEMORY_LIMIT_NOT_SET:
      break;
  }
  return "schedule.name";
}

namespace {

// schedule.file and file_text: both or neither, and within their limits.
absl::Status CheckScheduleFileFields(const zbpp::v1::SchedulePolicy& schedule) {
  if (schedule.file().empty()) {
    if (schedule.file_text().empty()) return absl::OkStatus();
    return RefuseField("schedule.file", "required with schedule.file_text");
  }
  if (schedule.file().size() > kMaxPathBytes) {
    return RefuseField("schedule.file", "must be at most ", kMaxPathBytes,
                   " bytes, got ", schedule.file().size());
  }
  if (schedule.file_text().empty()) {
    return RefuseField("schedule.file_text",
                   "required with schedule.file (zbppctl reads the file "
                   "into it)");
  }
  if (schedule.file_text().size() > kMaxScheduleFileBytes) {
    return RefuseField("schedule.file_text", "must be at most ",
                   kMaxScheduleFileBytes, " bytes, got ",
                   schedule.file_text().size());
  }
  return absl::OkStatus();
}

// Field values of `schedule` alone; how they fit the pipeline is checked
// with the problem (planning.h).
absl::Status CheckSchedulePolicy(const JobSpec& spec) {
  if (!spec.has_schedule()) return RefuseField("schedule", "required");
  const zbpp::v1::SchedulePolicy& schedule = spec.schedule();
  const bool is_auto = schedule.name() == kAutoScheduleName;
  if (absl::Status st = CheckScheduleFileFields(schedule); !st.ok()) return st;
  const bool from_file = !schedule.file().empty();
  if (from_file && !schedule.name().empty()) {
    return RefuseField("schedule.name", "must be empty with schedule.file (the "
                   "file is the schedule), got \"", schedule.name(), "\"");
  }
  if (!from_file && !is_auto && !sched::FindSchedule(schedule.name()).ok()) {
    std::vector<std::string> known = {kAutoScheduleName};
    for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
      known.push_back(traits.name);
    }
    return schedule.name().empty()
               ? RefuseField("schedule.name",
                         "required; known: ", absl::StrJoin(known, " "))
               : RefuseField("schedule.name", "unknown schedule \"",
                         schedule.name(),
                         "\"; known: ", absl::StrJoin(known, " "));
  }
  switch (schedule.memory_limit_case()) {
    case zbpp::v1::SchedulePolicy::kMemoryLimitBytes:
      if (schedule.memory_limit_bytes() < 1) {
        return RefuseField("schedule.memory_limit_bytes", "must be >= 1, got 0");
      }
      break;
    case zbpp::v1::SchedulePolicy::kMemoryLimitMB:
      // Below one microbatch no schedule can run even one F pass.
      if (!std::isfinite(schedule.memory_limit_m_b())) {
        return RefuseField("schedule.memory_limit_m_b",
                       "must be a finite number >= 1, got ",
                       schedule.memory_limit_m_b());
      }
      if (schedule.memory_limit_m_b() < 1) {
        return RefuseField("schedule.memory_limit_m_b", schedule.memory_limit_m_b(),
                       " is below one microbatch (1 M_B)");
      }
      break;
    case zbpp::v1::SchedulePolicy::MEMORY_LIMIT_NOT_SET:
      if (is_auto) {
        return RefuseField("schedule.memory_limit",
                       "required by schedule \"auto\" (memory_limit_bytes or "
                       "memory_limit_m_b)");
      }
      break;
  }
  if (schedule.has_resolve()) {
    const zbpp::v1::ResolvePolicy& resolve = schedule.resolve();
    if (resolve.has_min_improvement()) {
      if (absl::Status st = Fraction(resolve.min_improvement(),
                                     "schedule.resolve.min_improvement");
          !st.ok()) {
        return st;
      }
    }
    if (resolve.has_window_steps()) {
      return AtLeast(resolve.window_steps(), 1,
                     "schedule.resolve.window_steps");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptimizer(const JobSpec& spec) {
  if (!spec.has_optimizer()) return RefuseField("optimizer", "required");
  const zbpp::v1::OptimizerSpec& opt = spec.optimizer();
  if (absl::Status st =
          Positive(opt.learning_rate(), "optimizer.learning_rate");
      !st.ok()) {
    return st;
  }
  if (opt.has_beta1()) {
    if (absl::Status st = Fraction(opt.beta1(), "optimizer.beta1"); !st.ok()) {
      return st;
    }
  }
  if (opt.has_beta2()) {
    if (absl::Status st = Fraction(opt.beta2(), "optimizer.beta2"); !st.ok()) {
      return st;
    }
  }
  if (opt.has_epsilon()) {
    if (absl::Status st = Positive(opt.epsilon(), "optimizer.epsilon");
        !st.ok()) {
      return st;
    }
  }
  if (opt.has_weight_decay()) {
    if (absl::Status st =
            NonNegative(opt.weight_decay(), "optimizer.weight_decay");
        !st.ok()) {
      return st;
    }
  }
  if (opt.has_max_grad_norm()) {
    if (absl::Status st =
            Positive(opt.max_grad_norm(), "optimizer.max_grad_norm");
        !st.ok()) {
      return st;
    }
  }
  if (opt.has_warmup_steps()) {
    if (absl::Status st = AtLeast(opt.warmup_steps(), 0, "optimizer.warmup_steps");
        !st.ok()) {
      return st;
    }
  }
  if (!zbpp::v1::RollbackMode_IsValid(opt.rollback())) {
    return RefuseField("optimizer.rollback", "unknown mode ", opt.rollback());
  }
  if (opt.rollback() == zbpp::v1::ROLLBACK_MODE_IN_PLACE_INVERSE &&
      ((opt.has_beta1() && opt.beta1() == 0) || (opt.has_beta2() && opt.beta2() == 0))) {
    return RefuseField("optimizer.rollback",
                   "IN_PLACE_INVERSE divides by beta1 and beta2: both must be > 0");
  }
  const double decay = opt.has_weight_decay() ? opt.weight_decay() : 0.1;
  if (opt.rollback() == zbpp::v1::ROLLBACK_MODE_IN_PLACE_INVERSE &&
      !(opt.learning_rate() * decay < 1)) {
    return RefuseField("optimizer.rollback",
                   "IN_PLACE_INVERSE divides by 1 - learning_rate * weight_decay, which is <= 0 "
                   "here (", opt.learning_rate() * decay, ")");
  }
  return absl::OkStatus();
}

absl::Status CheckPrecision(const JobSpec& spec) {
  if (!zbpp::v1::Precision_IsValid(spec.precision())) {
    return RefuseField("precision", "unknown precision ", spec.precision());
  }
  const zbpp::v1::LossScaleSpec& scale = spec.loss_scale();
  if (scale.has_initial_scale()) {
    // A power of two keeps the unscaling exact.
    int exponent = 0;
    const double mantissa = std::frexp(scale.initial_scale(), &exponent);
    if (!(scale.initial_scale() >= 1) || mantissa != 0.5 || exponent - 1 > 32) {
      return RefuseField("loss_scale.initial_scale", "must be a power of two in [1, 2^32], got ",
                     absl::StrFormat("%.17g", scale.initial_scale()));
    }
  }
  if (scale.has_growth_interval_steps()) {
    return AtLeast(scale.growth_interval_steps(), 1, "loss_scale.growth_interval_steps");
  }
  return absl::OkStatus();
}

absl::Status CheckCheckpoint(const JobSpec& spec) {
  const zbpp::v1::CheckpointSpec& checkpoint = spec.checkpoint();
  if (absl::Status st =
          AtLeast(checkpoint.interval_steps(), 0, "checkpoint.interval_steps");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = AtLeast(checkpoint.keep_last(), 0, "checkpoint.keep_last"); !st.ok()) {
    return st;
  }
  if (absl::Status st = AtLeast(checkpoint.snapshot_interval_steps(), 0,
                                "checkpoint.snapshot_interval_steps");
      !st.ok()) {
    return st;
  }
  if (checkpoint.interval_steps() > 0 && checkpoint.directory().empty()) {
    return RefuseField("checkpoint.directory",
                   "required when checkpoint.interval_steps > 0");
  }
  if (checkpoint.snapshot_interval_steps() > 0 && checkpoint.directory().empty()) {
    return RefuseField("checkpoint.directory",
                       "required when checkpoint.snapshot_interval_steps > 0");
  }
  if (!checkpoint.directory().empty()) {
    if (absl::Status st = CheckPath(checkpoint.directory(), "checkpoint.directory"); !st.ok()) {
      return st;
    }
  }
  if (checkpoint.has_resume_step()) {
    if (checkpoint.directory().empty()) {
      return RefuseField("checkpoint.directory", "required with checkpoint.resume_step");
    }
    // The placeholder names the new job, which has no checkpoint yet.
    if (absl::StrContains(checkpoint.directory(), kJobIdPlaceholder)) {
      return RefuseField("checkpoint.directory", kJobIdPlaceholder,
                         " would name this new job, which has no checkpoint to resume; with "
                         "checkpoint.resume_step name the directory of the job that wrote it");
    }
    if (checkpoint.resume_step() < 0 || checkpoint.resume_step() >= spec.steps() - 1) {
      return RefuseField("checkpoint.resume_step", "must be in [0, steps - 1) = [0, ",
                     spec.steps() - 1, "), got ", checkpoint.resume_step());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPlanningFields(const JobSpec& spec) {
  for (absl::Status (*check)(const JobSpec&) :
       {CheckModel, CheckPipeline, CheckSchedulePolicy}) {
    if (absl::Status st = check(spec); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status CheckLayout(const JobSpec& spec, int64_t virtual_stages) {
  const zbpp::v1::PipelineSpec& pipeline = spec.pipeline();
  const int layers = spec.model().layers();
  if (pipeline.layout_size() == 0) {
    if (layers < virtual_stages) {
      return RefuseField("model.layers", layers, " layers cannot give each of the ",
                         virtual_stages, " virtual stages (pipeline.stages*chunks) a block");
    }
    if (pipeline.layout_policy() == zbpp::v1::LAYOUT_POLICY_EVEN &&
        layers % virtual_stages != 0) {
      return RefuseField("model.layers", layers,
                         " layers do not divide into pipeline.stages*chunks = ", virtual_stages,
                         " virtual stages; layout_policy even needs them to (auto, the "
                         "default, or pipeline.layout splits them unevenly)");
    }
    return absl::OkStatus();
  }
  if (pipeline.layout_size() != virtual_stages) {
    return RefuseField("pipeline.layout", "has ", pipeline.layout_size(),
                       " entries; it needs one per virtual stage (pipeline.stages*chunks = ",
                       virtual_stages, ")");
  }
  int64_t sum = 0;
  for (int v = 0; v < pipeline.layout_size(); ++v) {
    const int blocks = pipeline.layout(v);
    if (blocks < 1) {
      return RefuseField("pipeline.layout", "virtual stage ", v, " has ", blocks,
                         " blocks; every virtual stage holds at least 1");
    }
    sum += blocks;
  }
  if (sum != layers) {
    return RefuseField("pipeline.layout", "sums to ", sum, " blocks; model.layers is ",
                       layers);
  }
  return absl::OkStatus();
}

absl::Status CheckJobSpecFields(const JobSpec& spec) {
  // Proto field order, so that the first broken rule is the one reported.
  if (spec.name().size() > kMaxNameBytes) {
    return RefuseField("name", "must be at most ", kMaxNameBytes, " bytes, got ",
                       spec.name().size());
  }
  for (absl::Status (*check)(const JobSpec&) :
       {CheckModel, CheckDataset, CheckPipeline, CheckSchedulePolicy,
        CheckOptimizer}) {
    if (absl::Status st = check(spec); !st.ok()) return st;
  }
  if (!zbpp::v1::ValidationMode_IsValid(spec.validation())) {
    return RefuseField("validation", "unknown mode ", spec.validation());
  }
  if (absl::Status st = InRange(spec.steps(), 1, kMaxSteps, "steps"); !st.ok()) return st;
  if (absl::Status st = CheckCheckpoint(spec); !st.ok()) return st;
  if (absl::Status st = CheckPrecision(spec); !st.ok()) return st;
  // Whether the workers can run it is known only when they are chosen
  // (transport_choice.h).
  if (!zbpp::v1::Transport_IsValid(spec.transport())) {
    return RefuseField("transport", "unknown transport ", spec.transport(),
                       "; known: auto, gloo, nccl");
  }
  return absl::OkStatus();
}

SpecRefusal RefusalOfSchedule(const JobSpec& spec, const absl::Status& refusal) {
  std::string field = "schedule.name";
  if (const std::optional<sched::RefusedInput> input = sched::RefusedInputOf(refusal)) {
    switch (*input) {
      case sched::RefusedInput::kMicrobatches:
        field = "pipeline.microbatches";
        break;
      case sched::RefusedInput::kChunks:
        field = "pipeline.chunks";
        break;
      case sched::RefusedInput::kMemoryLimit:
        field = LimitField(spec.schedule());
        break;
    }
  }
  return {std::move(field), std::string(refusal.message())};
}

}  // namespace zbpp::coordinator
