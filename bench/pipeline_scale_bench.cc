// The pipeline runtime at scale on a few cores: p ranks as
// threads of this process, each a real PipelineExecutor over the order-strict
// communicator (NCCL's matching) exchanging [b, s, h] float32 messages, with
// synthetic compute (worker/runtime/synthetic_compute.h): every pass waits
// its cost-model time instead of computing. Prints, per (p, schedule), the
// measured step and bubble beside the simulator's for the same costs, so
// what the runtime adds (ordering, wake-ups, copies) shows as the gap; and
// beside both, the simulator fed with the run's own runtime costs (its
// per-pass overhead and hop latency, measured from the ranks' timelines),
// which says how much of the gap those two costs explain.
//
// Costs: the 6.2B model's per-layer profile of bench/results/gpu.md (T_F,
// T_B, T_W = 1.63, 1.98, 1.29 ms on an H100), times kLayersPerRank layers
// per rank, split evenly over the rank's chunks; no communication term.
//
//   pipeline_scale_bench [--in-process] [--schedules=A,B,...] [P...]
//
// Defaults: p = 8 16; schedules 1f1b, zb-h1, zb-2p, zb-v.
//
// --in-process: CreateInProcessGroup (matches by tag) instead of the
// order-strict group.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/synthetic_run.h"
#include "coordinator/core/cost_model.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "worker/runtime/step_timeline.h"
#include "worker/runtime/synthetic_pipeline.h"

namespace {

using zbpp::bench::Measured;
using zbpp::sched::Problem;
using zbpp::worker::StepTimeline;

constexpr double kLayersPerRank = 10;
constexpr int kSteps = 3;
const zbpp::worker::SyntheticShape kShape{1, 256, 1024};  // 1 MiB messages.

// What the run paid beyond its passes, from the ranks' timelines of one
// step: the per-pass overhead of each virtual stage (its rank's
// StepBreakdown overhead over its F/B/W units, coordinator/core/
// cost_model.h) and the hop latency, the mean over cross-rank inputs
// that a rank waited for of (its pass start - the producer's pass end), on
// the host's steady clock.
struct RuntimeCosts {
  std::vector<double> overhead_per_pass;  // By virtual stage, seconds.
  double mean_overhead = 0;               // Over ranks, seconds per pass.
  double hop_seconds = 0;
  double hop_median_seconds = 0;  // Beside the mean: how heavy the tail is.
};

RuntimeCosts MeasureRuntimeCosts(const std::vector<StepTimeline>& ranks,
                                 const zbpp::sched::Schedule& schedule) {
  using zbpp::sched::PassKind;
  RuntimeCosts costs;
  costs.overhead_per_pass.assign(schedule.num_virtual_stages(), 0);
  // When each F and each B (or BW) ended, by (virtual stage, microbatch).
  std::map<std::tuple<bool, int, int>, double> ends;
  auto at = [](const StepTimeline& t, double seconds) {
    return std::chrono::duration<double>(t.start.time_since_epoch()).count() + seconds;
  };
  for (size_t r = 0; r < ranks.size(); ++r) {
    const zbpp::worker::SpanBreakdown span = zbpp::worker::BreakDownSpan(ranks[r], schedule.actions[r]);
    const double o = zbpp::coordinator::PassOverheadSeconds(schedule, r, span.overhead_seconds);
    costs.mean_overhead += o / ranks.size();
    for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
      if (schedule.stage_of[s] == static_cast<int>(r)) costs.overhead_per_pass[s] = o;
    }
    for (size_t j = 0; j < schedule.actions[r].size(); ++j) {
      const zbpp::sched::Action& a = schedule.actions[r][j];
      if (a.kind == PassKind::kF || a.kind == PassKind::kB || a.kind == PassKind::kBW) {
        ends[{a.kind == PassKind::kF, a.virtual_stage.value(), a.microbatch}] =
            at(ranks[r], ranks[r].action_end_seconds[j]);
      }
    }
  }
  const int last = schedule.num_virtual_stages() - 1;
  std::vector<double> hops;
  for (size_t r = 0; r < ranks.size(); ++r) {
    double previous_end = at(ranks[r], 0);
    for (size_t j = 0; j < schedule.actions[r].size(); ++j) {
      const zbpp::sched::Action& a = schedule.actions[r][j];
      const bool forward = a.kind == PassKind::kF;
      const int from = forward ? a.virtual_stage.value() - 1 : a.virtual_stage.value() + 1;
      const bool needs = forward || a.kind == PassKind::kB || a.kind == PassKind::kBW;
      if (needs && from >= 0 && from <= last && schedule.stage_of[from] != static_cast<int>(r)) {
        const double produced = ends.at({forward, from, a.microbatch});
        if (produced > previous_end) {
          hops.push_back(at(ranks[r], ranks[r].action_start_seconds[j]) - produced);
        }
      }
      previous_end = at(ranks[r], ranks[r].action_end_seconds[j]);
    }
  }
  // The mean, not the median: the critical path pays every hop on it, the
  // slow ones (a wake-up late on a loaded core) included.
  double sum = 0;
  for (double hop : hops) sum += hop;
  costs.hop_seconds = hops.empty() ? 0 : sum / hops.size();
  costs.hop_median_seconds = zbpp::coordinator::Median(std::move(hops));
  return costs;
}

// The simulator fed with the run's own runtime costs: every pass its
// requested time plus the mean overshoot (busy, as measured) plus its
// rank's per-pass overhead (idle, as measured: CountOverheadAsIdle), and a
// hop of the measured latency less the overhead the producer's pass
// already carries.
absl::StatusOr<zbpp::sched::SimulationResult> PredictWithRuntimeCosts(
    const Problem& problem, const zbpp::sched::Schedule& schedule, const RuntimeCosts& costs,
    double overshoot_seconds) {
  Problem paid = problem;
  for (int s = 0; s < paid.num_virtual_stages(); ++s) {
    const double extra = overshoot_seconds + costs.overhead_per_pass[s];
    paid.virtual_stages[s].f_seconds += extra;
    paid.virtual_stages[s].b_seconds += extra;
    paid.virtual_stages[s].w_seconds += extra;
  }
  paid.comm_seconds = std::max(0.0, costs.hop_seconds - costs.mean_overhead);
  absl::StatusOr<zbpp::sched::SimulationResult> sim = zbpp::sched::Simulate(paid, schedule);
  if (sim.ok()) zbpp::coordinator::CountOverheadAsIdle(schedule, costs.overhead_per_pass, *sim);
  return sim;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ps;
  bool in_process = false;
  std::vector<std::string> names = {"1f1b", "zb-h1", "zb-2p", "zb-v"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--in-process") {
      in_process = true;
    } else if (arg.rfind("--schedules=", 0) == 0) {
      names = absl::StrSplit(arg.substr(12), ',', absl::SkipEmpty());
    } else {
      ps.push_back(std::atoi(argv[i]));
    }
  }
  std::printf("transport: %s\n", in_process ? "in-process" : "order-strict");
  if (ps.empty()) ps = {8, 16};
  std::printf("| p | m | schedule | step s measured | step s predicted | ratio | bubble measured "
              "| bubble predicted | step s predicted with runtime costs | bubble predicted with "
              "runtime costs | overhead ms/pass | hop ms mean (median) | pass overshoot ms | input "
              "wait s/rank |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int p : ps) {
    const int m = 2 * p;
    for (const std::string& name : names) {
      absl::StatusOr<zbpp::sched::ScheduleTraits> traits = zbpp::sched::FindSchedule(name);
      if (!traits.ok()) {
        std::fprintf(stderr, "%s\n", std::string(traits.status().message()).c_str());
        return 2;
      }
      const int v = traits->default_chunks;
      zbpp::sched::VirtualStageCost cost;
      cost.f_seconds = 1.63e-3 * kLayersPerRank / v;
      cost.b_seconds = 1.98e-3 * kLayersPerRank / v;
      cost.w_seconds = 1.29e-3 * kLayersPerRank / v;
      const Problem problem = Problem::Uniform(p, v, m, cost, 0.0);
      absl::StatusOr<zbpp::sched::Schedule> schedule = zbpp::sched::Generate(name, problem);
      if (!schedule.ok()) {
        std::fprintf(stderr, "%s p=%d: %s\n", name.c_str(), p,
                     std::string(schedule.status().message()).c_str());
        continue;
      }
      absl::StatusOr<zbpp::sched::SimulationResult> sim =
          zbpp::sched::Simulate(problem, *schedule);
      zbpp::worker::SyntheticCompute synthetic;
      synthetic.stages = problem.virtual_stages;
      absl::StatusOr<std::vector<std::vector<StepTimeline>>> steps =
          zbpp::bench::RunSynthetic(*schedule, synthetic, in_process, kSteps, kShape);
      if (!sim.ok() || !steps.ok()) {
        std::fprintf(stderr, "%s p=%d: %s\n", name.c_str(), p,
                     std::string((sim.ok() ? steps.status() : sim.status()).message()).c_str());
        return 1;
      }
      // The median step of kSteps (the first pays allocations).
      std::vector<Measured> all;
      for (size_t step = 0; step < steps->size(); ++step) {
        all.push_back(zbpp::bench::Measure((*steps)[step], *schedule, synthetic, step));
      }
      const size_t median = zbpp::bench::MedianStep(all);
      const Measured& med = all[median];
      const RuntimeCosts runtime = MeasureRuntimeCosts((*steps)[median], *schedule);
      absl::StatusOr<zbpp::sched::SimulationResult> paid =
          PredictWithRuntimeCosts(problem, *schedule, runtime, med.overshoot_seconds);
      if (!paid.ok()) {
        std::fprintf(stderr, "%s p=%d: %s\n", name.c_str(), p,
                     std::string(paid.status().message()).c_str());
        return 1;
      }
      std::printf("| %d | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f "
                  "(%.2f) | %.2f | %.3f |\n",
                  p, m, name.c_str(), med.step_seconds, sim->step_seconds,
                  med.step_seconds / sim->step_seconds, med.bubble, sim->bubble_rate,
                  paid->step_seconds, paid->bubble_rate, 1e3 * runtime.mean_overhead,
                  1e3 * runtime.hop_seconds, 1e3 * runtime.hop_median_seconds,
                  1e3 * med.overshoot_seconds,
                  med.input_wait_seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
