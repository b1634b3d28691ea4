// What a predicted bubble is made of: the simulator's bubble rate of 1F1B,
// ZB-H1, ZB-2p and ZB-V for one model cut into p stages, with measured
// per-pass costs, as the causes of a bubble are removed one at a time and
// cumulatively:
//
//   imbalance  the first and last stages' extra work (embedding; final
//              norm, LM head and loss) and a --slow-stage straggler:
//              removed = every stage as a middle one
//   T_W != T_B the weight gradient's share of the backward: removed =
//              T_B and T_W both (T_B + T_W) / 2, the backward's sum kept
//   T_comm     a hop's latency: removed = 0
//   memory     ZB-2p's limit of 2p M_B per stage: removed = the automatic
//              solver without a limit (zb-auto); the other schedules'
//              memory follows from their shape, so they do not change
//   m finite   m microbatches: removed = --large-m of them (warm-up and
//              cool-down amortised)
//
// and, last, T_F = T_B = T_W (every pass the mean of the three), where the
// Zero Bubble paper's ZB-2p and ZB-V reach about zero (§3, §6).
//
//   bubble_anatomy [--layer-ms=F,B,W] [--embedding-ms=F,B,W] [--head-ms=F,B,W]
//       [--comm-ms=T] [--layers=32] [--stages=8] [--microbatches=16]
//       [--large-m=256] [--hidden=256] [--heads=4] [--seq-len=128]
//       [--microbatch-size=4] [--vocab=256] [--slow-stage=S:FACTOR]
//
// The defaults are the demo's h = 256 GPT (`scripts/demo --workers 8
// --hidden 256`: 32 layers, 4 heads, vocab 256, s = 128, b = 4, m = 16)
// measured on the 2-core build machine with bench/compute_bench (one
// thread, fp32, CPU time; bench/results/bubble_anatomy.md says how):
// per transformer layer T_F, T_B, T_W = 9.23, 10.65, 8.13 ms; the
// embedding adds 0.42, 0.71, 0.09 ms to the first virtual stage; the final
// norm, LM head and loss add 0.94, 1.01, 0.68 ms to the last; T_comm
// 0.4 ms, an estimate for one [4, 128, 256] float32 message (512 KiB) over
// Gloo on loopback, which moves 4 MiB in about 3 ms on such a machine (the
// coordinator's own T_comm, a one-element ping-pong, is ~0.05 ms). Memory: the
// paper's M_B and M_W per layer (§2; coordinator/core/model_costs.h).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "coordinator/core/model_costs.h"
#include "coordinator/core/planning.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace {

using zbpp::sched::Problem;
using zbpp::sched::VirtualStageCost;

/// F, B, W of one pass kind's extra or one layer, milliseconds.
struct Passes {
  double f = 0, b = 0, w = 0;
};

struct Inputs {
  Passes layer{9.23, 10.65, 8.13};
  Passes embedding{0.42, 0.71, 0.09};
  Passes head{0.94, 1.01, 0.68};
  double comm_ms = 0.4;
  int layers = 32, stages = 8, microbatches = 16, large_m = 256;
  int hidden = 256, heads = 4, seq_len = 128, microbatch_size = 4, vocab = 256;
  /// --slow-stage=S:FACTOR: stage S's passes FACTOR times longer (a
  /// straggler; part of the imbalance); -1 for none.
  int slow_stage = -1;
  double slow_factor = 1;
};

/// Which causes are still present.
struct Causes {
  bool imbalance = true, w_share = true, comm = true, memory = true, finite_m = true;
  bool f_unequal = true;  ///< T_F differs from T_B and T_W.
};

bool ParsePasses(const std::string& text, Passes* out) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  return parts.size() == 3 && absl::SimpleAtod(parts[0], &out->f) &&
         absl::SimpleAtod(parts[1], &out->b) && absl::SimpleAtod(parts[2], &out->w) &&
         out->f >= 0 && out->b >= 0 && out->w >= 0;
}

bool ParseFlags(int argc, char** argv, Inputs* in) {
  for (int i = 1; i < argc; ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(argv[i], absl::MaxSplits('=', 1));
    bool ok = false;
    if (kv.first == "--layer-ms") ok = ParsePasses(kv.second, &in->layer);
    if (kv.first == "--embedding-ms") ok = ParsePasses(kv.second, &in->embedding);
    if (kv.first == "--head-ms") ok = ParsePasses(kv.second, &in->head);
    if (kv.first == "--comm-ms") ok = absl::SimpleAtod(kv.second, &in->comm_ms) && in->comm_ms >= 0;
    if (kv.first == "--slow-stage") {
      std::pair<std::string, std::string> sf = absl::StrSplit(kv.second, absl::MaxSplits(':', 1));
      ok = absl::SimpleAtoi(sf.first, &in->slow_stage) &&
           absl::SimpleAtod(sf.second, &in->slow_factor) && in->slow_stage >= 0 &&
           in->slow_factor > 0;
    }
    int* target = nullptr;
    if (kv.first == "--layers") target = &in->layers;
    if (kv.first == "--stages") target = &in->stages;
    if (kv.first == "--microbatches") target = &in->microbatches;
    if (kv.first == "--large-m") target = &in->large_m;
    if (kv.first == "--hidden") target = &in->hidden;
    if (kv.first == "--heads") target = &in->heads;
    if (kv.first == "--seq-len") target = &in->seq_len;
    if (kv.first == "--microbatch-size") target = &in->microbatch_size;
    if (kv.first == "--vocab") target = &in->vocab;
    if (target != nullptr) ok = absl::SimpleAtoi(kv.second, target) && *target >= 1;
    if (!ok) {
      std::fprintf(stderr, "bubble_anatomy: bad flag %s\n", argv[i]);
      return false;
    }
  }
  if (in->layers % (2 * in->stages) != 0) {
    std::fprintf(stderr, "bubble_anatomy: --layers must be a multiple of 2 x --stages (ZB-V)\n");
    return false;
  }
  return true;
}

/// The problem of `chunks` virtual stages per stage under `causes`, seconds.
Problem BuildProblem(const Inputs& in, const Causes& causes, int chunks) {
  zbpp::v1::ModelSpec spec;
  spec.set_architecture("gpt");
  spec.set_layers(in.layers);
  spec.set_hidden(in.hidden);
  spec.set_heads(in.heads);
  spec.set_vocab(in.vocab);
  spec.set_seq_len(in.seq_len);
  const zbpp::coordinator::BlockCosts block =
      zbpp::coordinator::BlockCostsOf(spec, in.microbatch_size);
  const int n = in.stages * chunks;
  const double per_vs = double(in.layers) / n;
  Problem problem;
  problem.stages = in.stages;
  problem.chunks = chunks;
  problem.microbatches = causes.finite_m ? in.microbatches : in.large_m;
  problem.comm_seconds = causes.comm ? 1e-3 * in.comm_ms : 0;
  for (int s = 0; s < n; ++s) {
    Passes p{per_vs * in.layer.f, per_vs * in.layer.b, per_vs * in.layer.w};
    if (causes.imbalance && s == 0) {
      p.f += in.embedding.f, p.b += in.embedding.b, p.w += in.embedding.w;
    }
    if (causes.imbalance && s == n - 1) p.f += in.head.f, p.b += in.head.b, p.w += in.head.w;
    // Loop placement for one chunk, the V for two (scheduler/schedule.h).
    const int stage = s < in.stages ? s : 2 * in.stages - 1 - s;
    if (causes.imbalance && stage == in.slow_stage) {
      p.f *= in.slow_factor, p.b *= in.slow_factor, p.w *= in.slow_factor;
    }
    if (!causes.w_share) p.b = p.w = (p.b + p.w) / 2;
    if (!causes.f_unequal) p.f = p.b = p.w = (p.f + p.b + p.w) / 3;
    VirtualStageCost cost;
    cost.f_seconds = 1e-3 * p.f;
    cost.b_seconds = 1e-3 * p.b;
    cost.w_seconds = 1e-3 * p.w;
    cost.m_b_bytes = per_vs * block.m_b_bytes;
    cost.m_w_bytes = per_vs * block.m_w_bytes;
    problem.virtual_stages.push_back(cost);
  }
  return problem;
}

/// The bubble rate of `name` under `causes`; -1 (printed as a refusal) when
/// it cannot be built.
double Bubble(const Inputs& in, const Causes& causes, const std::string& name) {
  const std::string generator = name == "zb-2p" && !causes.memory ? "zb-auto" : name;
  absl::StatusOr<zbpp::sched::ScheduleTraits> traits = zbpp::sched::FindSchedule(generator);
  if (!traits.ok()) return -1;
  const Problem problem = BuildProblem(in, causes, traits->default_chunks);
  absl::StatusOr<zbpp::sched::Schedule> schedule = zbpp::sched::Generate(generator, problem);
  if (!schedule.ok()) {
    std::fprintf(stderr, "%s: %s\n", generator.c_str(),
                 std::string(schedule.status().message()).c_str());
    return -1;
  }
  absl::StatusOr<zbpp::sched::SimulationResult> sim = zbpp::sched::Simulate(problem, *schedule);
  return sim.ok() ? sim->bubble_rate : -1;
}

/// The bubble of `name` solved for the coordinator's analytic cost model
/// of this job (InitialProblem: FLOPs at a nominal speed, T_W = 2/3 T_F;
/// what version 1 runs until measured costs replace it) and run on the
/// measured costs with every cause present; -1 when it cannot be built.
double AnalyticPlanBubble(const Inputs& in, const std::string& name) {
  zbpp::v1::JobSpec spec;
  zbpp::v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(in.layers);
  model->set_hidden(in.hidden);
  model->set_heads(in.heads);
  model->set_vocab(in.vocab);
  model->set_seq_len(in.seq_len);
  spec.mutable_pipeline()->set_stages(in.stages);
  spec.mutable_pipeline()->set_microbatches(in.microbatches);
  spec.mutable_pipeline()->set_microbatch_size(in.microbatch_size);
  spec.mutable_schedule()->set_name(name);
  absl::StatusOr<Problem> analytic = zbpp::coordinator::InitialProblem(spec);
  absl::StatusOr<zbpp::sched::ScheduleTraits> traits = zbpp::sched::FindSchedule(name);
  if (!analytic.ok() || !traits.ok()) return -1;
  absl::StatusOr<zbpp::sched::Schedule> schedule = zbpp::sched::Generate(name, *analytic);
  if (!schedule.ok()) return -1;
  absl::StatusOr<zbpp::sched::SimulationResult> sim =
      zbpp::sched::Simulate(BuildProblem(in, Causes{}, traits->default_chunks), *schedule);
  return sim.ok() ? sim->bubble_rate : -1;
}

const std::vector<std::string> kSchedules = {"1f1b", "zb-h1", "zb-2p", "zb-v"};

void Row(const Inputs& in, const std::string& label, const Causes& causes, const double* base) {
  std::printf("| %s |", label.c_str());
  for (size_t i = 0; i < kSchedules.size(); ++i) {
    const double bubble = Bubble(in, causes, kSchedules[i]);
    if (bubble < 0) {
      std::printf(" refused |");
    } else if (base == nullptr) {
      std::printf(" %.4f |", bubble);
    } else {
      std::printf(" %.4f (%+.4f) |", bubble, bubble - base[i]);
    }
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Inputs in;
  if (!ParseFlags(argc, argv, &in)) return 2;
  std::printf("p = %d, m = %d (large m %d), %d layers; per layer T_F, T_B, T_W = %.2f, %.2f, "
              "%.2f ms; embedding +%.2f, %.2f, %.2f ms; head and loss +%.2f, %.2f, %.2f ms; "
              "T_comm %.2f ms\n\n",
              in.stages, in.microbatches, in.large_m, in.layers, in.layer.f, in.layer.b,
              in.layer.w, in.embedding.f, in.embedding.b, in.embedding.w, in.head.f, in.head.b,
              in.head.w, in.comm_ms);
  std::printf("| causes present | 1F1B | ZB-H1 | ZB-2p | ZB-V |\n|---|---:|---:|---:|---:|\n");
  const Causes all;
  double base[4];
  for (size_t i = 0; i < kSchedules.size(); ++i) base[i] = Bubble(in, all, kSchedules[i]);
  Row(in, "all (measured costs, m finite, 2p M_B)", all, nullptr);

  // One at a time: the bubble with only that cause removed, and its change.
  struct Removal {
    const char* label;
    bool Causes::*field;
  };
  const std::vector<Removal> removals = {
      {"imbalance", &Causes::imbalance}, {"T_W != T_B", &Causes::w_share},
      {"T_comm", &Causes::comm},         {"memory limit", &Causes::memory},
      {"m finite", &Causes::finite_m},
  };
  for (const Removal& r : removals) {
    Causes one = all;
    one.*(r.field) = false;
    Row(in, std::string("without ") + r.label + " only", one, base);
  }
  // Cumulatively, in the order above, then T_F equal to the other two.
  Causes cumulative = all;
  std::string label = "without";
  double previous[4];
  std::copy(base, base + 4, previous);
  for (const Removal& r : removals) {
    cumulative.*(r.field) = false;
    label += std::string(label == "without" ? " " : ", ") + r.label;
    Row(in, label, cumulative, previous);
    for (size_t i = 0; i < kSchedules.size(); ++i) {
      previous[i] = Bubble(in, cumulative, kSchedules[i]);
    }
  }
  cumulative.f_unequal = false;
  Row(in, label + ", and T_F = T_B = T_W", cumulative, previous);
  std::printf("| all, the schedule solved for the analytic costs (version 1) |");
  for (size_t i = 0; i < kSchedules.size(); ++i) {
    const double bubble = AnalyticPlanBubble(in, kSchedules[i]);
    std::printf(bubble < 0 ? " refused |" : " %.4f (%+.4f) |", bubble, bubble - base[i]);
  }
  std::printf("\n(in parentheses: one at a time, the change from \"all\"; cumulatively, the "
              "change from the row above)\n");
  return 0;
}
