#include "scheduler/cli/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/schedule_io.h"

namespace zbpp::sched::cli {

namespace {

// The tightest of `problem`'s per-stage limits in units of that stage's
// M_B under `placement` (as the report gives limits).
double LimitInMb(const Problem& problem, Placement placement) {
  const std::vector<double> unit = MbUnitBytes(problem, placement);
  double limit = std::numeric_limits<double>::infinity();
  for (int w = 0; w < problem.stages; ++w) {
    if (unit[w] > 0) limit = std::min(limit, problem.memory_limit_bytes[w] / unit[w]);
  }
  return limit;
}

// --costs FILE into `out`, with the --stages and --chunks it implies.
absl::Status ReadCosts(const FlagMap& flags, ProblemFlags* out) {
  for (const char* replaced :
       {"cost-f", "cost-b", "cost-w", "cost-bw", "cost-comm", "weight-memory-fraction",
        "reduce-seconds", "data-parallel"}) {
    if (flags.count(replaced)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--costs gives the costs; --", replaced, " cannot be given with it"));
    }
  }
  out->costs_path = flags.at("costs");
  absl::StatusOr<CostFile> costs = ReadCostFile(out->costs_path);
  if (!costs.ok()) return costs.status();
  if (!costs->memory_limit_bytes.empty() && flags.count("mem-limit")) {
    return absl::InvalidArgumentError(
        "--mem-limit cannot be given with a --costs file that has "
        "memory_limit_bytes");
  }
  const int entries = static_cast<int>(costs->entries.size());
  if (!costs->per_virtual_stage) {
    if (!flags.count("stages")) {
      out->stages = entries;
    } else if (out->stages != entries) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--stages ", out->stages, " does not match the ", entries,
          " entries of stages in --costs \"", out->costs_path, "\""));
    }
  } else if (!flags.count("stages") && !flags.count("import")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--costs \"", out->costs_path,
        "\" gives virtual_stages: --stages must say how many stages hold them"));
  } else if (flags.count("stages")) {
    if (entries % out->stages != 0 ||
        (out->chunks && *out->chunks * out->stages != entries)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--costs \"", out->costs_path, "\" has ", entries,
          " virtual_stages, not --stages ", out->stages, " x ",
          out->chunks ? absl::StrCat("--chunks ", *out->chunks) : "chunks"));
    }
    out->chunks = entries / out->stages;
  }
  out->costs = *std::move(costs);
  return absl::OkStatus();
}

// A flag that the imported schedule fixes must match it when given.
absl::Status CheckMatches(const FlagMap& flags, const char* name, int given,
                          int in_file, const char* what) {
  if (!flags.count(name) || given == in_file) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", name, " ", given, " does not match the imported "
                   "schedule's ", in_file, " ", what));
}

}  // namespace

absl::StatusOr<ProblemFlags> ParseProblemFlags(const FlagMap& flags) {
  ProblemFlags out;
  auto non_negative = [](double x) { return x >= 0; };
  auto positive = [](double x) { return x > 0; };
  auto fraction = [](double x) { return x >= 0 && x <= 1; };
  for (auto [name, field] : {std::pair{"stages", &out.stages},
                             std::pair{"microbatches", &out.microbatches}}) {
    absl::StatusOr<int> value = IntFlag(flags, name, 1);
    if (!value.ok()) return value.status();
    *field = *value;
  }
  for (auto [name, field] : {std::pair{"cost-f", &out.cost_f},
                             std::pair{"cost-b", &out.cost_b},
                             std::pair{"cost-w", &out.cost_w},
                             std::pair{"cost-bw", &out.cost_bw},
                             std::pair{"cost-comm", &out.cost_comm}}) {
    absl::StatusOr<double> value =
        NumberFlag(flags, name, *field, non_negative, ">= 0");
    if (!value.ok()) return value.status();
    *field = *value;
  }
  absl::StatusOr<double> fraction_value =
      NumberFlag(flags, "weight-memory-fraction", 0.5, fraction, "in [0, 1]");
  if (!fraction_value.ok()) return fraction_value.status();
  out.weight_memory_fraction = *fraction_value;
  if (flags.count("mem-limit")) {
    absl::StatusOr<double> limit =
        NumberFlag(flags, "mem-limit", 0, positive, "> 0");
    if (!limit.ok()) return limit.status();
    out.mem_limit_m_b = *limit;
  }
  if (flags.count("reduce-seconds") && flags.count("data-parallel")) {
    return absl::InvalidArgumentError(
        "give either --reduce-seconds or --data-parallel with --gradient-bytes "
        "and --reduce-bandwidth, not both");
  }
  if (flags.count("reduce-seconds")) {
    absl::StatusOr<double> seconds =
        NumberFlag(flags, "reduce-seconds", 0, non_negative, ">= 0");
    if (!seconds.ok()) return seconds.status();
    out.reduce_seconds = *seconds;
  }
  absl::StatusOr<int> replicas = IntFlag(flags, "data-parallel", 1);
  if (!replicas.ok()) return replicas.status();
  if (*replicas > 1) {
    if (!flags.count("gradient-bytes") || !flags.count("reduce-bandwidth")) {
      return absl::InvalidArgumentError(
          "--data-parallel > 1 needs --gradient-bytes (per stage) and "
          "--reduce-bandwidth (GB/s)");
    }
    absl::StatusOr<double> bytes =
        NumberFlag(flags, "gradient-bytes", 0, non_negative, ">= 0");
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<double> gbps =
        NumberFlag(flags, "reduce-bandwidth", 0, positive, "> 0");
    if (!gbps.ok()) return gbps.status();
    out.reduce_seconds = RingAllReduceSeconds(*bytes, *replicas, *gbps * 1e9);
  }
  if (flags.count("reduce-placement")) {
    absl::StatusOr<ReducePlacement> placement =
        ParseReducePlacement(flags.at("reduce-placement"));
    if (!placement.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--reduce-placement: ", placement.status().message()));
    }
    out.reduce_placement = *placement;
  }
  if (flags.count("chunks")) {
    absl::StatusOr<int> chunks = IntFlag(flags, "chunks", 1);
    if (!chunks.ok()) return chunks.status();
    out.chunks = *chunks;
  }
  if (flags.count("costs")) {
    if (absl::Status st = ReadCosts(flags, &out); !st.ok()) return st;
  }
  return out;
}

bool HasReductions(const ProblemFlags& flags) {
  return flags.reduce_seconds.has_value() ||
         (flags.costs && flags.costs->has_reduce);
}

Problem FlagsProblem(const ProblemFlags& flags, int stages, int chunks,
                     int microbatches) {
  // A stage's costs and M_B (one byte-unit) are split evenly over the chunks
  // that the stage holds, so that totals per stage match the flags.
  VirtualStageCost cost;
  cost.f_seconds = flags.cost_f / chunks;
  cost.b_seconds = flags.cost_b / chunks;
  cost.w_seconds = flags.cost_w / chunks;
  cost.bw_seconds = flags.cost_bw / chunks;
  cost.m_b_bytes = 1.0 / chunks;
  cost.m_w_bytes = flags.weight_memory_fraction / chunks;
  cost.reduce_seconds = flags.reduce_seconds.value_or(0) / chunks;
  return Problem::Uniform(stages, chunks, microbatches, cost, flags.cost_comm);
}

absl::StatusOr<Problem> ProblemFor(const ProblemFlags& flags, int stages,
                                   int chunks, int microbatches,
                                   const std::vector<int>& stage_of) {
  if (!flags.costs) return FlagsProblem(flags, stages, chunks, microbatches);
  if (static_cast<int>(stage_of.size()) != stages * chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--costs: no placement of ", chunks, " chunk(s) on ", stages,
        " stages"));
  }
  return CostProblem(*flags.costs, stages, chunks, microbatches,
                     stage_of);
}

int ChunksFor(const ScheduleTraits& traits, const ProblemFlags& flags) {
  return flags.chunks && !traits.chunks_fixed ? *flags.chunks
                                              : traits.default_chunks;
}

absl::StatusOr<Outcome> RunSchedule(const ScheduleTraits& traits,
                                    const ProblemFlags& flags,
                                    bool strict_chunks) {
  if (strict_chunks && flags.chunks && traits.chunks_fixed &&
      *flags.chunks != traits.default_chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--chunks: ", traits.name, " runs with exactly ",
        traits.default_chunks, " chunk(s) per stage, got ", *flags.chunks));
  }
  const int chunks = ChunksFor(traits, flags);
  Outcome out;
  out.traits = traits;
  absl::StatusOr<Problem> problem =
      ProblemFor(flags, flags.stages, chunks, flags.microbatches,
                 PlaceVirtualStages(traits.placement, flags.stages, chunks));
  if (!problem.ok()) return problem.status();
  out.problem = *std::move(problem);
  out.costs_path = flags.costs_path;
  if (!out.problem.memory_limit_bytes.empty()) {
    out.mem_limit_m_b = LimitInMb(out.problem, traits.placement);
  } else if (flags.mem_limit_m_b) {
    out.problem.memory_limit_bytes =
        MbUnitBytes(out.problem, traits.placement);
    for (double& bytes : out.problem.memory_limit_bytes) {
      bytes *= *flags.mem_limit_m_b;
    }
    out.mem_limit_m_b = flags.mem_limit_m_b;
  } else {
    const double own = traits.default_limit_m_b(flags.stages, flags.microbatches);
    if (std::isfinite(own)) out.mem_limit_m_b = own;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Schedule> schedule = Generate(traits.name, out.problem);
  if (schedule.ok() && HasReductions(flags)) {
    schedule = PlaceReductions(out.problem, *schedule, flags.reduce_placement);
    // The generated schedule was valid: a refusal is a bug, not bad flags.
    if (!schedule.ok()) {
      return absl::InternalError(absl::StrCat("placing reductions in ", traits.name,
                                              ": ", schedule.status().message()));
    }
    out.reduce_placement = flags.reduce_placement;
  }
  out.solve_seconds = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  if (!schedule.ok()) return schedule.status();
  out.schedule = *std::move(schedule);
  absl::StatusOr<SimulationResult> sim = Simulate(out.problem, out.schedule);
  if (!sim.ok()) {
    // A generated schedule that does not simulate is a generator bug, not a
    // user error: keep it out of exit code 2.
    return absl::InternalError(absl::StrCat(
        traits.name, " produced a schedule that does not simulate: ",
        sim.status().message()));
  }
  out.sim = *std::move(sim);
  return out;
}

absl::StatusOr<Outcome> RunNamedSchedule(const FlagMap& flags) {
  absl::StatusOr<ProblemFlags> problem = ParseProblemFlags(flags);
  if (!problem.ok()) return problem.status();
  absl::StatusOr<ScheduleTraits> traits = FindSchedule(flags.at("schedule"));
  if (!traits.ok()) {
    // FindSchedule says NotFound; to the user it is a bad flag value.
    return absl::InvalidArgumentError(
        absl::StrCat("--schedule: ", traits.status().message()));
  }
  return RunSchedule(*traits, *problem, /*strict_chunks=*/true);
}

absl::StatusOr<Outcome> RunImportedSchedule(const FlagMap& flags,
                                            std::string* note) {
  const std::string& path = flags.at("import");
  absl::StatusOr<ProblemFlags> problem_flags = ParseProblemFlags(flags);
  if (!problem_flags.ok()) return problem_flags.status();
  if (flags.count("reduce-seconds") || flags.count("data-parallel")) {
    return absl::InvalidArgumentError(
        "--import takes its reductions (REDUCE_GRAD) from the file; "
        "--reduce-seconds and --data-parallel apply to generated schedules");
  }
  absl::StatusOr<std::string> text = ReadFlagFile("import", path);
  if (!text.ok()) return text.status();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<PytorchCsvImport> imported = ImportSchedule(*text);
  if (!imported.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--import \"", path, "\": ", imported.status().message()));
  }
  Schedule schedule = std::move(imported->schedule);
  // A file of compute actions only (or JSON) leaves nothing to say.
  *note = "";
  if (imported->communication_actions + imported->ignored_actions +
          imported->overlapped_actions >
      0) {
    *note = absl::StrCat(
        imported->communication_actions, " SEND/RECV action(s) checked, ",
        imported->ignored_actions, " UNSHARD/RESHARD ignored, ",
        imported->overlapped_actions, " OVERLAP_F_B split into F and B");
  }
  for (absl::Status st :
       {CheckMatches(flags, "stages", problem_flags->stages, schedule.stages,
                     "stages (rows)"),
        CheckMatches(flags, "microbatches", problem_flags->microbatches,
                     schedule.microbatches, "microbatches"),
        CheckMatches(flags, "chunks", problem_flags->chunks.value_or(0),
                     schedule.chunks, "chunks per stage")}) {
    if (!st.ok()) return st;
  }
  Outcome out;
  out.traits.name = schedule.name;
  out.traits.default_chunks = schedule.chunks;
  out.traits.chunks_fixed = true;
  // Another placement than loop or V simulates as it is; the report then
  // says "loop".
  out.traits.placement = PlacementOf(schedule).value_or(Placement::kLoop);
  out.traits.limit_is_input = false;
  out.traits.default_limit_m_b = [](int, int) {
    return std::numeric_limits<double>::infinity();
  };
  absl::StatusOr<Problem> problem =
      ProblemFor(*problem_flags, schedule.stages, schedule.chunks,
                 schedule.microbatches, schedule.stage_of);
  if (!problem.ok()) return problem.status();
  out.problem = *std::move(problem);
  out.costs_path = problem_flags->costs_path;
  out.mem_limit_m_b = problem_flags->mem_limit_m_b;
  absl::StatusOr<SimulationResult> sim = Simulate(out.problem, schedule);
  out.solve_seconds = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  if (!sim.ok()) {
    // Malformed, incomplete or deadlocked: the file is at fault.
    return absl::InvalidArgumentError(
        absl::StrCat("--import \"", path, "\": ", sim.status().message()));
  }
  for (int w = 0; w < schedule.stages; ++w) {
    if (OverMemoryLimit(sim->peak_memory_bytes[w], out.problem.limit_of(w))) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--import \"", path, "\": stage ", w, " peaks at ",
          sim->peak_memory_bytes[w], " bytes, over memory_limit_bytes[", w,
          "] = ", out.problem.limit_of(w), " of --costs"));
    }
  }
  if (out.mem_limit_m_b) {
    for (int w = 0; w < schedule.stages; ++w) {
      if (OverMemoryLimit(sim->peak_memory_m_b[w], *out.mem_limit_m_b)) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "--import \"", path, "\": stage ", w, " peaks at ",
            sim->peak_memory_m_b[w], " M_B, over --mem-limit ",
            *out.mem_limit_m_b));
      }
    }
  }
  out.schedule = std::move(schedule);
  out.sim = *std::move(sim);
  return out;
}

}  // namespace zbpp::sched::cli
