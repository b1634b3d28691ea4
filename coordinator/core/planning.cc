#include "coordinator/core/planning.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/pipeline_shape.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/model_costs.h"
#include "coordinator/core/schedule_file.h"
#include "scheduler/layout_search.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/refusal.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"

namespace zbpp::coordinator {
namespace {

using zbpp::v1::JobSpec;

// Nominal device speed that turns FLOPs into the scheduler's seconds. Only
// ratios between passes and stages matter until real timings arrive.
constexpr double kNominalFlopsPerSecond = 1e12;
// T_W / T_F (see InitialProblem's comment in the header for the source).
constexpr double kWOverF = 2.0 / 3.0;
// Layouts ChooseLayout simulates besides the even split (each costs one
// generation and simulation).
constexpr int kLayoutCandidates = 6;
// How much shorter a layout's predicted step must be for the drift report
// to name it (job.proto Job.better_layout).
constexpr double kDriftGain = 0.05;

// The traits InitialProblem plans with: the registry's for a named
// schedule; a schedule file's own chunks and placement (and no default
// limit); for "auto" the loop placement with one chunk unless told more
// (PlanJob plans each V candidate on a copy with chunks = 2).
absl::StatusOr<sched::ScheduleTraits> PlanningTraits(const JobSpec& spec) {
  const zbpp::v1::SchedulePolicy& policy = spec.schedule();
  if (!policy.file().empty()) {
    absl::StatusOr<sched::Schedule> file = ParseScheduleFile(spec);
    if (!file.ok()) return file.status();
    absl::StatusOr<sched::Placement> placement = sched::PlacementOf(*file);
    if (!placement.ok()) {
      return RefuseField("schedule.file_text", "schedule.file \"", policy.file(),
                         "\": ", placement.status().message());
    }
    return sched::ScheduleTraits{
        absl::StrCat("schedule.file \"", policy.file(), "\""), file->chunks, true,
        *placement, false,
        [](int, int) { return std::numeric_limits<double>::infinity(); }};
  }
  if (policy.name() == kAutoScheduleName) {
    return sched::ScheduleTraits{"auto", 1, false, sched::Placement::kLoop,
                                 true, nullptr};
  }
  return sched::FindSchedule(policy.name());
}

// The analytic costs of a virtual stage with `blocks` transformer blocks,
// plus the LM head when it is the `last` (unless the head is split by
// vocabulary, pipeline.vocab_parallel): paper §2 and Megatron-LM's FLOP
// count (the header has the formulas).
sched::VirtualStageCost AnalyticStageCost(const JobSpec& spec, int blocks, bool last) {
  const BlockCosts block =
      BlockCostsOf(spec.model(), spec.pipeline().microbatch_size());
  sched::VirtualStageCost cost;
  cost.f_seconds = blocks * block.forward_flops / kNominalFlopsPerSecond;
  cost.b_seconds = cost.f_seconds;
  cost.w_seconds = cost.f_seconds * kWOverF;
  cost.m_b_bytes = blocks * block.m_b_bytes;
  cost.m_w_bytes = blocks * block.m_w_bytes;
  if (last && !spec.pipeline().vocab_parallel()) {
    // The head is one [h, vocab] GEMM per pass: F, B (input gradient) and W
    // (weight gradient) each 2·b·s·h·vocab FLOPs.
    const double head = HeadForwardFlops(spec) / kNominalFlopsPerSecond;
    cost.f_seconds += head;
    cost.b_seconds += head;
    cost.w_seconds += head;
  }
  return cost;
}

// Under vocabulary parallelism, the room a limit in M_B leaves stage `w`
// for two microbatches between their S and T passes, as the paper's
// schedules hold (Yeung et al., MLSys 2025: p + 1 or p + 2 microbatches where
// 1F1B holds p): 2 · VocabularyCost::m_bytes; 0 without.
double VocabularyRoom(const sched::Problem& problem, int w) {
  return problem.vocabulary.empty() ? 0 : 2 * problem.vocabulary[static_cast<size_t>(w)].m_bytes;
}

// Sets problem.memory_limit_bytes from the spec's limit (or the schedule's
// default one) in bytes, a limit in M_B with VocabularyRoom; refuses a byte
// limit below one microbatch.
absl::Status SetMemoryLimit(const zbpp::v1::SchedulePolicy& policy,
                            const sched::ScheduleTraits& traits,
                            sched::Problem& problem) {
  const int p = problem.stages;
  const std::vector<double> unit = sched::MbUnitBytes(problem, traits.placement);
  switch (policy.memory_limit_case()) {
    case zbpp::v1::SchedulePolicy::kMemoryLimitBytes: {
      const double limit = static_cast<double>(policy.memory_limit_bytes());
      for (int w = 0; w < p; ++w) {
        if (limit < unit[w]) {
          return RefuseField(
              "schedule.memory_limit_bytes", policy.memory_limit_bytes(),
              " is below one microbatch (1 M_B = ",
              std::llround(std::ceil(unit[w])), " bytes on stage ", w, ")");
        }
      }
      problem.memory_limit_bytes.assign(p, limit);
      break;
    }
    case zbpp::v1::SchedulePolicy::kMemoryLimitMB:
      for (int w = 0; w < p; ++w) {
        problem.memory_limit_bytes.push_back(policy.memory_limit_m_b() * unit[w] +
                                             VocabularyRoom(problem, w));
      }
      break;
    case zbpp::v1::SchedulePolicy::MEMORY_LIMIT_NOT_SET: {
      // "auto" never gets here: CheckPlanningFields requires its limit.
      const double limit_m_b = traits.default_limit_m_b(p, problem.microbatches);
      if (!std::isinf(limit_m_b)) {
        for (int w = 0; w < p; ++w) {
          problem.memory_limit_bytes.push_back(limit_m_b * unit[w] + VocabularyRoom(problem, w));
        }
      }
      break;
    }
  }
  return absl::OkStatus();
}

// `schedule` simulated under `problem`, as the choice `name`.
absl::StatusOr<ScheduleChoice> Simulated(std::string name, sched::Problem problem,
                                         sched::Schedule schedule) {
  absl::StatusOr<sched::SimulationResult> sim = sched::Simulate(problem, schedule);
  if (!sim.ok()) return sim.status();
  return ScheduleChoice{std::move(name), std::move(problem), std::move(schedule),
                        *std::move(sim)};
}

// A schedule choice for a spec whose layout is fixed (given, or one the
// layout search proposes).
using Chooser = absl::FunctionRef<absl::StatusOr<ScheduleChoice>(const JobSpec&)>;

// A choice with the layout it was made under.
struct LaidOut {
  ScheduleChoice choice;
  /// The layout to write into the job's spec: empty for the even split.
  std::vector<int> layout;
  std::string reason;
  zbpp::v1::LayoutSource source = zbpp::v1::LAYOUT_SOURCE_UNSPECIFIED;
};

// `spec` with `layout` (blocks per virtual stage) as its pipeline.layout.
JobSpec WithLayout(const JobSpec& spec, const std::vector<int>& layout) {
  JobSpec laid = spec;
  laid.mutable_pipeline()->clear_layout();
  for (int blocks : layout) laid.mutable_pipeline()->add_layout(blocks);
  return laid;
}

// What SimulateLayouts found: the layout with the shortest predicted step.
struct LayoutSearch {
  std::optional<LaidOut> best;
  int simulated = 0;  ///< Layouts that ran.
  absl::Status first_refusal = absl::OkStatus();
};

// Each of `layouts` but `skip` chosen (`choose`: its schedule generated and
// simulated); the shortest predicted step wins, the earlier on a tie.
LayoutSearch SimulateLayouts(
    std::vector<std::vector<int>> layouts, const std::vector<int>& skip,
    absl::FunctionRef<absl::StatusOr<ScheduleChoice>(const std::vector<int>&)> choose) {
  LayoutSearch out;
  for (std::vector<int>& layout : layouts) {
    if (layout == skip) continue;
    absl::StatusOr<ScheduleChoice> choice = choose(layout);
    if (!choice.ok()) {
      if (out.first_refusal.ok()) out.first_refusal = choice.status();
      continue;
    }
    ++out.simulated;
    if (!out.best.has_value() ||
        choice->simulation.step_seconds < out.best->choice.simulation.step_seconds) {
      out.best = LaidOut{*std::move(choice), std::move(layout), "", {}};
    }
  }
  return out;
}

// Why a layout stays after `simulated` others were simulated: none predicts
// a step kLayoutGain shorter, or there was none to try (every virtual stage
// already holds one block).
std::string NoBetterLayout(int simulated) {
  if (simulated == 0) return "no other layout to simulate";
  return absl::StrCat("no other layout of ", simulated, " simulated predicts a step ",
                      std::llround(kLayoutGain * 100), " % shorter");
}

// The choice of `spec` under the layout its layout_policy gives
// (LAYOUT_POLICY_AUTO in job_spec.proto): a given layout or EVEN as they
// are; AUTO simulates the even split (when the blocks divide) and the
// layouts sched::BalancedLayouts proposes, keeping the even split unless
// another predicts a step kLayoutGain shorter.
absl::StatusOr<LaidOut> ChooseLayout(const JobSpec& spec, Chooser choose) {
  const zbpp::v1::PipelineSpec& pipeline = spec.pipeline();
  absl::StatusOr<sched::ScheduleTraits> traits = PlanningTraits(spec);
  const bool fixed = pipeline.layout_size() > 0 ||
                     pipeline.layout_policy() == zbpp::v1::LAYOUT_POLICY_EVEN;
  const int p = pipeline.stages();
  const int v = !traits.ok() ? 0
                : pipeline.has_chunks() ? pipeline.chunks()
                                        : traits->default_chunks;
  const int layers = spec.model().layers();
  const int n = p * v;
  const std::vector<int> stage_of =
      traits.ok() && v >= 1 ? sched::PlaceVirtualStages(traits->placement, p, v)
                            : std::vector<int>();
  if (fixed || static_cast<int>(stage_of.size()) != n || n < 1 || layers < n) {
    // Whatever refuses the spec is the chooser's to report.
    absl::StatusOr<ScheduleChoice> choice = choose(spec);
    if (!choice.ok()) return choice.status();
    const bool given = pipeline.layout_size() > 0;
    return LaidOut{*std::move(choice), {}, given ? "given" : "even (layout_policy)",
                   given ? zbpp::v1::LAYOUT_SOURCE_GIVEN : zbpp::v1::LAYOUT_SOURCE_EVEN};
  }
  sched::LayoutWork work;
  work.stage_of = stage_of;
  const sched::VirtualStageCost block = AnalyticStageCost(spec, 1, false);
  work.block_seconds = block.f_seconds + block.b_seconds + block.w_seconds;
  work.extra_seconds.assign(n, 0.0);
  const sched::VirtualStageCost head = AnalyticStageCost(spec, 0, true);
  work.extra_seconds[n - 1] = head.f_seconds + head.b_seconds + head.w_seconds;

  const bool divides = layers % n == 0;
  const std::vector<int> most_even = sched::MostEvenLayout(layers, n);
  std::optional<absl::StatusOr<ScheduleChoice>> even;
  if (divides) even = choose(spec);
  LayoutSearch searched = SimulateLayouts(
      sched::BalancedLayouts(layers, work, kLayoutCandidates),
      divides ? most_even : std::vector<int>(),
      [&](const std::vector<int>& layout) { return choose(WithLayout(spec, layout)); });
  std::optional<LaidOut>& best = searched.best;
  const std::string even_text = LayoutText(most_even);
  if (even.has_value() && even->ok() &&
      (!best.has_value() || best->choice.simulation.step_seconds >
                                (1 - kLayoutGain) * (*even)->simulation.step_seconds)) {
    return LaidOut{**std::move(even), {},
                   absl::StrCat("auto: the even split ", even_text, " (",
                                NoBetterLayout(searched.simulated), ")"),
                   zbpp::v1::LAYOUT_SOURCE_ANALYTIC};
  }
  if (!best.has_value()) {
    if (even.has_value()) return even->status();
    return searched.first_refusal;
  }
  best->source = zbpp::v1::LAYOUT_SOURCE_ANALYTIC;
  if (even.has_value() && even->ok()) {
    best->reason = absl::StrFormat(
        "auto: %s predicts a step %.2fx shorter than the even split %s",
        LayoutText(best->layout),
        (*even)->simulation.step_seconds / best->choice.simulation.step_seconds, even_text);
  } else {
    best->reason = absl::StrCat("auto: ", LayoutText(best->layout), ", the shortest predicted "
                                "step of ", searched.simulated, " layouts simulated (", layers,
                                " blocks do not split evenly over ", n, " virtual stages)");
  }
  return *std::move(best);
}

// The candidates of "auto" (JobPlan::choice's comment), each under the
// layout ChooseLayout picks for it.
absl::StatusOr<LaidOut> ChooseAutoSchedule(const JobSpec& spec) {
  const int d = DataParallelOf(spec.pipeline());
  std::optional<LaidOut> best;
  std::vector<std::string> refusals;
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    auto choose = [&](const JobSpec& laid) -> absl::StatusOr<ScheduleChoice> {
      absl::StatusOr<sched::Problem> problem = PlannedProblem(laid, traits.name);
      if (!problem.ok()) return problem.status();
      absl::StatusOr<sched::Schedule> schedule = GenerateSchedule(traits.name, *problem, d);
      if (!schedule.ok()) return schedule.status();
      return Simulated(traits.name, *std::move(problem), *std::move(schedule));
    };
    absl::StatusOr<LaidOut> candidate =
        ChooseLayout(AutoCandidateSpec(spec, traits.name), choose);
    if (!candidate.ok()) {
      refusals.push_back(absl::StrCat(traits.name, ": ", candidate.status().message()));
      continue;
    }
    if (!best.has_value() || candidate->choice.simulation.step_seconds <
                                 best->choice.simulation.step_seconds) {
      best = *std::move(candidate);
    }
  }
  if (!best.has_value()) {
    return RefuseField(LimitField(spec.schedule()),
                       "schedule \"auto\" found no schedule that runs this job (",
                       absl::StrJoin(refusals, "; "), ")");
  }
  return *std::move(best);
}

// A schedule file's or a registry schedule's choice, for a spec whose
// layout is fixed.
absl::StatusOr<ScheduleChoice> ChooseNamedSchedule(const JobSpec& spec) {
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  if (!problem.ok()) return problem.status();
  const std::string& name = spec.schedule().name();
  if (!spec.schedule().file().empty()) {
    // Its refusals already name their field.
    absl::StatusOr<sched::Schedule> schedule = ScheduleFromFile(spec, *problem);
    if (!schedule.ok()) return schedule.status();
    return Simulated(name, *std::move(problem), *std::move(schedule));
  }
  absl::StatusOr<sched::Schedule> schedule =
      GenerateSchedule(name, *problem, DataParallelOf(spec.pipeline()));
  if (!schedule.ok()) return RefusalStatus(RefusalOfSchedule(spec, schedule.status()));
  return Simulated(name, *std::move(problem), *std::move(schedule));
}

}  // namespace

double RingAllReduceSeconds(double bytes, int replicas) {
  if (replicas <= 1) return 0;
  return sched::RingAllReduceSeconds(bytes, replicas, kAllReduceBytesPerSecond) +
         2 * (replicas - 1) * kAllReduceHopLatencySeconds;
}

absl::StatusOr<sched::Problem> InitialProblem(const JobSpec& spec) {
  if (absl::Status st = CheckPlanningFields(spec); !st.ok()) return st;
  const zbpp::v1::ModelSpec& model = spec.model();
  const zbpp::v1::PipelineSpec& pipeline = spec.pipeline();
  absl::StatusOr<sched::ScheduleTraits> traits = PlanningTraits(spec);
  if (!traits.ok()) return traits.status();
  const int p = pipeline.stages();
  const int v = pipeline.has_chunks() ? pipeline.chunks() : traits->default_chunks;
  if (traits->chunks_fixed && v != traits->default_chunks) {
    return RefuseField("pipeline.chunks", traits->name,
                       " needs chunks = ", traits->default_chunks, ", got ", v);
  }
  const int64_t virtual_stages = int64_t{p} * v;
  if (virtual_stages > kMaxVirtualStages) {
    return RefuseField("pipeline.chunks",
                       "pipeline.stages*chunks = ", virtual_stages,
                       " virtual stages; at most ", kMaxVirtualStages);
  }
  if (absl::Status st = CheckLayout(spec, virtual_stages); !st.ok()) return st;
  sched::Problem problem = sched::Problem::Uniform(p, v, pipeline.microbatches(), {},
                                                   /*comm_seconds=*/0.0);
  const int n = problem.num_virtual_stages();
  const std::vector<int> blocks = BlocksPerVirtualStage(pipeline, model.layers(), n);
  const int d = DataParallelOf(pipeline);
  for (int stage = 0; stage < n; ++stage) {
    sched::VirtualStageCost& cost = problem.virtual_stages[stage];
    cost = AnalyticStageCost(spec, blocks[stage], stage == n - 1);
    if (d > 1) {
      cost.reduce_seconds = RingAllReduceSeconds(
          4 * StageParameterCount(model, blocks[stage], stage, n, pipeline.vocab_parallel()),
          d);
    }
  }
  if (pipeline.vocab_parallel()) problem.vocabulary = AnalyticVocabularyCosts(spec);
  if (absl::Status st = SetMemoryLimit(spec.schedule(), *traits, problem); !st.ok()) {
    return st;
  }
  return problem;
}

std::vector<sched::VocabularyCost> AnalyticVocabularyCosts(const JobSpec& spec) {
  const int p = spec.pipeline().stages();
  const double vocab = spec.model().vocab();
  const double tokens =
      static_cast<double>(spec.pipeline().microbatch_size()) * spec.model().seq_len();
  const double head_seconds = HeadForwardFlops(spec) / kNominalFlopsPerSecond;
  std::vector<sched::VocabularyCost> costs;
  for (int r = 0; r < p; ++r) {
    const double rows = VocabularyRangeOf(spec.model().vocab(), p, r).size();
    const double share = rows / vocab;
    sched::VocabularyCost cost;
    // S: the shard's logits GEMM; T: its input- and weight-gradient GEMMs.
    cost.s_seconds = share * head_seconds;
    cost.t_seconds = 2 * share * head_seconds;
    // From S to T: the hidden state and the shard's logits (float32), the
    // targets' indices (int64) and their mask (bool).
    cost.m_bytes = tokens * (4 * (spec.model().hidden() + rows) + 9);
    // T's working memory: three logits-sized float32 buffers (the
    // exponentials, their quotient, the gradient; as the profile meters),
    // and the shard's weight gradient before it is added.
    cost.transient_bytes = 3 * tokens * 4 * rows + 4 * rows * spec.model().hidden();
    costs.push_back(cost);
  }
  return costs;
}

JobSpec AutoCandidateSpec(const JobSpec& spec, std::string_view name) {
  JobSpec candidate = spec;
  candidate.mutable_schedule()->set_name(std::string(name));
  absl::StatusOr<sched::ScheduleTraits> traits = sched::FindSchedule(name);
  if (traits.ok() && !spec.pipeline().has_chunks()) {
    candidate.mutable_pipeline()->set_chunks(traits->default_chunks);
  }
  return candidate;
}

absl::StatusOr<sched::Problem> PlannedProblem(const JobSpec& spec,
                                              std::string_view chosen) {
  return spec.schedule().name() == kAutoScheduleName
             ? InitialProblem(AutoCandidateSpec(spec, chosen))
             : InitialProblem(spec);
}

absl::StatusOr<JobPlan> PlanJob(const JobSpec& spec) {
  if (absl::Status st = CheckJobSpecFields(spec); !st.ok()) return st;
  // How the fields fit together (chunks, layers, the limit in bytes) and
  // what the schedule itself accepts: the scheduler is asked.
  if (spec.schedule().name() == kAutoScheduleName) {
    // The spec's own problem first: its refusals are the spec's fields'.
    if (absl::StatusOr<sched::Problem> problem = InitialProblem(spec); !problem.ok()) {
      return problem.status();
    }
  }
  const bool automatic = spec.schedule().name() == kAutoScheduleName;
  absl::StatusOr<LaidOut> laid =
      automatic ? ChooseAutoSchedule(spec) : ChooseLayout(spec, ChooseNamedSchedule);
  if (!laid.ok()) return laid.status();
  JobPlan plan;
  plan.spec = spec;
  if (!laid->layout.empty()) StoreLayout(plan.spec, laid->layout);
  plan.layout = BlocksPerVirtualStage(plan.spec.pipeline(), plan.spec.model().layers(),
                                      laid->choice.problem.num_virtual_stages());
  plan.layout_reason = std::move(laid->reason);
  plan.layout_source = laid->source;
  plan.memory = EstimateStageMemory(plan.spec, laid->choice.schedule, laid->choice.simulation);
  plan.choice = std::move(laid->choice);
  return plan;
}

absl::Status ValidateJobSpec(const JobSpec& spec) { return PlanJob(spec).status(); }

absl::StatusOr<ScheduleChoice> PlanReplicas(const JobSpec& spec, const std::vector<int>& layout,
                                            std::string_view chosen, int replicas,
                                            int microbatches) {
  if (!spec.schedule().file().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "schedule.file: a schedule file's order fixes pipeline.microbatches = ",
        spec.pipeline().microbatches()));
  }
  JobSpec shaped = WithLayout(
      spec.schedule().name() == kAutoScheduleName ? AutoCandidateSpec(spec, chosen) : spec,
      layout);
  shaped.mutable_pipeline()->set_microbatches(microbatches);
  shaped.mutable_pipeline()->set_data_parallel(replicas);
  if (absl::Status st = CheckJobSpecFields(shaped); !st.ok()) return st;
  return ChooseNamedSchedule(shaped);
}

void KeepLimitInMb(const sched::Problem& analytic, const std::vector<int>& stage_of,
                   sched::Problem& measured) {
  if (measured.memory_limit_bytes.empty()) return;
  std::vector<double> analytic_unit(measured.stages, 0), measured_unit(measured.stages, 0);
  for (int s = 0; s < measured.num_virtual_stages(); ++s) {
    analytic_unit[stage_of[s]] += analytic.virtual_stages[s].m_b_bytes;
    measured_unit[stage_of[s]] += measured.virtual_stages[s].m_b_bytes;
  }
  for (int w = 0; w < measured.stages; ++w) {
    if (analytic_unit[w] > 0) {
      const double analytic_room = VocabularyRoom(analytic, w);
      measured.memory_limit_bytes[w] =
          (measured.memory_limit_bytes[w] - analytic_room) * measured_unit[w] / analytic_unit[w] +
          VocabularyRoom(measured, w);
    }
  }
}

void StoreLayout(JobSpec& spec, const std::vector<int>& layout) {
  zbpp::v1::PipelineSpec& pipeline = *spec.mutable_pipeline();
  const int layers = spec.model().layers();
  const int n = static_cast<int>(layout.size());
  pipeline.clear_layout();
  if (layers % n == 0 && layout == sched::MostEvenLayout(layers, n)) return;
  pipeline.mutable_layout()->Add(layout.begin(), layout.end());
  // The layout's length fixes the chunks of the schedule "auto" chose.
  if (spec.schedule().name() == kAutoScheduleName && !pipeline.has_chunks()) {
    pipeline.set_chunks(n / pipeline.stages());
  }
}

bool LayoutOpenAtCalibration(const zbpp::v1::Job& job, int64_t start_step) {
  return job.layout_source() == zbpp::v1::LAYOUT_SOURCE_ANALYTIC && start_step == 0 &&
         job.spec().schedule().file().empty();
}

absl::StatusOr<ProfiledLayout> ChooseProfiledLayout(double min_gain, const JobSpec& spec,
                                                    std::string_view chosen,
                                                    const std::vector<StagePartCosts>& stages,
                                                    double comm_seconds) {
  const int p = spec.pipeline().stages();
  if (static_cast<int>(stages.size()) != p) {
    return absl::InvalidArgumentError(absl::StrCat(
        "part costs: ", stages.size(), " stages profiled, the job has ", p));
  }
  const int d = DataParallelOf(spec.pipeline());
  const bool vocab_parallel = spec.pipeline().vocab_parallel();
  const bool relative_limit =
      spec.schedule().memory_limit_case() != zbpp::v1::SchedulePolicy::kMemoryLimitBytes;
  absl::StatusOr<sched::Problem> planned = PlannedProblem(spec, chosen);
  if (!planned.ok()) return planned.status();
  absl::StatusOr<sched::ScheduleTraits> traits = sched::FindSchedule(chosen);
  if (!traits.ok()) return traits.status();
  const int n = planned->num_virtual_stages();
  const std::vector<int> stage_of =
      sched::PlaceVirtualStages(traits->placement, p, planned->chunks);
  auto choose = [&](const std::vector<int>& layout) -> absl::StatusOr<ScheduleChoice> {
    absl::StatusOr<sched::Problem> analytic = PlannedProblem(WithLayout(spec, layout), chosen);
    if (!analytic.ok()) return analytic.status();
    sched::Problem problem = *analytic;
    for (int k = 0; k < n; ++k) {
      sched::VirtualStageCost& cost = problem.virtual_stages[k];
      const double reduce = cost.reduce_seconds;
      cost = PartsCost(stages[stage_of[k]], layout[k], k == 0 && !vocab_parallel,
                       k == n - 1 && !vocab_parallel);
      cost.reduce_seconds = reduce;
    }
    for (int r = 0; r < static_cast<int>(problem.vocabulary.size()); ++r) {
      // Each stage's share of its own profiled head: S its forward GEMM, T
      // the two gradient GEMMs (AnalyticVocabularyCosts counts the same).
      const sched::VirtualStageCost& whole = stages[r].head;
      const double share =
          double(VocabularyRangeOf(spec.model().vocab(), p, r).size()) / spec.model().vocab();
      problem.vocabulary[r].s_seconds = std::max(share * whole.f_seconds, 1e-9);
      problem.vocabulary[r].t_seconds =
          std::max(share * (whole.b_seconds + whole.w_seconds), 1e-9);
    }
    problem.comm_seconds = comm_seconds;
    if (relative_limit) KeepLimitInMb(*analytic, stage_of, problem);
    absl::StatusOr<sched::Schedule> schedule = GenerateSchedule(chosen, problem, d);
    if (!schedule.ok()) return schedule.status();
    return Simulated(std::string(chosen), std::move(problem), *std::move(schedule));
  };
  const int layers = spec.model().layers();
  const std::vector<int> current = BlocksPerVirtualStage(spec.pipeline(), layers, n);
  absl::StatusOr<ScheduleChoice> kept = choose(current);
  if (!kept.ok()) return kept.status();
  sched::LayoutWork work;
  work.stage_of = stage_of;
  work.block_seconds = 0;
  for (const StagePartCosts& stage : stages) {
    work.block_seconds +=
        (stage.block.f_seconds + stage.block.b_seconds + stage.block.w_seconds) / p;
  }
  work.extra_seconds.assign(n, 0.0);
  auto total = [](const sched::VirtualStageCost& c) {
    return c.f_seconds + c.b_seconds + c.w_seconds;
  };
  // Under vocabulary parallelism the stages' shards hold the embedding and the head.
  work.extra_seconds[0] += vocab_parallel ? 0 : total(stages[work.stage_of[0]].embedding);
  work.extra_seconds[n - 1] += vocab_parallel ? 0 : total(stages[work.stage_of[n - 1]].head);
  ProfiledLayout out;
  out.layout = current;
  const LayoutSearch searched =
      layers >= n && work.block_seconds > 0
          ? SimulateLayouts(sched::BalancedLayouts(layers, work, kLayoutCandidates), current,
                            choose)
          : LayoutSearch{};
  const double kept_step = kept->simulation.step_seconds;
  if (searched.best.has_value() &&
      searched.best->choice.simulation.step_seconds <= (1 - min_gain) * kept_step) {
    out.layout = searched.best->layout;
    out.changed = true;
    out.step_ratio = kept_step / searched.best->choice.simulation.step_seconds;
    out.reason = absl::StrFormat(
        "calibration: %s predicts a step %.2fx shorter than %s under the profiled costs",
        LayoutText(out.layout), kept_step / searched.best->choice.simulation.step_seconds,
        LayoutText(current));
  } else if (searched.best.has_value()) {
    out.reason = absl::StrFormat(
        "calibration: %s kept (%s under the profiled costs; the best of them, %s, predicts "
        "%.3fx its step)",
        LayoutText(current), NoBetterLayout(searched.simulated), LayoutText(searched.best->layout),
        searched.best->choice.simulation.step_seconds / kept_step);
  } else {
    out.reason = absl::StrCat("calibration: ", LayoutText(current), " kept (",
                              NoBetterLayout(searched.simulated), " under the profiled costs)");
  }
  absl::StrAppend(&out.reason, PartsText(stages, work.stage_of[n - 1]));
  return out;
}

std::optional<std::pair<std::vector<int>, std::string>> BetterMeasuredLayout(
    const JobSpec& spec, std::string_view chosen, const std::vector<StagePartCosts>& parts,
    const sched::Problem& measured, const std::vector<int>& stage_of) {
  // How far each stage's device (or the model's parts on it) drifted since
  // the calibration.
  const std::optional<std::vector<StagePartCosts>> scaled =
      PartsScaledToMeasured(spec, parts, measured, stage_of);
  if (!scaled.has_value()) return std::nullopt;
  const std::vector<int> layout = BlocksPerVirtualStage(spec.pipeline(), spec.model().layers(),
                                                        measured.num_virtual_stages());
  absl::StatusOr<ProfiledLayout> best =
      ChooseProfiledLayout(kDriftGain, spec, chosen, *scaled, measured.comm_seconds);
  if (!best.ok() || !best->changed) return std::nullopt;
  return std::pair{best->layout,
                   absl::StrFormat("measured: %s would predict a step %.2fx shorter than the "
                                   "running %s",
                                   LayoutText(best->layout), best->step_ratio,
                                   LayoutText(layout))};
}

}  // namespace zbpp::coordinator
