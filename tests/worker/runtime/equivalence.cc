#include "tests/worker/runtime/equivalence.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/comm_order.h"
#include "scheduler/problem.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "tests/worker/test_device.h"
#include "worker/model/gpt.h"
#include "worker/runtime/adamw.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {
namespace {

// The executor's times for one rank's step (PassTimer: the host clock on
// the CPU, CUDA events on a GPU): every pass ends no earlier than it
// starts (a pass that launched nothing may take no device time), passes
// follow each other in schedule order on the rank's one device, all lie
// within the step, and the last ends after the step's start. Reductions,
// timed by their own thread, are left out.
absl::Status CheckTimeline(const StepTimeline& t, const std::vector<sched::Action>& actions) {
  if (t.action_start_seconds.size() != actions.size() ||
      t.action_end_seconds.size() != actions.size()) {
    return absl::InternalError("the timeline does not cover every action");
  }
  double previous_end = 0;
  for (size_t j = 0; j < actions.size(); ++j) {
    if (actions[j].kind == sched::PassKind::kReduce) continue;
    const double start = t.action_start_seconds[j], end = t.action_end_seconds[j];
    if (!(start >= previous_end && end >= start && end <= t.step_seconds)) {
      return absl::InternalError(absl::StrCat(
          "action #", j, " ", sched::ActionToString(actions[j]), " ran [", start, ", ", end,
          "] s, after a pass that ended at ", previous_end, " s, in a step of ",
          t.step_seconds, " s"));
    }
    previous_end = end;
  }
  if (!(previous_end > 0)) return absl::InternalError("no pass of the step took any time");
  return absl::OkStatus();
}

}  // namespace

v1::JobSpec TinySpec(int stages, int chunks, int microbatches,
                     const std::string& architecture) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture(architecture);
  if (architecture == "llama") {
    model->set_kv_heads(2);
    model->set_ffn_hidden(48);
    model->set_tie_embeddings(true);
  }
  // At least 8 layers, a multiple of the virtual stages.
  const int virtual_stages = stages * chunks;
  model->set_layers(virtual_stages * ((8 + virtual_stages - 1) / virtual_stages));
  model->set_hidden(32);
  model->set_heads(4);
  model->set_vocab(64);
  model->set_seq_len(16);
  spec.mutable_pipeline()->set_stages(stages);
  spec.mutable_pipeline()->set_chunks(chunks);
  spec.mutable_pipeline()->set_microbatches(microbatches);
  spec.mutable_pipeline()->set_microbatch_size(2);
  v1::OptimizerSpec* opt = spec.mutable_optimizer();
  opt->set_learning_rate(1e-2);
  opt->set_warmup_steps(2);
  opt->set_weight_decay(0.1);
  // Small enough that every step is clipped: the global norm must be right.
  opt->set_max_grad_norm(0.5);
  spec.set_seed(42);
  return spec;
}

MicrobatchData Batch(int64_t step, int microbatch) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * step + microbatch);
  at::Tensor tokens = at::randint(64, {2, 17}, gen, at::kLong);
  return {tokens.narrow(1, 0, 16).contiguous(), tokens.narrow(1, 1, 16).contiguous()};
}

// Single process, no pipeline, no split, no replicas: the reference
// parameters after training on the global batch of d·m microbatches, the
// gradient of their mean loss. It is summed in the replicas' grouping —
// (Σ_r Σ_i ∂ℓ_{rm+i}/m) / d rather than Σ_j ∂ℓ_j/(dm): the same gradient,
// but float rounding of a different order, which AdamW's normalisation
// amplifies to ~1e-5 where a gradient is nearly zero (the key bias's is
// zero in exact arithmetic).
std::optional<std::pair<std::string, std::string>> TiedNames(const v1::JobSpec& spec) {
  const int stages = spec.pipeline().stages() * std::max(1, spec.pipeline().chunks());
  if (!spec.model().tie_embeddings() || stages == 1) return std::nullopt;
  const ModelConfig config = *ModelConfigFromSpec(spec.model());
  auto name = [&](int stage) {
    auto chunk = *ModelChunk::Create(config, stage, stages, spec.seed());
    for (const auto& [n, t] : chunk->parameters()) {
      if (t.is_same(chunk->tied_embedding())) return n;
    }
    return std::string();
  };
  return std::pair{name(0), name(stages - 1)};
}

std::map<std::string, at::Tensor> Reference(const v1::JobSpec& spec, int d) {
  ModelConfig config = *ModelConfigFromSpec(spec.model());
  config.compute_type = ComputeTypeOf(spec.precision());
  auto model = *ModelChunk::Create(config, 0, 1, spec.seed(), TestDevice());
  AdamW optimizer(model->parameters(), AdamWOptions::FromSpec(spec.optimizer()));
  const int m = spec.pipeline().microbatches();
  for (int step = 0; step < kEquivalenceSteps; ++step) {
    std::vector<at::Tensor> sum;
    for (int replica = 0; replica < d; ++replica) {
      optimizer.ZeroGrad();
      for (int mb = replica * m; mb < (replica + 1) * m; ++mb) {
        MicrobatchData data = Batch(step, mb);
        (LanguageModelLoss(model->Forward(data.inputs.to(TestDevice())),
                           data.targets.to(TestDevice())) /
         double(m))
            .backward();
      }
      for (size_t k = 0; k < model->parameters().size(); ++k) {
        const at::Tensor& g = model->parameters()[k].second.grad();
        if (replica == 0) {
          sum.push_back(g.clone());
        } else {
          sum[k].add_(g);
        }
      }
    }
    for (size_t k = 0; k < sum.size(); ++k) {
      const_cast<at::Tensor&>(model->parameters()[k].second).mutable_grad() = sum[k].div_(d);
    }
    bool inf_nan = false;
    const double norm = std::sqrt(optimizer.LocalGradNormSquared(&inf_nan));
    const double max_norm = spec.optimizer().max_grad_norm();
    optimizer.Step(step, norm > max_norm ? max_norm / (norm + 1e-6) : 1.0);
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : model->parameters()) out[name] = t.detach().clone();
  if (auto tied = TiedNames(spec)) out[tied->second] = out.at(tied->first);
  return out;
}

// The schedule `name` for p ranks and m microbatches per replica; with d > 1
// its reductions placed by the solver (as the coordinator does).
absl::StatusOr<sched::Schedule> ScheduleFor(const std::string& name, int p, int d,
                                            double bw_fraction) {
  const sched::ScheduleTraits traits = *sched::FindSchedule(name);
  const int m = 2 * std::max(p, 2);
  sched::VirtualStageCost cost;
  cost.reduce_seconds = d > 1 ? 1.5 : 0.0;
  if (bw_fraction != 1) cost.bw_seconds = bw_fraction * (cost.b_seconds + cost.w_seconds);
  sched::Problem problem =
      sched::Problem::Uniform(p, traits.default_chunks, m, cost, 0.0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  if (!schedule.ok() || d == 1) return schedule;
  return sched::PlaceReductions(problem, *schedule, sched::ReducePlacement::kSolved);
}

absl::StatusOr<std::map<std::string, at::Tensor>> TrainWorker(const sched::Schedule& schedule,
                                                              const v1::JobSpec& spec, int w,
                                                              Communicator* pipeline,
                                                              Communicator* replicas,
                                                              bool merge_backward_passes) {
  const int p = schedule.stages;
  const int r = w % p;
  absl::StatusOr<sched::PairOrders> orders = sched::DerivePairOrders(schedule);
  if (!orders.ok()) return orders.status();
  const v1::ValidationMode mode = sched::CheckSpeculativePrefixes(schedule, *orders).ok()
                                      ? v1::VALIDATION_MODE_POST
                                      : v1::VALIDATION_MODE_SYNCHRONOUS;
  StageTrainerOptions o;
  o.spec = spec;
  o.stage = r;
  for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
    if (schedule.stage_of[s] == r) o.virtual_stages.push_back(s);
  }
  o.communicator = pipeline;
  o.data_parallel = replicas;
  o.replica = w / p;
  o.device = TestDevice();
  o.train_batches = Batch;
  o.eval_batches = Batch;
  o.timeout = absl::Seconds(20);
  o.merge_backward_passes = merge_backward_passes;
  absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(o);
  if (!trainer.ok()) return trainer.status();
  if (absl::Status st = (*trainer)->ValidateSchedule(schedule); !st.ok()) return st;
  // The gap before a step names the embedding's exchange on the stages
  // that have one: the tied copies' sum, or the vocabulary shards'.
  const bool exchanges_embedding =
      spec.pipeline().vocab_parallel() ||
      (spec.model().tie_embeddings() && schedule.num_virtual_stages() > 1 &&
       (schedule.stage_of.front() == r || schedule.stage_of.back() == r));
  for (int step = 0; step < kEquivalenceSteps; ++step) {
    absl::StatusOr<StepResult> result = (*trainer)->RunStep(step, schedule, mode);
    if (!result.ok()) return result.status();
    if (absl::Status st = CheckTimeline(result->timeline, schedule.actions[r]); !st.ok()) {
      return st;
    }
    if (step > 0 && (!result->gap.has_value() ||
                     (result->gap->seconds(GapPhase::kEmbedding) > 0) != exchanges_embedding)) {
      return absl::InternalError(absl::StrCat(
          "step ", step, " on stage ", r, ": the gap's embedding exchange ",
          result->gap.has_value() ? result->gap->seconds(GapPhase::kEmbedding) : -1.0,
          " s, expected ", exchanges_embedding ? "> 0" : "0"));
    }
  }
  if (absl::StatusOr<std::optional<StepValidation>> settled = (*trainer)->Settle();
      !settled.ok()) {
    return settled.status();
  }
  std::map<std::string, at::Tensor> params;
  for (const auto& [name, t] : (*trainer)->Parameters()) params[name] = t.detach();
  return params;
}

std::string EquivalenceCaseName(const std::string& schedule, int p, int d,
                                v1::Precision precision) {
  std::string n = schedule;
  std::replace(n.begin(), n.end(), '-', '_');
  if (precision == v1::PRECISION_BF16) n = "bf16_" + n;
  n += "_p" + std::to_string(p);
  return d == 1 ? n : n + "_d" + std::to_string(d);
}

double ExpectNearReference(const std::map<std::string, at::Tensor>& params,
                           const std::map<std::string, at::Tensor>& reference,
                           const std::string& label, double tolerance) {
  double worst = 0;
  for (const auto& [name, t] : params) {
    auto want = reference.find(name);
    if (want == reference.end()) {
      ADD_FAILURE() << label << ": " << name << " is not a parameter of the model";
      continue;
    }
    const double scale = want->second.abs().max().item<double>();
    const double error = (t - want->second).abs().max().item<double>() / scale;
    worst = std::max(worst, error);
    EXPECT_LE(error, tolerance) << label << " " << name;
  }
  return worst;
}

}  // namespace zbpp::worker
