#include "coordinator/core/planning.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/pipeline_shape.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/model_costs.h"
#include "coordinator/core/schedule_file.h"
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

// The candidates of "auto" (JobPlan::choice's comment).
absl::StatusOr<ScheduleChoice> ChooseAutoSchedule(const JobSpec& spec) {
  const int d = DataParallelOf(spec.pipeline());
  std::optional<ScheduleChoice> best;
  std::vector<std::string> refusals;
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    absl::StatusOr<sched::Problem> problem = PlannedProblem(spec, traits.name);
    absl::StatusOr<sched::Schedule> schedule =
        problem.ok() ? GenerateSchedule(traits.name, *problem, d)
                     : absl::StatusOr<sched::Schedule>(problem.status());
    absl::StatusOr<ScheduleChoice> candidate =
        schedule.ok() ? Simulated(traits.name, *std::move(problem), *std::move(schedule))
                      : absl::StatusOr<ScheduleChoice>(schedule.status());
    if (!candidate.ok()) {
      refusals.push_back(absl::StrCat(traits.name, ": ", candidate.status().message()));
      continue;
    }
    if (!best.has_value() ||
        candidate->simulation.step_seconds < best->simulation.step_seconds) {
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

// A schedule file's or a registry schedule's choice.
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
  absl::StatusOr<ScheduleChoice> choice = spec.schedule().name() == kAutoScheduleName
                                              ? ChooseAutoSchedule(spec)
                                              : ChooseNamedSchedule(spec);
  if (!choice.ok()) return choice.status();
  JobPlan plan;
  plan.memory = EstimateStageMemory(spec, choice->schedule, choice->simulation);
  plan.choice = *std::move(choice);
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
