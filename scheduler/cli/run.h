// One zbpp-sched run: problem flags -> Problem -> Generate -> Simulate.

#ifndef ZBPP_SCHEDULER_CLI_RUN_H_
#define ZBPP_SCHEDULER_CLI_RUN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/cli/costs_file.h"
#include "scheduler/cli/flags.h"
#include "scheduler/problem.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::sched::cli {

/// The problem as the flags give it: costs per pipeline stage,
/// before they are split over the chunks a schedule puts on each stage.
struct ProblemFlags {
  int stages = 1;        ///< --stages: p, pipeline stages, >= 1.
  int microbatches = 1;  ///< --microbatches: m, per step, >= 1.
  /// --cost-f/-b/-w/-comm: seconds of F, B (input gradient) and W (weight
  /// gradient) per stage, and seconds per point-to-point hop; all >= 0.
  double cost_f = 1, cost_b = 1, cost_w = 1, cost_comm = 0;
  /// --cost-bw: seconds of one fused backward (B and W in one pass: an
  /// explicit BW or a merged pair) per stage, >= 0; 0 = cost_b + cost_w.
  double cost_bw = 0;
  /// --mem-limit: activation limit per stage in units of M_B (> 0); none =
  /// the schedule's own.
  std::optional<double> mem_limit_m_b;
  double weight_memory_fraction = 0.5;  ///< --weight-memory-fraction: M_W / M_B in [0, 1].
  std::optional<int> chunks;            ///< --chunks: v per stage; none = the schedule's.
  /// Seconds of one stage's data-parallel gradient all-reduce (split evenly
  /// over its chunks): --reduce-seconds, or the ring model of
  /// RingAllReduceSeconds from --data-parallel D > 1, --gradient-bytes and
  /// --reduce-bandwidth (GB/s). None: no reductions (d = 1).
  std::optional<double> reduce_seconds;
  /// --reduce-placement: where the reductions go (default solved).
  ReducePlacement reduce_placement = ReducePlacement::kSolved;
  /// --costs FILE: costs per stage or virtual stage in place of the cost
  /// flags above (which are then refused, as are --weight-memory-fraction,
  /// --reduce-seconds and --data-parallel); `costs_path` is FILE.
  std::optional<CostFile> costs;
  std::string costs_path;
};

/// Whether the schedules of `flags` get reductions: a reduction time from the
/// flags, or `reduce` in the --costs file.
bool HasReductions(const ProblemFlags& flags);

/// Reads the problem flags in `flags`, with the defaults above where one is
/// absent; with --costs, reads the file (ReadCostFile) and takes --stages
/// from its `stages` when the flag is absent, and --chunks from its
/// `virtual_stages` (their count over --stages). Errors: InvalidArgument
/// naming the first flag out of its range, --reduce-seconds given with
/// --data-parallel, --data-parallel > 1 without --gradient-bytes and
/// --reduce-bandwidth, --costs with a flag it replaces, a file that does not
/// parse or does not fit --stages / --chunks; NotFound for an unreadable
/// --costs file.
absl::StatusOr<ProblemFlags> ParseProblemFlags(const FlagMap& flags);

/// Everything one schedule run produced.
struct Outcome {
  ScheduleTraits traits;                ///< The schedule that ran.
  Problem problem;                      ///< Per-chunk costs, as generated for.
  Schedule schedule;                    ///< What Generate returned.
  SimulationResult sim;                 ///< Simulate(problem, schedule).
  std::optional<double> mem_limit_m_b;  ///< The limit in force in M_B; none = no limit.
  /// Where the reductions were placed; none = the schedule has none.
  std::optional<ReducePlacement> reduce_placement;
  double solve_seconds = 0;  ///< Wall time of Generate and PlaceReductions, seconds.
  std::string costs_path;    ///< --costs FILE the costs came from; empty = the flags.
};

/// The problem of `flags` for a schedule of p = `stages`, v = `chunks`, m =
/// `microbatches` whose virtual stages are held as `stage_of` says:
/// CostProblem of the --costs file, or FlagsProblem. Errors: CostProblem's.
absl::StatusOr<Problem> ProblemFor(const ProblemFlags& flags, int stages,
                                   int chunks, int microbatches,
                                   const std::vector<int>& stage_of);

/// The problem of the --cost-* flags for p = `stages`, v = `chunks` and m =
/// `microbatches`: every virtual stage costs 1/v of the flags' per-stage
/// seconds, M_B = 1/v (one unit per stage), M_W = R/v with R =
/// --weight-memory-fraction, the reduction 1/v of `reduce_seconds`.
Problem FlagsProblem(const ProblemFlags& flags, int stages, int chunks,
                     int microbatches);

/// Chunks per stage that `traits` runs with under `flags`: --chunks where
/// the schedule accepts any, else its own.
int ChunksFor(const ScheduleTraits& traits, const ProblemFlags& flags);

/// Builds the problem `traits` needs from per-stage flags (costs, M_B and
/// M_W split evenly over the chunks), generates it, places its reductions
/// where `flags` asks for them (PlaceReductions) and simulates it, timing
/// Generate and PlaceReductions. `strict_chunks`: --chunks that a fixed-chunk schedule cannot use
/// is an error (simulate, show) rather than ignored (compare).
/// Errors: InvalidArgument for such --chunks; Generate's errors as they are;
/// Internal when the generated schedule does not simulate (a generator bug).
absl::StatusOr<Outcome> RunSchedule(const ScheduleTraits& traits,
                                    const ProblemFlags& flags,
                                    bool strict_chunks);

/// Parses the problem flags and --schedule (which `flags` must hold) and runs
/// that one schedule with strict chunks, as simulate and show do.
/// Errors: those of ParseProblemFlags and RunSchedule; InvalidArgument
/// listing the known names for an unknown --schedule.
absl::StatusOr<Outcome> RunNamedSchedule(const FlagMap& flags);

/// simulate/show --import FILE: reads the schedule in FILE (ImportSchedule:
/// zbpp's JSON, or PyTorch pipelining's CSV with or without communication
/// actions, ScheduleFromPytorchCsv), builds the problem of its
/// shape from the cost flags or --costs (ProblemFor, with the file's
/// placement) and simulates it; --stages, --microbatches and
/// --chunks, when given, must match the file. `note` receives what the CSV
/// held besides compute actions (empty for JSON). The Outcome's traits name
/// the schedule ("imported" when the file names none) with its own chunks
/// and placement (PlacementOf; loop when it is neither loop nor V).
/// Errors: NotFound for an unreadable file; InvalidArgument naming the file
/// and what is wrong (parse errors with row and cell, a mismatching flag,
/// and CheckSchedule's and Simulate's errors: incomplete, malformed or
/// deadlocked), ResourceExhausted when a stage's peak exceeds --mem-limit
/// or the --costs file's memory_limit_bytes,
/// InvalidArgument for --reduce-seconds or --data-parallel (the file says
/// where reductions are).
absl::StatusOr<Outcome> RunImportedSchedule(const FlagMap& flags,
                                            std::string* note);

}  // namespace zbpp::sched::cli

#endif  // ZBPP_SCHEDULER_CLI_RUN_H_
