#include "coordinator/core/job_model.h"

#include <algorithm>
#include <map>
#include <vector>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/pipeline_shape.h"
#include "api/schedule_proto.h"
#include "common/log.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/planning.h"
#include "coordinator/core/schedule_file.h"
#include "coordinator/core/replica_combine.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

absl::StatusOr<std::optional<ScheduleChoice>> JobModel::PrepareProblem(
    const zbpp::v1::JobSpec& spec, const ScheduleVersions& versions) {
  if (versions.empty()) {
    // Version 1 is the plan's choice; the base problem is its problem
    // ("auto": the chosen schedule's chunks).
    std::optional<ScheduleChoice> choice = std::move(planned_);
    planned_.reset();
    if (!choice.has_value()) {
      absl::StatusOr<JobPlan> plan = PlanJob(spec);
      if (!plan.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "schedule ", spec.schedule().name(), ": ", plan.status().message()));
      }
      choice = std::move(plan->choice);
    }
    base_ = choice->problem;
    return choice;
  }
  // A restored job keeps the schedule its versions name.
  absl::StatusOr<sched::Problem> problem =
      PlannedProblem(spec, versions.latest().schedule().name());
  if (!problem.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cost model: ", problem.status().message()));
  }
  base_ = *std::move(problem);
  return std::optional<ScheduleChoice>();
}

absl::Status JobModel::PreparePolicies(const zbpp::v1::Job& proto,
                                       const JobContext& context) {
  const zbpp::v1::JobSpec& spec = proto.spec();
  const auto& resolve = spec.schedule().resolve();
  absl::StatusOr<std::unique_ptr<CostModel>> costs = CostModel::Create(
      {base_->num_virtual_stages(), resolve.has_window_steps() ? resolve.window_steps() : 8});
  ResolvePolicy::Options policy_options;
  policy_options.clock = context.clock;
  policy_options.min_improvement_fraction =
      resolve.has_min_improvement() ? resolve.min_improvement() : 0.02;
  policy_options.data_parallel = DataParallelOf(spec.pipeline());
  absl::StatusOr<std::unique_ptr<ResolvePolicy>> policy =
      ResolvePolicy::Create(policy_options);
  if (!costs.ok() || !policy.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resolve policy: ", (costs.ok() ? policy.status() : costs.status()).message()));
  }
  costs_ = *std::move(costs);
  policy_ = *std::move(policy);
  relative_limit_ =
      spec.schedule().memory_limit_case() != zbpp::v1::SchedulePolicy::kMemoryLimitBytes;
  validation_ = std::make_unique<ValidationPolicy>(
      spec.validation(), proto.validation_mode(), context.validation_policy);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ScheduleChoice>> JobModel::Prepare(
    const zbpp::v1::Job& proto, const ScheduleVersions& versions,
    const JobContext& context) {
  std::optional<ScheduleChoice> first;
  if (!base_.has_value()) {
    absl::StatusOr<std::optional<ScheduleChoice>> prepared =
        PrepareProblem(proto.spec(), versions);
    if (!prepared.ok()) return prepared.status();
    first = *std::move(prepared);
  }
  if (costs_ == nullptr) {
    if (absl::Status st = PreparePolicies(proto, context); !st.ok()) return st;
  }
  return first;
}

void JobModel::AddHop(const HopTiming& hop) {
  LogError(costs_->AddHopTiming(hop), "cost model");
}

StepReports JobModel::AddStep(const zbpp::v1::JobSpec& spec, PendingStep& pending,
                              const ScheduleVersions& versions, int replicas,
                              int microbatches) {
  std::map<int, VirtualStageTiming> step_costs;  // By virtual stage.
  for (const auto& [index, report] : pending.reports) {
    for (const VirtualStageTiming& timing : report.timings) {
      auto [it, first] = step_costs.emplace(timing.virtual_stage, timing);
      if (!first) CombineReplicaTiming(timing, it->second);
    }
  }
  for (const auto& [stage, timing] : step_costs) {
    LogError(costs_->AddVirtualStageTiming(timing), "cost model");
  }
  // Vocabulary parallelism runs one replica (the spec check): a worker's
  // index is its stage.
  for (const auto& [index, report] : pending.reports) {
    if (report.vocabulary.has_value()) {
      LogError(costs_->AddVocabularyTiming(index, *report.vocabulary), "cost model");
    }
  }
  // The executor's own time per pass, replica 0's as in the step's timeline.
  const sched::Schedule& ran = versions.schedule(pending.version);
  for (const auto& [index, report] : pending.reports) {
    if (index >= spec.pipeline().stages()) continue;
    const double overhead =
        PassOverheadSeconds(ran, index, report.timeline.breakdown().overhead_seconds());
    for (const VirtualStageTiming& timing : report.timings) {
      LogError(costs_->AddPassOverhead(timing.virtual_stage, overhead), "cost model");
    }
  }
  StepReports reports;
  reports.step = pending.step;
  reports.version = pending.version;
  reports.stages = spec.pipeline().stages();
  reports.replicas = replicas > 0 ? replicas : DataParallelOf(spec.pipeline());
  reports.tokens_per_replica =
      static_cast<double>(microbatches > 0 ? microbatches : spec.pipeline().microbatches()) *
      spec.pipeline().microbatch_size() * spec.model().seq_len();
  zbpp::v1::SchedulePrediction prediction = versions.at(pending.version).predicted();
  if (absl::StatusOr<sched::Problem> measured = MeasuredProblem(ran); measured.ok()) {
    // The base problem has the spec's m; a degraded attempt's schedule
    // runs m' (docs/elastic.md).
    measured->microbatches = ran.microbatches;
    absl::StatusOr<sched::SimulationResult> sim = sched::Simulate(*measured, ran);
    if (sim.ok()) {
      CountOverheadAsIdle(ran, costs_->PassOverheads(), *sim);
      prediction = PredictionToProto(*sim);
    }
  }
  reports.predicted_bubble_rate = prediction.bubble_rate();
  reports.predicted_step_seconds = prediction.step_seconds();
  reports.predicted_stage_bubble_rate.assign(prediction.stage_bubble_rate().begin(),
                                            prediction.stage_bubble_rate().end());
  reports.predicted_peak_activation_bytes.assign(prediction.peak_memory_bytes().begin(),
                                                 prediction.peak_memory_bytes().end());
  reports.reports = std::move(pending.reports);
  return reports;
}

std::unique_ptr<ResolveTask> JobModel::MaybeResolve(const zbpp::v1::Job& proto,
                                                    const ScheduleVersions& versions,
                                                    int64_t attempt, int64_t step) {
  const zbpp::v1::JobSpec& spec = proto.spec();
  const zbpp::v1::ResolvePolicy& resolve = spec.schedule().resolve();
  if (ResolveDisabled(spec) || versions.empty()) return nullptr;
  // One re-solve per job at a time; a window that ends while one runs is
  // covered by the next window.
  if (resolving_) return nullptr;
  const int64_t window = resolve.has_window_steps() ? resolve.window_steps() : 8;
  const zbpp::v1::ScheduleVersion& latest = versions.latest();
  const int64_t under_latest = step - latest.effective_step() + 1;
  if (under_latest <= 0 || under_latest % window != 0) return nullptr;
  absl::StatusOr<sched::Problem> measured =
      MeasuredProblem(versions.schedule(latest.version()));
  if (!measured.ok()) return nullptr;  // Some stage has no sample yet.
  std::unique_ptr<ResolveTask> task =
      NewTask(proto, versions, attempt, step, *std::move(measured));
  task->cost_drift = costs_->Drift();
  if (!parts_.empty() && spec.schedule().file().empty()) {
    task->drift_input = ResolveTask::LayoutInput{spec, task->policy_name, parts_};
  }
  resolving_ = true;
  return task;
}

std::unique_ptr<ResolveTask> JobModel::NewTask(const zbpp::v1::Job& proto,
                                               const ScheduleVersions& versions,
                                               int64_t attempt, int64_t step,
                                               sched::Problem measured) {
  const zbpp::v1::JobSpec& spec = proto.spec();
  const zbpp::v1::ScheduleVersion& latest = versions.latest();
  auto task = std::make_unique<ResolveTask>();
  task->job_id = proto.id();
  task->attempt = attempt;
  task->current_version = latest.version();
  task->current = versions.schedule(latest.version());
  // "auto" re-solves the schedule its plan picked.
  if (!spec.schedule().file().empty()) {
    task->policy_name = FileResolver(task->current);
  } else if (spec.schedule().name() == kAutoScheduleName) {
    task->policy_name = latest.schedule().name();
  } else {
    task->policy_name = spec.schedule().name();
  }
  task->policy = policy_;
  task->measured = std::move(measured);
  task->base = *base_;
  task->record.job_id = proto.id();
  task->record.step = step;
  return task;
}

absl::StatusOr<sched::Problem> JobModel::MeasuredProblem(
    const sched::Schedule& schedule) const {
  absl::StatusOr<sched::Problem> measured = costs_->ToProblem(*base_);
  if (!measured.ok() || !relative_limit_ || measured->memory_limit_bytes.empty()) {
    return measured;
  }
  KeepLimitInMb(*base_, schedule.stage_of, *measured);
  return measured;
}

std::optional<ResolveTask::LayoutInput> JobModel::LayoutInputOf(
    const zbpp::v1::JobSpec& spec, const std::string& schedule_name,
    const std::map<int, MeasuredProfile>& profiles, int part_blocks) {
  const int p = spec.pipeline().stages();
  // Each stage's parts, its replicas combined as its passes are: the
  // slowest, and the largest memory.
  std::vector<std::vector<sched::VirtualStageCost>> parts(p);
  for (const auto& [index, profile] : profiles) {
    // A worker that could not cut the model (synthetic compute) sent none:
    // the planned layout stays.
    if (static_cast<int>(profile.layout_parts.size()) != kLayoutParts) return std::nullopt;
    std::vector<sched::VirtualStageCost>& stage = parts[StageOfWorker(index, p)];
    if (stage.empty()) {
      stage = profile.layout_parts;
      continue;
    }
    for (int k = 0; k < kLayoutParts; ++k) {
      sched::VirtualStageCost& a = stage[k];
      const sched::VirtualStageCost& b = profile.layout_parts[k];
      a.f_seconds = std::max(a.f_seconds, b.f_seconds);
      a.b_seconds = std::max(a.b_seconds, b.b_seconds);
      a.w_seconds = std::max(a.w_seconds, b.w_seconds);
      a.bw_seconds = std::max(a.bw_seconds, b.bw_seconds);
      a.m_b_bytes = std::max(a.m_b_bytes, b.m_b_bytes);
      a.m_w_bytes = std::max(a.m_w_bytes, b.m_w_bytes);
      a.transient_bytes = std::max(a.transient_bytes, b.transient_bytes);
    }
  }
  ResolveTask::LayoutInput input{spec, schedule_name, {}};
  for (const std::vector<sched::VirtualStageCost>& stage : parts) {
    if (stage.empty()) return std::nullopt;
    input.stages.push_back(PartCostsOf(stage, part_blocks));
  }
  return input;
}

std::unique_ptr<ResolveTask> JobModel::Calibrate(
    const zbpp::v1::Job& proto, const ScheduleVersions& versions, int64_t attempt,
    int64_t start_step, const std::map<int, MeasuredProfile>& profiles) {
  // Replicas combined as step reports are (replica_combine.h); memory: the
  // largest, which is what must fit.
  std::map<int, VirtualStageTiming> timings;
  std::map<int, VirtualStageMemory> memory;
  for (const auto& [index, profile] : profiles) {
    for (const VirtualStageTiming& timing : profile.timings) {
      auto [it, first] = timings.emplace(timing.virtual_stage, timing);
      if (!first) CombineReplicaTiming(timing, it->second);
    }
    for (const VirtualStageMemory& m : profile.memory) {
      auto [it, first] = memory.emplace(m.virtual_stage, m);
      if (!first) {
        it->second.m_b_bytes = std::max(it->second.m_b_bytes, m.m_b_bytes);
        it->second.m_w_bytes = std::max(it->second.m_w_bytes, m.m_w_bytes);
        it->second.transient_bytes = std::max(it->second.transient_bytes, m.transient_bytes);
      }
    }
    for (const HopTiming& hop : profile.hops) AddHop(hop);
    if (profile.vocabulary.has_value()) {
      LogError(costs_->AddVocabularyTiming(index, *profile.vocabulary), "cost model");
      LogError(costs_->SetVocabularyMemory(index, profile.vocabulary->m_bytes,
                                           profile.vocabulary->transient_bytes),
               "cost model");
    }
  }
  for (const auto& [stage, timing] : timings) {
    LogError(costs_->AddVirtualStageTiming(timing), "cost model");
  }
  for (const auto& [stage, m] : memory) {
    LogError(costs_->SetMeasuredMemory(stage, m.m_b_bytes, m.m_w_bytes, m.transient_bytes),
             "cost model");
  }
  const zbpp::v1::JobSpec& spec = proto.spec();
  absl::StatusOr<sched::Problem> measured =
      MeasuredProblem(versions.schedule(versions.latest().version()));
  if (!measured.ok()) {
    LogError(measured.status(), "calibration");
    return nullptr;
  }
  std::unique_ptr<ResolveTask> task =
      NewTask(proto, versions, attempt, start_step - 1, *std::move(measured));
  task->calibration = true;
  const std::string schedule_name = task->policy_name;
  if (ResolveDisabled(spec)) task->policy_name.clear();
  if (LayoutOpenAtCalibration(proto, start_step)) {
    task->layout_input = LayoutInputOf(
        spec, schedule_name, profiles,
        LayoutPartBlocks(spec, task->measured.num_virtual_stages()));
    if (task->layout_input.has_value()) parts_ = task->layout_input->stages;
  }
  if (spec.schedule().memory_limit_case() != zbpp::v1::SchedulePolicy::MEMORY_LIMIT_NOT_SET) {
    task->memory_limit_field = LimitField(spec.schedule());
  }
  return task;
}

}  // namespace zbpp::coordinator
