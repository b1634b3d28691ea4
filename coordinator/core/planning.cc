#include "coordinator/core/planning.h"

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
// How much shorter a predicted step must be for auto to leave the even
// split (job_spec.proto, LAYOUT_POLICY_AUTO).
constexpr double kLayoutGain = 0.01;

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
// plus the LM head when it is the `last`: paper §2 and Megatron-LM's FLOP
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
  if (last) {
    // The head is one [h, vocab] GEMM per pass: F, B (input gradient) and W
    // (weight gradient) each 2·b·s·h·vocab FLOPs.
    const double head = HeadForwardFlops(spec) / kNominalFlopsPerSecond;
    cost.f_seconds += head;
    cost.b_seconds += head;
    cost.w_seconds += head;
  }
  return cost;
}

// Sets problem.memory_limit_bytes from the spec's limit (or the schedule's
// default one) in bytes; refuses a byte limit below one microbatch.
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
        problem.memory_limit_bytes.push_back(policy.memory_limit_m_b() * unit[w]);
      }
      break;
    case zbpp::v1::SchedulePolicy::MEMORY_LIMIT_NOT_SET: {
      // "auto" never gets here: CheckPlanningFields requires its limit.
      const double limit_m_b = traits.default_limit_m_b(p, problem.microbatches);
      if (!std::isinf(limit_m_b)) {
        for (int w = 0; w < p; ++w) {
          problem.memory_limit_bytes.push_back(limit_m_b * unit[w]);
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
};

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
    return LaidOut{*std::move(choice), {},
                   pipeline.layout_size() > 0 ? "given" : "even (layout_policy)"};
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
  std::optional<LaidOut> best;
  absl::Status first_refusal = absl::OkStatus();
  int simulated = 0;
  for (std::vector<int>& layout : sched::BalancedLayouts(layers, work, kLayoutCandidates)) {
    if (divides && layout == most_even) continue;
    JobSpec laid = spec;
    for (int blocks : layout) laid.mutable_pipeline()->add_layout(blocks);
    absl::StatusOr<ScheduleChoice> choice = choose(laid);
    if (!choice.ok()) {
      if (first_refusal.ok()) first_refusal = choice.status();
      continue;
    }
    ++simulated;
    if (!best.has_value() ||
        choice->simulation.step_seconds < best->choice.simulation.step_seconds) {
      best = LaidOut{*std::move(choice), std::move(layout), ""};
    }
  }
  const std::string even_text = LayoutText(most_even);
  if (even.has_value() && even->ok() &&
      (!best.has_value() || best->choice.simulation.step_seconds >
                                (1 - kLayoutGain) * (*even)->simulation.step_seconds)) {
    return LaidOut{**std::move(even), {},
                   absl::StrCat("auto: the even split ", even_text, " (no other layout of ",
                                simulated, " simulated predicts a step ",
                                std::llround(kLayoutGain * 100), " % shorter)")};
  }
  if (!best.has_value()) {
    if (even.has_value()) return even->status();
    return first_refusal;
  }
  if (even.has_value() && even->ok()) {
    best->reason = absl::StrFormat(
        "auto: %s predicts a step %.2fx shorter than the even split %s",
        LayoutText(best->layout),
        (*even)->simulation.step_seconds / best->choice.simulation.step_seconds, even_text);
  } else {
    best->reason = absl::StrCat("auto: ", LayoutText(best->layout), ", the shortest predicted "
                                "step of ", simulated, " layouts simulated (", layers,
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
          4 * StageParameterCount(model, blocks[stage], stage, n), d);
    }
  }
  if (absl::Status st = SetMemoryLimit(spec.schedule(), *traits, problem); !st.ok()) {
    return st;
  }
  return problem;
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
  if (!laid->layout.empty()) {
    zbpp::v1::PipelineSpec& pipeline = *plan.spec.mutable_pipeline();
    for (int blocks : laid->layout) pipeline.add_layout(blocks);
    // The layout's length fixes the chunks of the schedule "auto" chose.
    if (automatic && !pipeline.has_chunks()) {
      pipeline.set_chunks(pipeline.layout_size() / pipeline.stages());
    }
  }
  plan.layout = BlocksPerVirtualStage(plan.spec.pipeline(), plan.spec.model().layers(),
                                      laid->choice.problem.num_virtual_stages());
  plan.layout_reason = std::move(laid->reason);
  plan.memory = EstimateStageMemory(plan.spec, laid->choice.schedule, laid->choice.simulation);
  plan.choice = std::move(laid->choice);
  return plan;
}

absl::Status ValidateJobSpec(const JobSpec& spec) { return PlanJob(spec).status(); }

SpecRefusal RefusalOfSchedule(const JobSpec& spec, const absl::Status& refusal) {
  std::string field = "schedule.name";
  if (const std::optional<sched::RefusedInput> input = sched::RefusedInputOf(refusal)) {
    switch (*input) {
      case sched::RefusedInput::kMicrobatches:
        field = "pipeline.microbatches";
        break;
      case sched::RefusedInput::kChunks:
        field = "pipeline.chunks";
        break;
      case sched::RefusedInput::kMemoryLimit:
        field = LimitField(spec.schedule());
        break;
    }
  }
  return {std::move(field), std::string(refusal.message())};
}

}  // namespace zbpp::coordinator
