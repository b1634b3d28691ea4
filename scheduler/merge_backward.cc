#include "scheduler/merge_backward.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "scheduler/comm_order.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

// Whether some virtual stage's fused backward is cheaper than its B and W
// (by more than a relative 1e-9: a T_BW measured as the sum of a B and a W
// can read a rounding error below it): the only case where a merge can
// shorten a step.
bool MergeCanHelp(const Problem& problem) {
  return std::any_of(problem.virtual_stages.begin(), problem.virtual_stages.end(),
                     [](const VirtualStageCost& c) {
                       return FusedBackwardSeconds(c) < (c.b_seconds + c.w_seconds) * (1 - 1e-9);
                     });
}

// The makespan of `schedule` when it is acceptable (simulates, fits the
// memory limit, deadlock-free pair orders); negative otherwise.
double AcceptableMakespan(const Problem& problem, const Schedule& schedule) {
  absl::StatusOr<SimulationResult> sim = Simulate(problem, schedule);
  if (!sim.ok()) return -1;
  for (int w = 0; w < problem.stages; ++w) {
    if (OverMemoryLimit(sim->peak_memory_bytes[w], problem.limit_of(w))) return -1;
  }
  absl::StatusOr<PairOrders> orders = DerivePairOrders(schedule);
  if (!orders.ok() || !CheckPairOrders(schedule, *orders).ok()) return -1;
  return sim->makespan_seconds;
}

}  // namespace

absl::StatusOr<Schedule> MergeBackwards(const Problem& problem, Schedule schedule) {
  if (!MergeCanHelp(problem)) return schedule;
  absl::StatusOr<SimulationResult> base = Simulate(problem, schedule);
  if (!base.ok()) return base.status();
  double best = base->makespan_seconds;
  for (std::vector<Action>& list : schedule.actions) {
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      const Action& b = list[i];
      if (b.kind != PassKind::kB || MergesWithNext(list, i)) continue;
      const Action w{PassKind::kW, b.virtual_stage, b.microbatch, kAllBuckets};
      const auto at = std::find(list.begin() + i + 1, list.end(), w);
      if (at == list.end()) continue;  // Partial W passes never merge.
      // Move the W to i + 1 (a rotation keeps the passes between in order).
      std::rotate(list.begin() + i + 1, at, at + 1);
      const double makespan = AcceptableMakespan(problem, schedule);
      if (makespan >= 0 && makespan <= best * (1 + 1e-12)) {
        best = std::min(best, makespan);
      } else {
        std::rotate(list.begin() + i + 1, list.begin() + i + 2, at + 1);
      }
    }
  }
  return schedule;
}

}  // namespace zbpp::sched
