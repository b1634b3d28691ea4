// Prints the Zero Bubble paper's Table 5 next to zbpp's numbers for the same
// profiled settings: bubble rate of every schedule (paper / ours), and, for
// the schedules the paper does not list (ZB-V, V-Half, V-Min, interleaved
// 1F1B), ours with their peak memory. One run, one table; rerun with
//   build/bench/paper_table5_bench
#include <cstdio>
#include <string>

#include "scheduler/paper_table5.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

struct Outcome {
  double bubble_rate = -1;
  double peak_m_b = -1;
};

Outcome Run(const char* name, const PaperSetting& row, int chunks) {
  const Problem problem = PaperProblem(row, chunks);
  absl::StatusOr<Schedule> schedule = Generate(name, problem);
  if (!schedule.ok()) return {};
  absl::StatusOr<SimulationResult> result = Simulate(problem, *schedule);
  if (!result.ok()) return {};
  return {result->bubble_rate, result->max_peak_memory_m_b};
}

std::string Pair(double paper, double ours) {
  char cell[32];
  std::snprintf(cell, sizeof(cell), "%.4f/%.4f", paper, ours);
  return cell;
}

std::string WithPeak(const Outcome& o) {
  if (o.bubble_rate < 0) return "n/a";
  char cell[32];
  std::snprintf(cell, sizeof(cell), "%.4f@%.1f", o.bubble_rate, o.peak_m_b);
  return cell;
}

int Main() {
  std::printf(
      "Zero Bubble paper Table 5: bubble rate, paper/ours "
      "(extra columns: ours @ peak memory in M_B)\n\n");
  std::printf(
      "%-6s %3s %4s  %-13s %-13s %-13s %-13s %-13s  %-12s %-12s "
      "%-12s %-12s\n",
      "model", "p", "m", "1F1B", "ZB-H1", "ZB-H2", "ZB-1p", "ZB-2p",
      "interl.v2", "ZB-V", "V-Half", "V-Min");
  for (const PaperSetting& row : kPaperTable5) {
    std::printf(
        "%-6s %3d %4d  %-13s %-13s %-13s %-13s %-13s  %-12s %-12s %-12s "
        "%-12s\n",
        row.model, row.p, row.m,
        Pair(row.one_f_one_b, Run("1f1b", row, 1).bubble_rate).c_str(),
        Pair(row.zb_h1, Run("zb-h1", row, 1).bubble_rate).c_str(),
        Pair(row.zb_h2, Run("zb-h2", row, 1).bubble_rate).c_str(),
        Pair(row.zb_1p, Run("zb-1p", row, 1).bubble_rate).c_str(),
        Pair(row.zb_2p, Run("zb-2p", row, 1).bubble_rate).c_str(),
        WithPeak(Run("1f1b-interleaved", row, 2)).c_str(),
        WithPeak(Run("zb-v", row, 2)).c_str(),
        WithPeak(Run("v-half", row, 2)).c_str(),
        WithPeak(Run("v-min", row, 2)).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace zbpp::sched

int main() { return zbpp::sched::Main(); }
