// Balanced pipelines in synthetic compute: what the planner's layout choice
// (pipeline.layout_policy AUTO, coordinator/core/planning.h PlanJob, with
// sched::BalancedLayouts of scheduler/layout_search.h) buys over the even
// split when the runtime runs both, for a Llama-3-8B-like model whose LM
// head costs 0.6 (32K tokens) to 2.3 (128K tokens) blocks' forward per pass.
//
// For each (p, vocabulary, m, schedule) the job is planned twice through
// PlanJob, layout_policy EVEN and AUTO, and both plans' schedules run in the
// real runtime under synthetic compute (worker/runtime/synthetic_compute.h):
// p stages as threads of this process, each a PipelineExecutor over the
// order-strict communicator (bench/synthetic_run.h), every pass waiting its
// plan's analytic cost (the nominal 1 TFLOP/s seconds of InitialProblem)
// times a scale, the same for both plans, chosen so that EVEN's predicted
// step is --step-seconds: the worker's own path (SyntheticFromCostModel
// over the plan's cost model, as zbpp-worker --synthetic-compute SCALE).
// The runs alternate, EVEN then AUTO, then AUTO then EVEN, ..., and each
// layout's median step is shown beside the simulator's for the same pass
// times, with the largest per-stage bubble of that step and the predicted
// one, two ways (bench/synthetic_run.h StageBubbles: 1 - busy / that stage's own
// span, and 1 - busy / the largest stage span as job.proto's
// StageSummary reports it), and AUTO's tokens per second over EVEN's (the
// ratio of the median steps: a step is m · b · s tokens under both).
//
// The model: 32 blocks, h = 4096, 32 heads, 8 key/value heads, SwiGLU
// 14336, s = 1024, b = 1. Messages between stages are [1, 256, 1024]
// float32 (1 MiB) rather than the model's [1, 1024, 4096] (16 MiB), whose
// copies would load the two cores this runs on without telling the
// layouts apart (the timing is the cost model's either way).
//
//   balance_bench [--in-process] [--stages=8,16] [--vocab=32768,128256]
//       [--m-per-stage=2] [--schedules=1f1b,zb-2p,zb-v] [--rounds=2]
//       [--steps=3] [--step-seconds=1] [--vocab-parallel] [--demo-model]
//
// --m-per-stage: m = that times p (a list). --rounds: runs of each layout,
// each of --steps steps. --in-process: CreateInProcessGroup (matches by
// tag) instead of the order-strict group. --vocab-parallel adds a third
// plan, VOCAB: AUTO with the head split by vocabulary over the stages
// (pipeline.vocab_parallel; its S and T passes placed by
// sched::AddVocabularyPasses, each waiting its AnalyticVocabularyCosts),
// run in the same rotation, and prints VOCAB's columns after AUTO's.
// --demo-model plans scripts/demo's Llama instead (h = 128, 4 heads, 2
// key/value heads, SwiGLU 352, tied embeddings, s = 128, b = 4, 4 blocks
// per stage), whose head at a 32K vocabulary costs about 19 blocks.

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "api/pipeline_shape.h"
#include "api/schedule_proto.h"
#include "bench/synthetic_run.h"
#include "coordinator/core/planning.h"
#include "scheduler/simulator.h"
#include "testing/model_specs.h"
#include "worker/runtime/synthetic_compute.h"
#include "zbpp/v1/job_spec.pb.h"

namespace {

using zbpp::bench::Measured;
using zbpp::coordinator::JobPlan;

const zbpp::worker::SyntheticShape kShape{1, 256, 1024};  // 1 MiB messages.

struct Flags {
  bool in_process = false;
  std::vector<int> stages = {8, 16};
  std::vector<int> vocabularies = {32768, 128256};
  std::vector<int> m_per_stage = {2};
  std::vector<std::string> schedules = {"1f1b", "zb-2p", "zb-v"};
  int rounds = 2;
  int steps = 3;
  double step_seconds = 1.0;
  bool vocab_parallel = false;
  bool demo_model = false;
};

// Parses "--name=1,2,3" into positive integers; false (after saying which
// flag) on anything else.
bool ParseInts(const std::string& name, const std::string& text, std::vector<int>& out) {
  out.clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      std::fprintf(stderr, "--%s: \"%s\" is not a list of integers >= 1\n", name.c_str(),
                   text.c_str());
      return false;
    }
    out.push_back(value);
  }
  if (out.empty()) std::fprintf(stderr, "--%s: empty\n", name.c_str());
  return !out.empty();
}

bool ParseFlags(int argc, char** argv, Flags& flags) {
  std::vector<int> one;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = arg.rfind("--", 0) == 0;
    if (ok && arg == "--in-process") {
      flags.in_process = true;
    } else if (ok && arg == "--vocab-parallel") {
      flags.vocab_parallel = true;
    } else if (ok && arg == "--demo-model") {
      flags.demo_model = true;
    } else if (ok && name == "stages") {
      ok = ParseInts(name, value, flags.stages);
    } else if (ok && name == "vocab") {
      ok = ParseInts(name, value, flags.vocabularies);
    } else if (ok && name == "m-per-stage") {
      ok = ParseInts(name, value, flags.m_per_stage);
    } else if (ok && name == "schedules") {
      flags.schedules = absl::StrSplit(value, ',', absl::SkipEmpty());
      ok = !flags.schedules.empty();
      if (!ok) std::fprintf(stderr, "--schedules: empty\n");
    } else if (ok && (name == "rounds" || name == "steps")) {
      ok = ParseInts(name, value, one) && one.size() == 1;
      if (ok) (name == "rounds" ? flags.rounds : flags.steps) = one[0];
    } else if (ok && name == "step-seconds") {
      ok = absl::SimpleAtod(value, &flags.step_seconds) && flags.step_seconds > 0;
      if (!ok) std::fprintf(stderr, "--step-seconds: \"%s\" is not > 0\n", value.c_str());
    } else {
      std::fprintf(stderr, "unknown argument \"%s\"\n", arg.c_str());
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

// The Llama-3-8B-like job (or with `demo`, scripts/demo's Llama) at p stages
// with `vocab` tokens, m microbatches, under `schedule` and `policy`.
zbpp::v1::JobSpec LlamaSpec(bool demo, int p, int vocab, int m, const std::string& schedule,
                            zbpp::v1::LayoutPolicy policy, bool vocab_parallel = false) {
  zbpp::v1::JobSpec spec;
  spec.set_name("balance-bench");
  zbpp::v1::ModelSpec& model = *spec.mutable_model();
  model = zbpp::coordinator::testing::Llama3_8B();
  model.set_seq_len(1024);
  if (demo) {
    model.set_layers(4 * p);
    model.set_hidden(128);
    model.set_heads(4);
    model.set_kv_heads(2);
    model.set_ffn_hidden(352);
    model.set_seq_len(128);
    model.set_tie_embeddings(true);
  }
  model.set_vocab(vocab);
  spec.mutable_dataset()->mutable_synthetic();
  zbpp::v1::PipelineSpec& pipeline = *spec.mutable_pipeline();
  pipeline.set_stages(p);
  pipeline.set_microbatches(m);
  pipeline.set_microbatch_size(demo ? 4 : 1);
  pipeline.set_layout_policy(policy);
  pipeline.set_vocab_parallel(vocab_parallel);
  spec.mutable_schedule()->set_name(schedule);
  spec.mutable_optimizer()->set_learning_rate(3e-4);
  spec.set_steps(1);
  return spec;
}

// One plan made runnable: its synthetic compute at the row's scale, what the
// simulator predicts for those very pass times, and the steps measured.
struct Run {
  JobPlan plan;
  zbpp::worker::SyntheticCompute synthetic;
  zbpp::sched::SimulationResult predicted;
  std::vector<Measured> steps;
};

absl::StatusOr<Run> Prepare(JobPlan plan, double scale) {
  const zbpp::sched::Problem& problem = plan.choice.problem;
  absl::StatusOr<zbpp::worker::SyntheticCompute> synthetic = zbpp::worker::SyntheticFromCostModel(
      zbpp::CostModelToProto(problem), problem.num_virtual_stages(), {scale});
  if (!synthetic.ok()) return synthetic.status();
  zbpp::sched::Problem scaled = problem;
  scaled.virtual_stages = synthetic->stages;
  scaled.vocabulary = synthetic->vocabulary;
  absl::StatusOr<zbpp::sched::SimulationResult> predicted =
      zbpp::sched::Simulate(scaled, plan.choice.schedule);
  if (!predicted.ok()) return predicted.status();
  return Run{std::move(plan), *std::move(synthetic), *std::move(predicted), {}};
}

// Runs `steps` steps of `run`'s schedule and appends what they measured.
absl::Status RunSteps(const Flags& flags, Run& run) {
  absl::StatusOr<std::vector<std::vector<zbpp::worker::StepTimeline>>> timelines =
      zbpp::bench::RunSynthetic(run.plan.choice.schedule, run.synthetic, flags.in_process,
                                flags.steps, kShape);
  if (!timelines.ok()) return timelines.status();
  for (size_t step = 0; step < timelines->size(); ++step) {
    run.steps.push_back(
        zbpp::bench::Measure((*timelines)[step], run.plan.choice.schedule, run.synthetic, step));
  }
  return absl::OkStatus();
}

// One table row: the plans made, run alternately, and printed. Errors:
// PlanJob's, the simulator's, the runtime's.
absl::Status Row(const Flags& flags, int p, int vocab, int m, const std::string& schedule) {
  absl::StatusOr<JobPlan> even_plan =
      zbpp::coordinator::PlanJob(LlamaSpec(flags.demo_model, p, vocab, m, schedule,
                                           zbpp::v1::LAYOUT_POLICY_EVEN));
  if (!even_plan.ok()) return even_plan.status();
  absl::StatusOr<JobPlan> auto_plan =
      zbpp::coordinator::PlanJob(LlamaSpec(flags.demo_model, p, vocab, m, schedule,
                                           zbpp::v1::LAYOUT_POLICY_AUTO));
  if (!auto_plan.ok()) return auto_plan.status();
  const double scale = flags.step_seconds / even_plan->choice.simulation.step_seconds;
  absl::StatusOr<Run> even = Prepare(*std::move(even_plan), scale);
  if (!even.ok()) return even.status();
  absl::StatusOr<Run> automatic = Prepare(*std::move(auto_plan), scale);
  if (!automatic.ok()) return automatic.status();
  std::vector<Run*> runs = {&*even, &*automatic};
  absl::StatusOr<Run> vocabulary = absl::UnknownError("not planned");
  if (flags.vocab_parallel) {
    absl::StatusOr<JobPlan> vocabulary_plan = zbpp::coordinator::PlanJob(LlamaSpec(
        flags.demo_model, p, vocab, m, schedule, zbpp::v1::LAYOUT_POLICY_AUTO, true));
    if (!vocabulary_plan.ok()) return vocabulary_plan.status();
    vocabulary = Prepare(*std::move(vocabulary_plan), scale);
    if (!vocabulary.ok()) return vocabulary.status();
    runs.push_back(&*vocabulary);
  }
  // In rotation, each plan first in turn, so that a drift in the machine's
  // load (other builds on the same cores) falls on all alike.
  for (int round = 0; round < flags.rounds; ++round) {
    for (size_t k = 0; k < runs.size(); ++k) {
      if (absl::Status st = RunSteps(flags, *runs[(round + k) % runs.size()]); !st.ok()) {
        return st;
      }
    }
  }
  const Measured& even_median = even->steps[zbpp::bench::MedianStep(even->steps)];
  const Measured& auto_median = automatic->steps[zbpp::bench::MedianStep(automatic->steps)];
  const zbpp::bench::StageBubbles even_predicted =
      zbpp::bench::LargestStageBubbles(zbpp::bench::TimelinesOf(even->predicted));
  const zbpp::bench::StageBubbles auto_predicted =
      zbpp::bench::LargestStageBubbles(zbpp::bench::TimelinesOf(automatic->predicted));
  std::printf(
      "| %d | %d | %d | %s | %.3g | `%s` | %s | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | "
      "%.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.3f (%.3f) |",
      p, vocab, m, schedule.c_str(), scale, zbpp::LayoutText(automatic->plan.layout).c_str(),
      automatic->plan.layout_reason.c_str(), even_median.step_seconds,
      even->predicted.step_seconds, auto_median.step_seconds, automatic->predicted.step_seconds,
      even_median.stage_bubbles.own_span, even_predicted.own_span,
      auto_median.stage_bubbles.own_span, auto_predicted.own_span,
      even_median.stage_bubbles.of_cost, even_predicted.of_cost,
      auto_median.stage_bubbles.of_cost, auto_predicted.of_cost,
      even_median.step_seconds / auto_median.step_seconds,
      even->predicted.step_seconds / automatic->predicted.step_seconds);
  if (flags.vocab_parallel) {
    const Measured& median = vocabulary->steps[zbpp::bench::MedianStep(vocabulary->steps)];
    const zbpp::bench::StageBubbles predicted =
        zbpp::bench::LargestStageBubbles(zbpp::bench::TimelinesOf(vocabulary->predicted));
    std::printf(" `%s` | %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | %.3f (%.3f) |",
                zbpp::LayoutText(vocabulary->plan.layout).c_str(), median.step_seconds,
                vocabulary->predicted.step_seconds, median.stage_bubbles.own_span,
                predicted.own_span, median.stage_bubbles.of_cost, predicted.of_cost,
                auto_median.step_seconds / median.step_seconds,
                automatic->predicted.step_seconds / vocabulary->predicted.step_seconds);
  }
  std::printf("\n");
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) return 2;
  std::printf("transport: %s; messages [%lld, %lld, %lld] float32; %d rounds of %d steps per "
              "layout, EVEN's predicted step %.2f s\n\n",
              flags.in_process ? "in-process" : "order-strict",
              static_cast<long long>(kShape.microbatch_size),
              static_cast<long long>(kShape.seq_len), static_cast<long long>(kShape.hidden),
              flags.rounds, flags.steps, flags.step_seconds);
  std::printf(
      "| p | vocab | m | schedule | scale | AUTO's layout | AUTO's reason | EVEN step s measured / "
      "predicted | AUTO step s measured / predicted | EVEN largest stage bubble (own span) "
      "measured / predicted | AUTO largest stage bubble (own span) measured / predicted | EVEN "
      "largest stage bubble (of cost) measured / predicted | AUTO largest stage bubble (of cost) "
      "measured / predicted | tokens/s AUTO / EVEN measured (predicted) |%s\n"
      "|---:|---:|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|%s\n",
      flags.vocab_parallel
          ? " VOCAB's layout | VOCAB step s measured / predicted | VOCAB largest stage bubble "
            "(own span) measured / predicted | VOCAB largest stage bubble (of cost) measured / "
            "predicted | tokens/s VOCAB / AUTO measured (predicted) |"
          : "",
      flags.vocab_parallel ? "---|---:|---:|---:|---:|" : "");
  int failed = 0;
  for (int p : flags.stages) {
    for (int vocab : flags.vocabularies) {
      for (int per_stage : flags.m_per_stage) {
        for (const std::string& schedule : flags.schedules) {
          const absl::Status st = Row(flags, p, vocab, per_stage * p, schedule);
          if (!st.ok()) {
            std::fprintf(stderr, "p=%d vocab=%d m=%d %s: %s\n", p, vocab, per_stage * p,
                         schedule.c_str(), std::string(st.message()).c_str());
            ++failed;
          }
        }
      }
    }
  }
  return failed == 0 ? 0 : 1;
}
