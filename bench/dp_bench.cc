// Data x pipeline parallelism on the Zero Bubble paper's Table 5 settings:
// how much of the per-stage gradient all-reduce each reduction placement
// leaves exposed, for 1F1B, ZB-1p, ZB-2p, interleaved 1F1B and ZB-V, at two
// all-reduce bandwidths. Prints markdown (bench/results/dp.md holds a run);
// rerun with
//   build/bench/dp_bench
//
// Model: d = 8 replicas; a stage's weight gradients are 12 h^2 parameters
// per transformer layer (embedding and head not counted), L / p layers per
// stage, in bf16 (2 bytes); a ring all-reduce takes 2(d-1)/d * bytes /
// bandwidth (RingAllReduceSeconds). Pass times are the paper's profiled
// ones (PaperProblem, milliseconds), so the reduction is converted to ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "scheduler/paper_table5.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

constexpr int kReplicas = 8;
constexpr double kBytesPerParameter = 2;  // bf16 gradients
constexpr double kBandwidthsGBps[] = {100, 25};
constexpr ReducePlacement kPlacements[] = {ReducePlacement::kAfterSchedule,
                                           ReducePlacement::kAfterLastBackward,
                                           ReducePlacement::kSolved};

// Transformer layers of each model, from the paper's Table 3 (the hidden
// sizes there are Table 5's).
int Layers(const PaperSetting& row) {
  const std::string model = row.model;
  return model == "1.5B" ? 22 : model == "6.2B" ? 30 : model == "14.6B" ? 46 : 62;
}

double StageGradientBytes(const PaperSetting& row) {
  const double h = row.hidden;
  return 12 * h * h * Layers(row) / row.p * kBytesPerParameter;
}

struct Cell {
  double makespan_s = 0;
  double exposed_s = 0;
  double solve_s = 0;
};

int Main() {
  struct Entry {
    const char* name;
    int chunks;
  };
  const Entry schedules[] = {
      {"1f1b", 1}, {"zb-1p", 1}, {"zb-2p", 1}, {"1f1b-interleaved", 2}, {"zb-v", 2}};
  std::printf(
      "d = %d data-parallel replicas; per stage 12 h^2 L / p parameters, bf16 "
      "gradients; ring all-reduce 2(d-1)/d * bytes / bandwidth; pass times: the "
      "paper's profiled ms (Table 5). Every time column is in seconds; step = "
      "makespan (SimulationResult::makespan_seconds).\n\n",
      kReplicas);
  std::printf(
      "| model | p | m | schedule | GB/s | reduce/stage (s) | step d=1 (s) | "
      "after-schedule exposed (s, %% step) | after-last-backward exposed | "
      "solved exposed | solved step (s) | solved vs ALB |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  // Per (schedule, bandwidth): summed exposure and steps, for the summary.
  struct Sum {
    double exposed[3] = {0, 0, 0};
    double step[3] = {0, 0, 0};
    int rows = 0;
  };
  std::vector<Sum> sums(std::size(schedules) * std::size(kBandwidthsGBps));
  double slowest_solve = 0;
  for (const PaperSetting& row : kPaperTable5) {
    for (size_t k = 0; k < std::size(schedules); ++k) {
      const Entry& sched = schedules[k];
      for (size_t b = 0; b < std::size(kBandwidthsGBps); ++b) {
        const double gbps = kBandwidthsGBps[b];
        Problem problem = PaperProblem(row, sched.chunks);
        // ms, as PaperProblem's pass times; split over the stage's chunks.
        const double reduce_ms =
            RingAllReduceSeconds(StageGradientBytes(row), kReplicas, gbps * 1e9) * 1e3;
        for (VirtualStageCost& c : problem.virtual_stages) c.reduce_seconds = reduce_ms / sched.chunks;
        absl::StatusOr<Schedule> schedule = Generate(sched.name, problem);
        if (!schedule.ok()) {
          std::printf("| %s | %d | %d | %s | %g | n/a: %s |\n", row.model, row.p, row.m,
                      sched.name, gbps, std::string(schedule.status().message()).c_str());
          continue;
        }
        const double bare = Simulate(problem, *schedule)->makespan_seconds;
        Cell cells[3];
        for (size_t i = 0; i < std::size(kPlacements); ++i) {
          const auto start = std::chrono::steady_clock::now();
          absl::StatusOr<Schedule> placed = PlaceReductions(problem, *schedule, kPlacements[i]);
          cells[i].solve_s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          absl::StatusOr<SimulationResult> sim = Simulate(problem, *placed);
          cells[i].makespan_s = sim->makespan_seconds / 1e3;
          cells[i].exposed_s = sim->exposed_reduce_seconds / 1e3;
        }
        slowest_solve = std::max(slowest_solve, cells[2].solve_s);
        auto exposed = [&](const Cell& c) {
          char text[64];
          std::snprintf(text, sizeof(text), "%.4f (%.1f%%)", c.exposed_s,
                        100 * c.exposed_s / c.makespan_s);
          return std::string(text);
        };
        std::printf("| %s | %d | %d | %s | %g | %.4f | %.4f | %s | %s | %s | %.4f | %+.2f%% |\n",
                    row.model, row.p, row.m, sched.name, gbps, reduce_ms / 1e3, bare / 1e3,
                    exposed(cells[0]).c_str(), exposed(cells[1]).c_str(),
                    exposed(cells[2]).c_str(), cells[2].makespan_s,
                    100 * (cells[2].makespan_s / cells[1].makespan_s - 1));
        Sum& sum = sums[k * std::size(kBandwidthsGBps) + b];
        for (int i = 0; i < 3; ++i) {
          sum.exposed[i] += cells[i].exposed_s;
          sum.step[i] += cells[i].makespan_s;
        }
        ++sum.rows;
      }
    }
  }
  std::printf(
      "\nSummary over the 12 settings: exposed reduction as a share of the summed "
      "steps.\n\n| schedule | GB/s | after-schedule | after-last-backward | solved |\n"
      "|---|---|---|---|---|\n");
  for (size_t k = 0; k < std::size(schedules); ++k) {
    for (size_t b = 0; b < std::size(kBandwidthsGBps); ++b) {
      const Sum& sum = sums[k * std::size(kBandwidthsGBps) + b];
      if (sum.rows == 0) continue;
      std::printf("| %s | %g | %.2f%% | %.2f%% | %.2f%% |\n", schedules[k].name,
                  kBandwidthsGBps[b], 100 * sum.exposed[0] / sum.step[0],
                  100 * sum.exposed[1] / sum.step[1], 100 * sum.exposed[2] / sum.step[2]);
    }
  }
  std::printf("\nslowest solved placement: %.1f ms\n", slowest_solve * 1e3);
  return 0;
}

}  // namespace
}  // namespace zbpp::sched

int main() { return zbpp::sched::Main(); }
