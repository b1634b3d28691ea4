// Job: step reports, validation outcomes, complete steps and the re-solves
// they make due (job.h).

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/schedule_proto.h"
#include "api/time_proto.h"
#include "coordinator/core/job.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/log_error.h"
#include "coordinator/core/replica_combine.h"
#include "coordinator/core/schedule_file.h"
#include "coordinator/core/step_report_check.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

using zbpp::v1::JobEvent;

absl::Status Job::CheckReportPlace(const zbpp::v1::ReportStepRequest& report,
                                   int index) const {
  if (report.stage() != stage_of(index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage: worker ", report.worker_id(), " runs stage ",
                     stage_of(index), ", not ", report.stage()));
  }
  if (report.replica() < 0 || report.replica() >= replicas()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", report.replica(), " is not in [0, ", replicas(),
                     ") (pipeline.data_parallel = ", replicas(), ")"));
  }
  if (report.replica() != replica_of(index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: worker ", report.worker_id(), " runs replica ",
                     replica_of(index), ", not ", report.replica()));
  }
  if (report.step() < start_step_ || report.step() > granted_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step: ", report.step(), " was not granted (attempt runs steps ",
        start_step_, "..", granted_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReportEffect> Job::AcceptReport(
    const zbpp::v1::ReportStepRequest& report, int index) {
  if (absl::Status st = CheckReportPlace(report, index); !st.ok()) return st;
  const zbpp::v1::ScheduleVersion* version = versions_.InForce(report.step());
  if (version == nullptr || version->version() != report.schedule_version()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule_version: step ", report.step(), " runs version ",
        version == nullptr ? 0 : version->version(), ", not ",
        report.schedule_version()));
  }
  // Checked whole before anything is kept, so a bad entry rejects the
  // whole report.
  absl::StatusOr<MeasuredReport> measured =
      MeasureStepReport(report, versions_.schedule(version->version()),
                        version->version(), *base_, start_step_);
  if (!measured.ok()) return measured.status();
  for (const HopTiming& hop : measured->hops) {
    LogError(costs_->AddHopTiming(hop), "cost model");
  }
  if (absl::StatusOr<bool> acknowledged = Acknowledge(report.worker_id());
      !acknowledged.ok()) {
    return acknowledged.status();
  }
  PendingStep& pending = pending_[report.step()];
  pending.step = report.step();
  pending.version = version->version();
  // A second report of one (stage, replica) for a step replaces the first.
  pending.reports[index] = std::move(measured->stage);
  int64_t& done = last_completed_[index];
  done = std::max(done, report.step());
  ReportEffect effect;
  for (const zbpp::v1::ValidationResult& validation : report.validations()) {
    validations_[validation.step()][index] = validation;
    effect.disagreement = GatherValidation(validation.step());
    if (!effect.disagreement.ok()) return effect;
  }
  if (static_cast<int>(pending.reports.size()) == static_cast<int>(workers_.size())) {
    effect.complete = std::move(pending);
    pending_.erase(report.step());
  }
  return effect;
}

absl::Status Job::GatherValidation(int64_t step) {
  auto it = validations_.find(step);
  if (it == validations_.end() || it->second.size() != workers_.size()) {
    return absl::OkStatus();
  }
  absl::StatusOr<zbpp::v1::ValidationOutcome> gathered =
      GatherValidationOutcome(step, stages(), it->second);
  if (!gathered.ok()) return gathered.status();
  const zbpp::v1::ValidationOutcome& outcome = *gathered;
  validations_.erase(it);
  if (step <= validated_through_) return absl::OkStatus();  // Replayed after a recovery.
  validated_through_ = step;
  context_.writer->Enqueue(
      [id = id(), outcome](Store& store) { return store.AddValidationOutcome(id, outcome); },
      absl::StrCat("storing the validation outcome of step ", step, " of job ", id()));
  const bool rolled_back = outcome.rolled_back_stages_size() > 0;
  const bool skipped = outcome.decision() == zbpp::v1::VALIDATION_DECISION_SKIPPED;
  if (rolled_back) job_.set_rollbacks_total(job_.rollbacks_total() + 1);
  if (skipped) job_.set_skipped_steps_total(job_.skipped_steps_total() + 1);
  if (outcome.decision() == zbpp::v1::VALIDATION_DECISION_CLIPPED) {
    job_.set_clipped_steps_total(job_.clipped_steps_total() + 1);
  }
  if (context_.observer != nullptr) {
    context_.observer->OnValidation(id(), rolled_back, skipped);
  }
  JobEvent event;
  *event.mutable_validation() = outcome;
  Emit(std::move(event), /*droppable=*/false);
  if (std::optional<zbpp::v1::ValidationMode> mode = validation_->Record(outcome);
      mode.has_value()) {
    SwitchValidationMode(*mode, outcome);
  }
  return absl::OkStatus();
}

void Job::SwitchValidationMode(zbpp::v1::ValidationMode mode,
                               const zbpp::v1::ValidationOutcome& last) {
  if (versions_.empty() || workers_.empty() || IsTerminal(state())) return;
  // Same schedule and predictions, the other mode, from the next step no
  // worker has been granted: every worker switches at the same step.
  zbpp::v1::ScheduleVersion version = versions_.latest();
  const sched::Schedule schedule = versions_.schedule(version.version());
  version.clear_previous_predicted();
  version.set_reason(zbpp::v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  version.set_reason_detail(
      mode == zbpp::v1::VALIDATION_MODE_POST
          ? absl::StrCat("post-update validation: no clipping or inf/nan up to step ",
                         last.step())
          : absl::StrCat("synchronous validation: step ", last.step(),
                         " was the latest of several steps clipped or skipped"));
  version.set_validation(mode);
  PublishVersion(std::move(version), schedule);
  validation_->SwitchedTo(mode);
}

// ------------------------------------------------------- complete steps

StepReports Job::StepReportsOf(PendingStep& pending) {
  const zbpp::v1::JobSpec& spec = job_.spec();
  std::map<int, StageTiming> step_costs;  // By virtual stage.
  for (const auto& [index, report] : pending.reports) {
    for (const StageTiming& timing : report.timings) {
      auto [it, first] = step_costs.emplace(timing.stage, timing);
      if (!first) CombineReplicaTiming(timing, it->second);
    }
  }
  for (const auto& [stage, timing] : step_costs) {
    LogError(costs_->AddStageTiming(timing), "cost model");
  }
  StepReports reports;
  reports.step = pending.step;
  reports.version = pending.version;
  reports.stages = stages();
  reports.replicas = replicas();
  reports.tokens_per_replica = static_cast<double>(spec.pipeline().microbatches()) *
                               spec.pipeline().microbatch_size() * spec.model().seq_len();
  // Predicted: the version's order simulated under the current measured
  // costs (the analytic ones until every stage has a sample).
  zbpp::v1::SchedulePrediction prediction = versions_.at(pending.version).predicted();
  absl::StatusOr<sched::Problem> measured = costs_->ToProblem(*base_);
  if (measured.ok()) {
    absl::StatusOr<sched::SimulationResult> sim =
        sched::Simulate(*measured, versions_.schedule(pending.version));
    if (sim.ok()) prediction = PredictionToProto(*sim);
  }
  reports.predicted_bubble_rate = prediction.bubble_rate();
  reports.predicted_rank_bubble_rate.assign(prediction.worker_bubble_rate().begin(),
                                            prediction.worker_bubble_rate().end());
  reports.reports = std::move(pending.reports);
  return reports;
}

void Job::RecordStep(const StepOutcome& outcome, const PendingStep& pending,
                     StepReports& reports) {
  const zbpp::v1::StepSummary& summary = outcome.summary;
  if (outcome.param_checksum.has_value()) job_.set_param_checksum(*outcome.param_checksum);
  context_.writer->Enqueue(
      [id = id(), summary](Store& store) { return store.AddStepSummary(id, summary); },
      absl::StrCat("storing the summary of step ", pending.step, " of job ", id()),
      /*ignore_already_exists=*/true);
  job_.set_steps_completed(std::max(job_.steps_completed(), pending.step + 1));
  *job_.mutable_last_step() = summary;
  if (!job_.has_first_step()) *job_.mutable_first_step() = summary;
  zbpp::v1::StepTimeline* timeline = job_.mutable_last_step_timeline();
  timeline->Clear();
  timeline->set_step(pending.step);
  timeline->set_schedule_version(pending.version);
  for (int rank = 0; rank < stages(); ++rank) {
    *timeline->add_ranks() = std::move(reports.reports.at(rank).timeline);
  }
  if (context_.observer != nullptr) context_.observer->OnStep(id(), summary);
  JobEvent event;
  *event.mutable_step() = summary;
  Emit(std::move(event), /*droppable=*/true);
}

void Job::RecordCheckpoint(const StepOutcome& outcome, int64_t step) {
  // Workers write a checkpoint after every step s with
  // (s + 1) % interval_steps == 0 and say so in their report; only replica
  // 0's do (the others hold the same parameters), and the checkpoint is
  // complete once each of its ranks has.
  const zbpp::v1::JobSpec& spec = job_.spec();
  CheckpointRecord checkpoint;
  checkpoint.stages_written = outcome.checkpointed_ranks;
  if (spec.checkpoint().interval_steps() <= 0 ||
      static_cast<int>(checkpoint.stages_written.size()) != stages() ||
      step <= job_.last_checkpoint_step()) {
    return;
  }
  checkpoint.job_id = id();
  checkpoint.step = step;
  checkpoint.directory = spec.checkpoint().directory();
  checkpoint.complete = true;
  checkpoint.data_parallel = replicas();
  context_.writer->Enqueue(
      [checkpoint](Store& store) { return store.PutCheckpoint(checkpoint); },
      absl::StrCat("storing the checkpoint record of step ", step, " of job ", id()));
  job_.set_last_checkpoint_step(step);
}

bool Job::CompleteStep(PendingStep& pending) {
  StepReports reports = StepReportsOf(pending);
  StepOutcome outcome = SummarizeStep(reports);
  *outcome.summary.mutable_complete_time() = ToTimestamp(context_.clock->Now());
  RecordStep(outcome, pending, reports);
  RecordCheckpoint(outcome, pending.step);
  return job_.steps_completed() >= job_.spec().steps();
}

// ------------------------------------------------------------ re-solves

std::unique_ptr<ResolveTask> Job::MaybeResolve(int64_t step) {
  const zbpp::v1::JobSpec& spec = job_.spec();
  const zbpp::v1::ResolvePolicy& resolve = spec.schedule().resolve();
  if (ResolveDisabled(spec) || versions_.empty()) return nullptr;
  // One re-solve per job at a time; a window that ends while one runs is
  // covered by the next window.
  if (resolving_) return nullptr;
  const int64_t window = resolve.has_window_steps() ? resolve.window_steps() : 8;
  const zbpp::v1::ScheduleVersion& latest = versions_.latest();
  const int64_t under_latest = step - latest.effective_step() + 1;
  if (under_latest <= 0 || under_latest % window != 0) return nullptr;
  absl::StatusOr<sched::Problem> measured = costs_->ToProblem(*base_);
  if (!measured.ok()) return nullptr;  // Some stage has no sample yet.

  auto task = std::make_unique<ResolveTask>();
  task->job_id = id();
  task->attempt = attempt_;
  task->current_version = latest.version();
  task->current = versions_.schedule(latest.version());
  // "auto" re-solves the schedule ChooseAutoSchedule picked.
  if (!spec.schedule().file().empty()) {
    task->policy_name = FileResolver(task->current);
  } else if (spec.schedule().name() == kAutoScheduleName) {
    task->policy_name = latest.schedule().name();
  } else {
    task->policy_name = spec.schedule().name();
  }
  task->policy = policy_.get();
  task->measured = *std::move(measured);
  task->cost_drift = costs_->Drift();
  task->base = *base_;
  task->record.job_id = id();
  task->record.step = step;
  resolving_ = true;
  return task;
}

bool Job::EndResolve(const ResolveTask& task) {
  resolving_ = false;
  // Publish only onto what was solved for: the same attempt, still
  // running, and no other schedule published meanwhile (a validation-mode
  // switch keeps the schedule: the candidate still applies, and takes the
  // new mode). PublishVersion then takes the effective step from the
  // grants sent by now, so every worker still switches at the same step.
  return attempt_ == task.attempt && !workers_.empty() && !IsTerminal(state()) &&
         versions_.OnlyModeChangesSince(task.current_version);
}

}  // namespace zbpp::coordinator
