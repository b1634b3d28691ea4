#include "scheduler/registry.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/baselines.h"
#include "scheduler/dualpipe_v.h"
#include "scheduler/merge_backward.h"
#include "scheduler/refusal.h"
#include "scheduler/simulator.h"
#include "scheduler/zb_auto.h"
#include "scheduler/zb_handcrafted.h"
#include "scheduler/zb_v.h"

namespace zbpp::sched {
namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

double NoLimit(int, int) { return kNoLimit; }
double OneP(int p, int) { return p; }
double TwoP(int p, int) { return 2.0 * p; }
double ZbVLimit(int p, int) { return VShapeLimitMb(VShape::kZbV, p); }
double VHalfLimit(int p, int) { return VShapeLimitMb(VShape::kHalf, p); }
double VMinLimit(int p, int) { return VShapeLimitMb(VShape::kMin, p); }

absl::StatusOr<Schedule> Build(std::string_view name, const Problem& problem) {
  if (name == "gpipe") return GenerateGPipe(problem);
  if (name == "1f1b") return Generate1F1B(problem);
  if (name == "1f1b-interleaved") return GenerateInterleaved1F1B(problem);
  if (name == "zb-h1") return GenerateZbH1(problem);
  if (name == "zb-h2") return GenerateZbH2(problem);
  if (name == "zb-v") return GenerateVSchedule(problem, VShape::kZbV);
  if (name == "v-half") return GenerateVSchedule(problem, VShape::kHalf);
  if (name == "v-min") return GenerateVSchedule(problem, VShape::kMin);
  if (name == "dualpipe-v") return GenerateDualPipeV(problem);
  // zb-1p, zb-2p and zb-auto are one solver with different limits.
  absl::StatusOr<Schedule> schedule =
      SolveZeroBubble(problem, AutoSolverOptions{});
  if (schedule.ok()) schedule->name = std::string(name);
  return schedule;
}

}  // namespace

const std::vector<ScheduleTraits>& AllSchedules() {
  static const auto* const kAll = new std::vector<ScheduleTraits>{
      {"gpipe", 1, true, Placement::kLoop, false, NoLimit},
      {"1f1b", 1, true, Placement::kLoop, false, NoLimit},
      {"1f1b-interleaved", 2, false, Placement::kLoop, false, NoLimit},
      {"zb-h1", 1, true, Placement::kLoop, false, NoLimit},
      {"zb-h2", 1, true, Placement::kLoop, false, NoLimit},
      {"zb-1p", 1, true, Placement::kLoop, true, OneP},
      {"zb-2p", 1, true, Placement::kLoop, true, TwoP},
      {"zb-auto", 1, true, Placement::kLoop, true, NoLimit},
      {"zb-v", 2, true, Placement::kV, true, ZbVLimit},
      {"v-half", 2, true, Placement::kV, true, VHalfLimit},
      {"v-min", 2, true, Placement::kV, true, VMinLimit},
      {"dualpipe-v", 2, true, Placement::kV, false, NoLimit},
  };
  return *kAll;
}

absl::StatusOr<ScheduleTraits> FindSchedule(std::string_view name) {
  std::vector<std::string> names;
  for (const ScheduleTraits& traits : AllSchedules()) {
    if (traits.name == name) return traits;
    names.push_back(traits.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown schedule \"", std::string(name),
                                          "\"; known: ",
                                          absl::StrJoin(names, " ")));
}

std::vector<double> MbUnitBytes(const Problem& problem, Placement placement) {
  std::vector<double> unit(static_cast<size_t>(std::max(0, problem.stages)),
                           0.0);
  const std::vector<int> owner =
      PlaceVirtualStages(placement, problem.stages, problem.chunks);
  for (size_t s = 0; s < owner.size() && s < problem.virtual_stages.size(); ++s) {
    unit[owner[s]] += problem.virtual_stages[s].m_b_bytes;
  }
  return unit;
}

absl::StatusOr<Schedule> Generate(std::string_view name,
                                  const Problem& problem) {
  absl::StatusOr<ScheduleTraits> traits = FindSchedule(name);
  if (!traits.ok()) return traits.status();
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (traits->chunks_fixed && problem.chunks != traits->default_chunks) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat(std::string(name), " needs chunks = ", traits->default_chunks,
                               ", got ", problem.chunks));
  }
  if (traits->limit_is_input) {
    const double limit_m_b =
        traits->default_limit_m_b(problem.stages, problem.microbatches);
    // The solvers plan with T_B and T_W apart; where a fused backward is
    // cheaper, MergeBackwards then keeps W passes next to their B.
    Problem limited = problem;
    if (problem.memory_limit_bytes.empty() && !std::isinf(limit_m_b)) {
      limited.memory_limit_bytes = MbUnitBytes(problem, traits->placement);
      for (double& bytes : limited.memory_limit_bytes) bytes *= limit_m_b;
    }
    absl::StatusOr<Schedule> schedule = Build(name, limited);
    if (!schedule.ok()) return schedule;
    return MergeBackwards(limited, *std::move(schedule));
  }
  absl::StatusOr<Schedule> schedule = Build(name, problem);
  if (!schedule.ok() || problem.memory_limit_bytes.empty()) return schedule;
  // A fixed shape cannot adapt to the limit: check that it fits.
  absl::StatusOr<SimulationResult> sim = Simulate(problem, *schedule);
  if (!sim.ok()) return sim.status();
  for (int w = 0; w < problem.stages; ++w) {
    const double limit = problem.memory_limit_bytes[w];
    if (OverMemoryLimit(sim->peak_memory_bytes[w], limit)) {
      const double m_b = sim->peak_memory_bytes[w] / sim->peak_memory_m_b[w];
      return Refuse(absl::StatusCode::kResourceExhausted, RefusedInput::kMemoryLimit,
                    absl::StrCat(std::string(name), " needs ", sim->peak_memory_bytes[w],
                                 " bytes of activations on stage ", w, " (",
                                 sim->peak_memory_m_b[w], " M_B); the limit is ", limit,
                                 " bytes (", limit / m_b, " M_B)"));
    }
  }
  return schedule;
}

}  // namespace zbpp::sched
