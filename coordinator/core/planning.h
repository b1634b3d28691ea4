#ifndef ZBPP_COORDINATOR_CORE_PLANNING_H_
#define ZBPP_COORDINATOR_CORE_PLANNING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core/layout_parts.h"
#include "coordinator/core/memory_estimate.h"
#include "coordinator/core/spec_refusal.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// Planning: what a job spec becomes before anything is measured — the
/// analytic problem, the first schedule and its simulation, each stage's
/// memory. PlanJob is the one entry: SubmitJob plans once and hands the
/// plan to the job, whose version 1 is that plan's schedule; a job that
/// must plan again (recovered before it started) calls PlanJob too, and a
/// restored job's base problem is PlannedProblem. Measured costs replace
/// the analytic ones after the first steps (cost_model.h, resolve_policy.h).

/// Bandwidth assumed for a gradient all-reduce before one is measured,
/// bytes per second: Gloo's ring over TCP between CPU workers (about 1 GB/s
/// on one host or a 10 GbE link). A GPU job with NCCL is much faster; the
/// measured REDUCE_GRAD times replace this after the first step.
inline constexpr double kAllReduceBytesPerSecond = 1e9;
/// Latency of one of a ring all-reduce's 2(d-1) transfers, seconds (a small
/// TCP message between two hosts of one cluster).
inline constexpr double kAllReduceHopLatencySeconds = 50e-6;

/// Seconds of a ring all-reduce of `bytes` over `replicas` replicas before one
/// is measured: sched::RingAllReduceSeconds at kAllReduceBytesPerSecond
/// (2(d-1)/d · bytes / bandwidth: reduce-scatter then all-gather) plus
/// 2(d-1) · kAllReduceHopLatencySeconds. 0 for replicas <= 1.
/// Thread-safe (pure).
double RingAllReduceSeconds(double bytes, int replicas);

/// The scheduling problem of `spec` before anything is measured.
///
/// * p = pipeline.stages; v = pipeline.chunks, or when unset the schedule's
///   `default_chunks` (registry), or 1 for "auto" (each of auto's
///   candidates is planned on AutoCandidateSpec instead);
///   m = pipeline.microbatches.
/// * Virtual stage k holds L_k transformer blocks: pipeline.layout's entry,
///   or L = model.layers / (p*v) for every virtual stage without one
///   (CheckLayout refuses what does not fit). Its costs (the embedding's
///   are not counted; the measured costs replace all of this at
///   calibration):
///   - T_F = FLOPs of L_k blocks' forward / 1e12 seconds (a nominal 1 TFLOP/s
///     device: only ratios matter to the scheduler), with the forward FLOPs
///     of one block of the model's family (BlockCostsOf,
///     coordinator/core/model_costs.h: for gpt 2sb(4h^2 + 2h*f) + 4s^2*b*h,
///     Megatron-LM's 24sbh^2 + 4s^2bh for f = 4h, Narayanan et al. 2021,
///     §5.1; for llama its GQA and SwiGLU projections).
///   - T_B = T_F and T_W = (2/3) T_F: by FLOPs B and W each match F, but the
///     Zero Bubble paper's profiled Table 5 (scheduler/paper_table5.h) has
///     T_B/T_F = 0.98 and T_W/T_F between 0.50 and 0.74 (W is a few large
///     GEMMs with nothing else in it); 2/3 is their middle.
///   - the last virtual stage adds the LM head to each of T_F, T_B and T_W:
///     one GEMM of HeadForwardFlops (model_costs.h) each.
///   - T_comm = 0 (unknown until measured).
///   - M_B and M_W: L_k times the family's per-block bytes (BlockCostsOf; for
///     gpt the paper's §2 s*b*(34h + 5as) and 32*s*b*h, 16-bit activations).
///   - reduce_seconds, with d = pipeline.data_parallel > 1: a ring
///     all-reduce of the stage's float32 weight gradients,
///     RingAllReduceSeconds(4 * StageParameterCount(model, L_k, k, p*v), d)
///     (StageParameterCount in coordinator/core/data_parallel.h; real
///     seconds at an assumed bandwidth, while the passes above are nominal
///     until measured); 0 with d = 1.
/// * memory_limit_bytes, the same for every worker: schedule.memory_limit_bytes
///   as given; or schedule.memory_limit_m_b times the worker's M_B unit
///   (`sched::MbUnitBytes`: M_B summed over its virtual stages); or, unset,
///   the schedule's own `default_limit_m_b(p, m)` in the same units; empty
///   when that is +infinity (no limit).
///
/// Errors: a SpecRefusal (spec_refusal.h) as PlanJob reports it for the
/// fields it reads (CheckPlanningFields, chunks, layers, the limit in
/// bytes); it does not run the scheduler. Thread-safe (pure).
absl::StatusOr<sched::Problem> InitialProblem(const zbpp::v1::JobSpec& spec);

/// Vocabulary parallelism (pipeline.vocab_parallel): per stage, the analytic
/// costs of its S and T passes on its VocabularyRangeOf rows of the LM head:
/// T_S the shard's logits GEMM (2·b·s·h·rows FLOPs), T_T its input- and
/// weight-gradient GEMMs (twice that), at the nominal FLOP rate; held from
/// S to T the hidden state and the logits in float32 plus the targets'
/// index and mask, b·s·(4(h + rows) + 9) bytes; T's working memory three
/// logits-sized buffers, 12·b·s·rows bytes, and the shard's weight
/// gradient, 4·rows·h. What InitialProblem sets as
/// Problem::vocabulary (Yeung et al., MLSys 2025, count the same GEMMs).
/// Requires a spec that passed the spec check. Thread-safe (pure).
std::vector<sched::VocabularyCost> AnalyticVocabularyCosts(const zbpp::v1::JobSpec& spec);

/// `spec` (schedule.name "auto") as auto's candidate `name`, a registry
/// schedule: schedule.name = `name` and, unless the spec sets
/// pipeline.chunks, that schedule's `default_chunks` (2 for the V
/// schedules), so that each candidate is planned with its own chunks and
/// placement. Everything else, the memory limit included, is the spec's.
/// Its InitialProblem is the problem the candidate runs on (and refuses a
/// `name` the registry does not know). Thread-safe (pure).
zbpp::v1::JobSpec AutoCandidateSpec(const zbpp::v1::JobSpec& spec,
                                    std::string_view name);

/// The analytic problem of a job with `spec` whose schedule is `chosen`
/// (a version's schedule name): for "auto", the InitialProblem of
/// AutoCandidateSpec(spec, chosen); otherwise the spec's own. What a
/// restored job's measured costs build on. Errors: InitialProblem's.
/// Thread-safe (pure).
absl::StatusOr<sched::Problem> PlannedProblem(const zbpp::v1::JobSpec& spec,
                                              std::string_view chosen);

/// A job's first schedule (what its version 1 runs) and the analytic
/// problem it is planned on.
struct ScheduleChoice {
  /// The registry schedule, e.g. "zb-v" (for "auto": the one chosen); for
  /// a schedule file, schedule.name as given.
  std::string name;
  /// PlannedProblem(spec, name): for "auto", the chosen candidate's.
  sched::Problem problem;
  /// With its data-parallel reductions placed when d > 1.
  sched::Schedule schedule;
  /// `schedule` simulated under `problem` (sched::Simulate): the version's
  /// predicted step time, bubble rate and peak memory.
  sched::SimulationResult simulation;
};

/// Everything planned for a job spec before anything is measured.
struct JobPlan {
  /// The spec the job runs: the one submitted, with the layout the planner
  /// chose in pipeline.layout when it is not the even split (and, for a
  /// schedule "auto" chose, that schedule's pipeline.chunks), as
  /// job_spec.proto's LAYOUT_POLICY_AUTO says. What the job stores and its
  /// workers build their chunks from.
  zbpp::v1::JobSpec spec;
  /// Job.layout: the blocks of each of `choice`'s virtual stages.
  std::vector<int> layout;
  /// Job.layout_reason: how the layout was chosen.
  std::string layout_reason;
  /// Job.layout_source: who chose it (GIVEN, EVEN, or ANALYTIC for
  /// layout_policy AUTO).
  zbpp::v1::LayoutSource layout_source = zbpp::v1::LAYOUT_SOURCE_UNSPECIFIED;
  /// The first schedule:
  /// * "auto": every registry schedule, in registry order, generated for
  ///   the InitialProblem of AutoCandidateSpec(spec, name) (its own chunks
  ///   and placement, the spec's memory limit) with its data-parallel
  ///   reductions placed (GenerateSchedule, d = pipeline.data_parallel),
  ///   and simulated (sched::Simulate, the single definition of the step
  ///   time); the shortest `step_seconds` wins, the earlier in registry
  ///   order on a tie. A schedule whose problem cannot be built (layers
  ///   that do not divide into its virtual stages, ...) or that refuses it
  ///   (m < 2p, memory above the limit) is no candidate.
  /// * schedule.file: the file's schedule on InitialProblem(spec)
  ///   (ScheduleFromFile).
  /// * a registry name: its generator on InitialProblem(spec), with the
  ///   reductions placed (GenerateSchedule).
  /// Re-solves later regenerate the same schedule under measured costs
  /// (ResolvePolicy).
  ScheduleChoice choice;
  /// What each stage will hold (size pipeline.stages):
  /// EstimateStageMemory of `choice`, what SubmitJob checks an NCCL job's
  /// workers against (StartAttempt estimates from the version in force).
  std::vector<StageMemoryEstimate> memory;
};

/// The one planning entry: every field rule (CheckJobSpecFields,
/// job_spec_check.h), then the plan. Costs one generation and simulation
/// (one per registry schedule for "auto"; well under a second each at
/// p = 32, m = 128), times up to 7 under layout_policy AUTO with no
/// pipeline.layout: the even split and the layouts sched::BalancedLayouts
/// (scheduler/layout_search.h) proposes from the analytic costs of one
/// block and of the LM head, each generated and simulated; the even split
/// stays unless one predicts a step at least 1 % shorter (a spec whose
/// blocks do not divide takes the best of the others). For "auto" each
/// registry schedule gets its own layout, so layout and schedule are
/// chosen together.
///
/// Errors: InvalidArgument carrying a SpecRefusal (SpecRefusalOf) whose
/// message is "field: reason", the first broken rule in proto order; the
/// scheduler's refusals under the field the user can change
/// (RefusalOfSchedule, job_spec_check.h); for "auto" with no schedule that runs the job,
/// under the limit's field ("schedule.memory_limit_m_b: schedule \"auto\"
/// found no schedule that runs this job (gpipe: ...; 1f1b: ...)") listing
/// every refusal. Thread-safe (pure).
absl::StatusOr<JobPlan> PlanJob(const zbpp::v1::JobSpec& spec);

/// The schedule of an attempt of a job running `replicas` d' replicas of
/// `microbatches` m' microbatches each (docs/elastic.md: a degraded
/// attempt, d'·m' = d·m, or the return to the spec's d and m), planned as
/// the job's own schedule is: the job's stored `spec` with
/// pipeline.microbatches m', pipeline.data_parallel d' and pipeline.layout
/// `layout` (the blocks of each virtual stage the job runs: the workers
/// keep their chunks), for a schedule "auto" the registry schedule
/// `chosen` its versions run; its generator on the analytic problem under
/// the spec's memory limit, with d' replicas' reductions placed.
/// Errors: FailedPrecondition naming schedule.file for a schedule file (its
/// order fixes m); the spec checks' and the scheduler's refusals as PlanJob
/// reports them (e.g. under schedule.memory_limit_m_b when no schedule of
/// m' microbatches fits the limit). Thread-safe (pure).
absl::StatusOr<ScheduleChoice> PlanReplicas(const zbpp::v1::JobSpec& spec,
                                            const std::vector<int>& layout,
                                            std::string_view chosen, int replicas,
                                            int microbatches);

/// The layout the first calibration chooses (job_spec.proto
/// LAYOUT_POLICY_AUTO; docs/training.md, "Uneven stages").
struct ProfiledLayout {
  /// Blocks per virtual stage: the best found, or the current one.
  std::vector<int> layout;
  /// `layout` is not the job's current one (the workers must rebuild their
  /// chunks: a new attempt).
  bool changed = false;
  /// Job.layout_reason: "calibration: [6, 2] predicts a step 1.10x shorter
  /// than [7, 1] under the profiled costs" or "calibration: [4, 4] kept
  /// (...)".
  std::string reason;
  /// The current layout's predicted step over `layout`'s (1.10 above); 1
  /// when unchanged.
  double step_ratio = 1;
};

/// Chooses the layout of the job `spec` (its stored spec: the layout it
/// runs in pipeline.layout, or empty for the even split) running the
/// registry schedule `chosen` (for "auto", the one its versions name) from
/// what the workers profiled: `stages[w]` is stage w's StagePartCosts, its
/// replicas combined. Each candidate layout's problem is PlannedProblem's
/// (its limit, its reductions) with every virtual stage's costs replaced by
/// those of its parts on its stage (blocks × block, plus the embedding on
/// the first, plus the head on the last; under vocabulary parallelism each
/// stage's S and T its rows' share of its own head part instead), `comm_seconds` for T_comm, and a
/// limit in M_B re-expressed in the profiled M_B (as re-solves do); its
/// schedule is `chosen`'s generator's (GenerateSchedule), simulated. The
/// candidates are the current layout and those sched::BalancedLayouts
/// proposes from the profiled work (the mean block over the stages, the
/// embedding and head on their virtual stages); another layout replaces
/// the current one only when it predicts a step at least `min_gain` shorter
/// (a fraction: at calibration kLayoutGain, 1 %, as at submission). Costs up
/// to 7 generations and simulations.
///
/// Errors: InvalidArgument when `stages` does not hold pipeline.stages
/// entries; the current layout's own refusal (PlannedProblem's, the
/// generator's). Thread-safe (pure).
/// How much shorter a predicted step must be for auto to leave the even
/// split (job_spec.proto, LAYOUT_POLICY_AUTO), and for the calibration to
/// change the layout (ChooseProfiledLayout): a fraction.
inline constexpr double kLayoutGain = 0.01;

/// The layout drift report (job.proto Job.better_layout; docs/training.md,
/// "Layout drift"): the profiled parts of every stage (`parts`, from the
/// first calibration) scaled to the running schedule's measured costs
/// (PartsScaledToMeasured: `measured`, the cost model's problem, whose
/// virtual stages `stage_of` places), then ChooseProfiledLayout with a
/// gain of 5 %: the layout
/// and its reason ("measured: [5, 3] would predict a step 1.12x shorter than
/// the running [6, 2]") when one predicts a step at least 5 % shorter;
/// nullopt otherwise, or when the sizes do not match or a stage has no
/// work. Thread-safe (pure).
std::optional<std::pair<std::vector<int>, std::string>> BetterMeasuredLayout(
    const zbpp::v1::JobSpec& spec, std::string_view chosen,
    const std::vector<StagePartCosts>& parts, const sched::Problem& measured,
    const std::vector<int>& stage_of);

absl::StatusOr<ProfiledLayout> ChooseProfiledLayout(double min_gain,
                                                    const zbpp::v1::JobSpec& spec,
                                                    std::string_view chosen,
                                                    const std::vector<StagePartCosts>& stages,
                                                    double comm_seconds);

/// A limit of k M_B stays k M_B when measured costs replace the analytic
/// ones: each stage's limit in `measured` (set from `analytic`'s M_B)
/// scaled by its M_B under `measured` over its M_B under `analytic`, M_B of
/// a stage being summed over its virtual stages (`stage_of[k]`: the stage of
/// virtual stage k), as SetMemoryLimit's unit is. Under vocabulary
/// parallelism the limit's room for two microbatches' vocabulary passes
/// (2 · VocabularyCost::m_bytes) is not M_B: it is taken out before the
/// scaling and `measured`'s own put back. Both problems have the
/// same virtual stages. Nothing without a limit. Pure.
void KeepLimitInMb(const sched::Problem& analytic, const std::vector<int>& stage_of,
                   sched::Problem& measured);

/// Writes `layout` (blocks per virtual stage) into `spec` as a job's stored
/// spec carries it (job_spec.proto LAYOUT_POLICY_AUTO): pipeline.layout
/// unless it is the even split (then empty), and for a schedule "auto"
/// without pipeline.chunks the chunks its length fixes. Requires a layout
/// of stages × chunks entries.
void StoreLayout(zbpp::v1::JobSpec& spec, const std::vector<int>& layout);

/// Whether an attempt of `job` starting at `start_step` may still change
/// its layout at calibration: the layout came from layout_policy AUTO at
/// submission (Job.layout_source ANALYTIC), no step has run (start_step
/// 0: no trained weight moves) and the schedule comes from the registry
/// (a schedule file's order is the user's). Its Assignment then asks for
/// the layout parts' profile. Pure.
bool LayoutOpenAtCalibration(const zbpp::v1::Job& job, int64_t start_step);


/// PlanJob(spec).status(): OK when the coordinator accepts `spec`; for
/// callers that need no plan (zbppctl's tests, fuzzers). Thread-safe (pure).
absl::Status ValidateJobSpec(const zbpp::v1::JobSpec& spec);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_PLANNING_H_
