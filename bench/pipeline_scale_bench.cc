// The pipeline runtime at scale on a few cores: p ranks as
// threads of this process, each a real PipelineExecutor over the order-strict
// communicator (NCCL's matching) exchanging [b, s, h] float32 messages, with
// synthetic compute (worker/runtime/synthetic_compute.h): every pass waits
// its cost-model time instead of computing. Prints, per (p, schedule), the
// measured step and bubble beside the simulator's for the same costs, so
// what the runtime adds (ordering, wake-ups, copies) shows as the gap.
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
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/order_strict_communicator.h"
#include "worker/runtime/synthetic_pipeline.h"

namespace {

using zbpp::sched::Problem;
using zbpp::worker::StepTimeline;

constexpr double kLayersPerRank = 10;
constexpr int kSteps = 3;
const zbpp::worker::SyntheticShape kShape{1, 256, 1024};  // 1 MiB messages.

struct Measured {
  double step_seconds = 0;
  double bubble = 0;
  // Mean over passes of (measured - requested) pass time: the sleeps'
  // lateness, which the runtime does not cause.
  double overshoot_seconds = 0;
  // Mean over ranks of the time blocked on inputs.
  double input_wait_seconds = 0;
};

// As the simulator's: cost = the largest per-rank span (first start to last
// end), bubble = 1 - sum of pass time / (p * cost).
Measured Measure(const std::vector<StepTimeline>& ranks, const zbpp::sched::Schedule& schedule,
                 const zbpp::worker::SyntheticCompute& synthetic, int64_t step) {
  Measured m;
  double cost = 0, busy = 0, asked = 0;
  int passes = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const StepTimeline& t = ranks[r];
    m.input_wait_seconds += t.input_wait_seconds / ranks.size();
    for (const zbpp::sched::Action& a : schedule.actions[r]) {
      asked += zbpp::worker::SyntheticPassSeconds(synthetic, a, step, 1);
      ++passes;
    }
    if (t.action_start_seconds.empty()) continue;
    const double first = *std::min_element(t.action_start_seconds.begin(),
                                           t.action_start_seconds.end());
    const double last = *std::max_element(t.action_end_seconds.begin(),
                                          t.action_end_seconds.end());
    cost = std::max(cost, last - first);
    for (size_t j = 0; j < t.action_start_seconds.size(); ++j) {
      busy += t.action_end_seconds[j] - t.action_start_seconds[j];
    }
    m.step_seconds = std::max(m.step_seconds, t.step_seconds);
  }
  m.bubble = cost > 0 ? 1 - busy / (ranks.size() * cost) : 0;
  m.overshoot_seconds = passes > 0 ? (busy - asked) / passes : 0;
  return m;
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
              "| bubble predicted | pass overshoot ms | input wait s/rank |\n"
              "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
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
      std::vector<std::unique_ptr<zbpp::worker::Communicator>> group =
          in_process ? zbpp::worker::CreateInProcessGroup(p)
                     : std::move(zbpp::worker::CreateOrderStrictGroup(p).ranks);
      std::vector<zbpp::worker::Communicator*> ranks;
      for (auto& c : group) ranks.push_back(c.get());
      zbpp::worker::SyntheticCompute synthetic;
      synthetic.stages = problem.virtual_stages;
      absl::StatusOr<std::vector<std::vector<StepTimeline>>> steps =
          zbpp::worker::RunSyntheticPipeline(*schedule, synthetic, ranks, kSteps, kShape);
      if (!sim.ok() || !steps.ok()) {
        std::fprintf(stderr, "%s p=%d: %s\n", name.c_str(), p,
                     std::string((sim.ok() ? steps.status() : sim.status()).message()).c_str());
        return 1;
      }
      // The median step of kSteps (the first pays allocations).
      std::vector<Measured> all;
      for (size_t step = 0; step < steps->size(); ++step) {
        all.push_back(Measure((*steps)[step], *schedule, synthetic, step));
      }
      std::sort(all.begin(), all.end(),
                [](const Measured& a, const Measured& b) { return a.step_seconds < b.step_seconds; });
      const Measured& med = all[all.size() / 2];
      std::printf("| %d | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.3f |\n", p, m,
                  name.c_str(), med.step_seconds, sim->step_seconds,
                  med.step_seconds / sim->step_seconds, med.bubble, sim->bubble_rate,
                  1e3 * med.overshoot_seconds, med.input_wait_seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
