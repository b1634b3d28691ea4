#ifndef ZBPP_COORDINATOR_CORE_JOB_SPEC_CHECK_H_
#define ZBPP_COORDINATOR_CORE_JOB_SPEC_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// The name of the policy that lets the coordinator pick the schedule
/// (`schedule.name: auto`); every other name is a scheduler registry name.
inline constexpr char kAutoScheduleName[] = "auto";

/// Upper bounds on the pipeline's shape. Not in the paper: they keep one
/// submitted spec from asking the solver (run here and at every re-solve)
/// for minutes of work. Measured on 2 cores: ZB-V at p = 128, m = 1024
/// takes about 4 s, at p = 256, m = 4096 about 40 s and 1.5 GB.
inline constexpr int kMaxStages = 128;         ///< pipeline.stages.
inline constexpr int kMaxVirtualStages = 512;  ///< stages * chunks.
inline constexpr int kMaxMicrobatches = 1024;  ///< pipeline.microbatches.
/// pipeline.stages * pipeline.data_parallel: the workers of one job. Every
/// step the coordinator aggregates one report from each (a few hundred
/// bytes per action), and a schedule version goes to each.
inline constexpr int kMaxWorkersPerJob = 4096;

/// Upper bounds on the model's sizes, far above any model trained today:
/// they keep every size a worker derives (4·hidden, vocab·hidden elements,
/// seq_len² attention scores) within int32 and the allocations it makes
/// finite, so that a typo fails at submission instead of on every worker.
inline constexpr int kMaxHidden = 65536;               ///< model.hidden.
inline constexpr int kMaxFfnHidden = 4 * kMaxHidden;   ///< model.ffn_hidden.
inline constexpr int kMaxVocab = 1 << 20;              ///< model.vocab.
inline constexpr int kMaxSeqLen = 131072;              ///< model.seq_len.
inline constexpr int kMaxLayers = 4096;                ///< model.layers.
inline constexpr int kMaxMicrobatchSize = 65536;       ///< pipeline.microbatch_size.
/// steps: a billion optimizer steps (decades at one a second).
inline constexpr int64_t kMaxSteps = 1000000000;
/// checkpoint.directory and dataset.text_file: Linux's PATH_MAX less the
/// terminating zero.
inline constexpr size_t kMaxPathBytes = 4095;

/// Checks every rule of `spec` that a user can break (the comments of
/// proto/zbpp/v1/job_spec.proto), before anything is stored.
///
/// Returns OK or InvalidArgument whose message starts with the path of the
/// offending field, then ": " and the reason, e.g.
///   "pipeline.microbatches: must be >= 1, got 0"
///   "model.layers: 10 layers do not divide into pipeline.stages*chunks = 4
///    virtual stages"
///   "schedule.name: unknown schedule \"zb-h3\"; known: auto gpipe ..."
///   "schedule.memory_limit_m_b: 0.5 is below one microbatch (1 M_B)"
///   "dataset: required"
/// The first broken rule is reported (fields in proto order).
///
/// Whether the schedule can run this shape (ZB-H2's m >= 2p,
/// 1F1B-interleaved's m % p == 0, a fixed schedule's peak memory above the
/// limit) is asked of the scheduler itself: ChooseSchedule makes the choice
/// the coordinator then makes, and its refusal is reported under the field
/// the user can change. This costs
/// one solver run per registry schedule (well under a second each at
/// p = 32, m = 128).
///
/// Thread-safe (pure).
absl::Status ValidateJobSpec(const zbpp::v1::JobSpec& spec);

/// The scheduling problem of `spec` before anything is measured.
///
/// * p = pipeline.stages; v = pipeline.chunks, or when unset the schedule's
///   `default_chunks` (registry), or 1 for "auto" (each of auto's
///   candidates is planned on AutoCandidateSpec instead);
///   m = pipeline.microbatches.
/// * Every virtual stage holds L = model.layers / (p*v) transformer blocks
///   and gets the same costs (embedding and LM head are not counted; the
///   measured costs replace all of this after the first steps):
///   - T_F = FLOPs of L blocks' forward / 1e12 seconds (a nominal 1 TFLOP/s
///     device: only ratios matter to the scheduler), with the forward FLOPs
///     of one block of the model's family (BlockCostsOf,
///     coordinator/core/model_costs.h: for gpt 2sb(4h^2 + 2h*f) + 4s^2*b*h,
///     Megatron-LM's 24sbh^2 + 4s^2bh for f = 4h, Narayanan et al. 2021,
///     §5.1; for llama its GQA and SwiGLU projections).
///   - T_B = T_F and T_W = (2/3) T_F: by FLOPs B and W each match F, but the
///     Zero Bubble paper's profiled Table 5 (scheduler/paper_table5.h) has
///     T_B/T_F = 0.98 and T_W/T_F between 0.50 and 0.74 (W is a few large
///     GEMMs with nothing else in it); 2/3 is their middle.
///   - T_comm = 0 (unknown until measured).
///   - M_B and M_W: L times the family's per-block bytes (BlockCostsOf; for
///     gpt the paper's §2 s*b*(34h + 5as) and 32*s*b*h, 16-bit activations).
///   - reduce_seconds, with d = pipeline.data_parallel > 1: a ring
///     all-reduce of the stage's float32 weight gradients,
///     RingAllReduceSeconds(4 * StageParameterCount(model, stage, p*v), d)
///     (coordinator/core/data_parallel.h; real seconds at an assumed
///     bandwidth, while the passes above are nominal until measured); 0
///     with d = 1.
/// * memory_limit_bytes, the same for every worker: schedule.memory_limit_bytes
///   as given; or schedule.memory_limit_m_b times the worker's M_B unit
///   (`sched::MbUnitBytes`: M_B summed over its virtual stages); or, unset,
///   the schedule's own `default_limit_m_b(p, m)` in the same units; empty
///   when that is +infinity (no limit).
///
/// Errors: InvalidArgument as ValidateJobSpec would report for the fields it
/// reads (pipeline, model shape, schedule name, chunks); it does not run the
/// scheduler. Thread-safe (pure).
absl::StatusOr<sched::Problem> InitialProblem(const zbpp::v1::JobSpec& spec);

/// Builds the scheduling problem of a spec (InitialProblem, or a stand-in
/// a caller injects).
using InitialProblemFn =
    std::function<absl::StatusOr<sched::Problem>(const zbpp::v1::JobSpec&)>;

/// `spec` (schedule.name "auto") as auto's candidate `name`, a registry
/// schedule: schedule.name = `name` and, unless the spec sets
/// pipeline.chunks, that schedule's `default_chunks` (2 for the V
/// schedules), so that each candidate is planned with its own chunks and
/// placement. Everything else, the memory limit included, is the spec's.
/// Its InitialProblem is the problem the candidate runs on (and refuses a
/// `name` the registry does not know). Thread-safe (pure).
zbpp::v1::JobSpec AutoCandidateSpec(const zbpp::v1::JobSpec& spec,
                                    std::string_view name);

/// A job's first schedule (what its version 1 runs) and the analytic
/// problem it is planned on.
struct ScheduleChoice {
  /// The registry schedule, e.g. "zb-v" (for "auto": the one chosen); for
  /// a schedule file, schedule.name as given.
  std::string name;
  /// initial_problem(spec); for "auto", the chosen candidate's
  /// (AutoCandidateSpec).
  sched::Problem problem;
  /// With its data-parallel reductions placed when d > 1.
  sched::Schedule schedule;
  /// `schedule` simulated under `problem` (sched::Simulate): the version's
  /// predicted step time, bubble rate and peak memory.
  sched::SimulationResult simulation;
};

/// The one place that picks a job's first schedule, used by
/// ValidateJobSpec (a job must have one) and by the coordinator when it
/// builds version 1; re-solves later regenerate the same schedule under
/// measured costs (ResolvePolicy):
/// * "auto": ChooseAutoSchedule, after initial_problem(spec) accepted the
///   fields;
/// * schedule.file: the file's schedule on initial_problem(spec)
///   (ScheduleFromFile);
/// * a registry name: its generator on initial_problem(spec), with the
///   reductions placed (GenerateSchedule, d = pipeline.data_parallel).
///
/// Errors: those of `initial_problem`; InvalidArgument under the field the
/// user can change when the schedule refuses the job (the limit's field
/// for memory; pipeline.microbatches or pipeline.chunks for the shape;
/// schedule.name otherwise), as ValidateJobSpec reports them. Costs one
/// generation and simulation (one per registry schedule for "auto").
/// Thread-safe (pure) when `initial_problem` is.
absl::StatusOr<ScheduleChoice> ChooseSchedule(
    const zbpp::v1::JobSpec& spec,
    const InitialProblemFn& initial_problem = InitialProblem);

/// The one choice of `schedule.name: auto`, made at submission
/// (ValidateJobSpec) and when the coordinator builds a job's first schedule
/// version: every registry schedule, in registry order, is generated for
/// `initial_problem(AutoCandidateSpec(spec, name))` (its own chunks and
/// placement, the spec's memory limit), with its data-parallel reductions
/// placed (GenerateSchedule, d = pipeline.data_parallel), and simulated
/// (sched::Simulate, the single definition of the step time); the shortest
/// `step_seconds` wins, the earlier in registry order on a tie. A schedule
/// whose problem cannot be built (layers that do not divide into its
/// virtual stages, ...) or that refuses it (m < 2p, memory above the limit)
/// is no candidate.
///
/// Errors: InvalidArgument when `spec` does not name "auto"; when no
/// schedule runs the job, InvalidArgument under the limit's field
/// ("schedule.memory_limit_m_b: schedule \"auto\" found no schedule that
/// runs this job (gpipe: ...; 1f1b: ...)") listing every refusal.
/// Costs one generation and simulation per registry schedule.
/// Thread-safe (pure) when `initial_problem` is.
absl::StatusOr<ScheduleChoice> ChooseAutoSchedule(
    const zbpp::v1::JobSpec& spec,
    const InitialProblemFn& initial_problem = InitialProblem);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_SPEC_CHECK_H_
