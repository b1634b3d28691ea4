// Job: schedule versions, step reports, validation outcomes, complete steps
// and the re-solves they make due (job.h).

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
#include "coordinator/core/replica_combine.h"
#include "coordinator/core/step_report_check.h"

namespace zbpp::coordinator {

using zbpp::v1::JobEvent;
using zbpp::v1::SessionResponse;

int64_t Job::PublishVersion(zbpp::v1::ScheduleVersion version,
                            const sched::Schedule& schedule) {
  versions_.Stamp(version, attempt_.granted(), attempt_.start_step(), context_.clock->Now());
  if (version.validation() == zbpp::v1::VALIDATION_MODE_UNSPECIFIED) {
    version.set_validation(model_.validation().mode());
  }
  // The policy's mode is what the job would like; the transport may veto
  // POST for this schedule (validation_policy.h PostValidationObstacle).
  if (version.validation() == zbpp::v1::VALIDATION_MODE_POST) {
    if (const std::string why = PostValidationObstacle(job_.transport(), schedule);
        !why.empty()) {
      version.set_validation(zbpp::v1::VALIDATION_MODE_SYNCHRONOUS);
      version.set_reason_detail(absl::StrCat(version.reason_detail(),
                                             version.reason_detail().empty() ? "" : "; ",
                                             "synchronous validation: ", why));
    }
  }
  effects_.writes.push_back(version);
  versions_.Add(version, schedule);
  job_.set_schedule_version(version.version());
  job_.set_validation_mode(version.validation());
  effects_.observations.push_back(VersionObserved{version.version()});
  // The event nobody watches is numbered, with no copy of the version.
  JobEvent event;
  if (!watchers_.empty()) *event.mutable_schedule_change() = version;
  Emit(std::move(event), /*droppable=*/false);
  const int64_t number = version.version();
  if (attempt_.active()) {
    // One message for all p workers: the version is moved in, not copied.
    auto message = std::make_shared<SessionResponse>();
    *message->mutable_schedule() = std::move(version);
    MessageWorkers(message);
  }
  return number;
}

absl::Status Job::ReportStep(const zbpp::v1::ReportStepRequest& report, int index) {
  absl::StatusOr<ReportEffect> effect = AcceptReport(report, index);
  if (!effect.ok()) return effect.status();
  absl::Status ending = absl::OkStatus();
  if (!effect->disagreement.ok()) {
    // The job failed: its attempt (and its pending steps) is gone.
    const std::string why(effect->disagreement.message());
    ending = ChangeState(zbpp::v1::JOB_STATE_FAILED, why, why);
  } else if (effect->complete.has_value()) {
    bool last = false;
    CompleteStep(*effect->complete, &last);
    if (last) ending = ChangeState(zbpp::v1::JOB_STATE_SUCCEEDED, "", "job succeeded");
  }
  UpdateGrant();
  MaybeEndForHeal();
  // A transition stored the record already.
  if (effect->record_changed && !IsTerminal(state())) Persist();
  return ending;
}

absl::StatusOr<Job::ReportEffect> Job::AcceptReport(const zbpp::v1::ReportStepRequest& report,
                                                   int index) {
  if (absl::Status st = attempt_.CheckReportPlace(report, index); !st.ok()) return st;
  // Each worker reports its steps in order, once each: a step at or below its
  // last is a repeat, and the first report stands.
  if (report.step() <= attempt_.last_reported(index)) return ReportEffect{};
  const zbpp::v1::ScheduleVersion* version = versions_.InForce(report.step());
  if (version == nullptr || version->version() != report.schedule_version()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule_version: step ", report.step(), " runs version ",
        version == nullptr ? 0 : version->version(), ", not ",
        report.schedule_version()));
  }
  // Checked whole before anything is kept, so a bad entry rejects the
  // whole report.
  if (report.has_snapshot_step() &&
      (job_.spec().checkpoint().snapshot_interval_steps() <= 0 ||
       report.snapshot_step() < attempt_.start_step() || report.snapshot_step() > report.step())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot_step: ", report.snapshot_step(), " is no step this attempt could have written "
        "a snapshot of (checkpoint.snapshot_interval_steps ",
        job_.spec().checkpoint().snapshot_interval_steps(), ", steps ", attempt_.start_step(),
        "..", report.step(), ")"));
  }
  absl::StatusOr<MeasuredReport> measured =
      MeasureStepReport(report, versions_.schedule(version->version()),
                        version->version(), model_.base(), attempt_.start_step());
  if (!measured.ok()) return measured.status();
  if (report.has_snapshot_step()) NoteSnapshot(attempt_.stage_of(index), report.snapshot_step());
  for (const HopTiming& hop : measured->hops) model_.AddHop(hop);
  // Going RUNNING stores the record itself (a transition).
  if (absl::StatusOr<bool> running = Acknowledge(report.worker_id()); !running.ok()) {
    return running.status();
  }
  ReportEffect effect;
  std::optional<PendingStep> complete = attempt_.AddReport(
      index, report.step(), version->version(), std::move(measured->stage));
  for (const zbpp::v1::ValidationResult& validation : report.validations()) {
    std::optional<std::map<int, zbpp::v1::ValidationResult>> results =
        attempt_.AddValidation(index, validation);
    if (!results.has_value()) continue;
    absl::StatusOr<zbpp::v1::ValidationOutcome> outcome =
        GatherValidationOutcome(validation.step(), stages(), *results);
    if (!outcome.ok()) {
      effect.disagreement = outcome.status();
      return effect;
    }
    RecordValidation(*outcome);
    effect.record_changed = true;
  }
  if (complete.has_value()) effect.record_changed = true;
  effect.complete = std::move(complete);
  return effect;
}

void Job::RecordValidation(const zbpp::v1::ValidationOutcome& outcome) {
  const int64_t step = outcome.step();
  // A step at or below validated_through_ ran again after a recovery: its
  // outcome replaces the stored one (store.h, "Replayed steps"), and the
  // counters follow, as the restarted coordinator's recount would.
  const bool replayed = step <= validated_through_;
  validated_through_ = std::max(validated_through_, step);
  effects_.writes.push_back(ValidationOutcomeWrite{id(), outcome});
  CountValidation(outcome);
  // The metrics' counters count events (a replayed step's rollback
  // happened again, and is observed again); the job's count steps.
  effects_.observations.push_back(
      ValidationObserved{outcome.rolled_back_stages_size() > 0,
                         outcome.decision() == zbpp::v1::VALIDATION_DECISION_SKIPPED});
  JobEvent event;
  *event.mutable_validation() = outcome;
  Emit(std::move(event), /*droppable=*/false);
  if (replayed) return;
  if (std::optional<zbpp::v1::ValidationMode> mode = model_.validation().Record(outcome);
      mode.has_value()) {
    SwitchValidationMode(*mode, outcome);
  }
}

void Job::CountValidation(const zbpp::v1::ValidationOutcome& outcome) {
  ValidationCounts counts;
  counts.rolled_back = outcome.rolled_back_stages_size() > 0;
  counts.skipped = outcome.decision() == zbpp::v1::VALIDATION_DECISION_SKIPPED;
  counts.clipped = outcome.decision() == zbpp::v1::VALIDATION_DECISION_CLIPPED;
  ValidationCounts before;
  if (auto it = counted_validations_.find(outcome.step()); it != counted_validations_.end()) {
    before = it->second;
    counted_validations_.erase(it);
  }
  if (counts.rolled_back || counts.skipped || counts.clipped) {
    counted_validations_[outcome.step()] = counts;
  }
  job_.set_rollbacks_total(job_.rollbacks_total() + counts.rolled_back - before.rolled_back);
  job_.set_skipped_steps_total(job_.skipped_steps_total() + counts.skipped - before.skipped);
  job_.set_clipped_steps_total(job_.clipped_steps_total() + counts.clipped - before.clipped);
}

void Job::ValidateOverTransport() {
  const zbpp::v1::ScheduleVersion* first = versions_.InForce(attempt_.start_step());
  if (first == nullptr || job_.transport() != zbpp::v1::TRANSPORT_NCCL) return;
  // Versions published before the transport was known (version 1 of a new
  // job; those of an attempt over Gloo) may ask for POST where NCCL cannot
  // run it. A copy of the latest version, published now, is vetoed (or
  // kept) by PublishVersion and takes effect at the attempt's start step,
  // or one step after the latest's: the attempt's first step speculates on
  // nothing (it follows a restored state), and a switch away from POST
  // settles the step before it.
  std::vector<const zbpp::v1::ScheduleVersion*> runs = versions_.After(attempt_.start_step());
  runs.insert(runs.begin(), first);
  bool vetoed = false;
  for (const zbpp::v1::ScheduleVersion* version : runs) {
    vetoed |= version->validation() == zbpp::v1::VALIDATION_MODE_POST &&
              !PostValidationObstacle(zbpp::v1::TRANSPORT_NCCL,
                                      versions_.schedule(version->version()))
                   .empty();
  }
  if (!vetoed) return;
  zbpp::v1::ScheduleVersion version = versions_.latest();
  const sched::Schedule schedule = versions_.schedule(version.version());
  version.clear_previous_predicted();
  version.set_reason(zbpp::v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  version.set_reason_detail(absl::StrCat("attempt ", attempt_.number() + 1, " runs over NCCL"));
  PublishVersion(std::move(version), schedule);
}

bool Job::StepLeftForNewVersion() const {
  return versions_.NextEffectiveStep(attempt_.granted(), attempt_.start_step()) <
         job_.spec().steps();
}

void Job::SwitchValidationMode(zbpp::v1::ValidationMode mode,
                               const zbpp::v1::ValidationOutcome& last) {
  if (versions_.empty() || !attempt_.active() || IsTerminal(state())) return;
  // The version would take effect after the job's last step: none would run it.
  if (!StepLeftForNewVersion()) return;
  // Same schedule and predictions, the other mode, from the next step no
  // worker has been granted: every worker switches at the same step.
  zbpp::v1::ScheduleVersion version = versions_.latest();
  const sched::Schedule schedule = versions_.schedule(version.version());
  if (mode == zbpp::v1::VALIDATION_MODE_POST &&
      !PostValidationObstacle(job_.transport(), schedule).empty()) {
    // The transport vetoes POST for this schedule: the version would be
    // SYNCHRONOUS again. The policy keeps wanting POST, which a later
    // schedule (a re-solve) whose prefixes are closed gets.
    model_.validation().SwitchedTo(mode);
    return;
  }
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
  model_.validation().SwitchedTo(mode);
}

// ------------------------------------------------------- complete steps

void Job::RecordStep(StepOutcome& outcome, const PendingStep& pending) {
  *outcome.summary.mutable_complete_time() = ToTimestamp(context_.clock->Now());
  const zbpp::v1::StepSummary& summary = outcome.summary;
  if (outcome.param_checksum.has_value()) job_.set_param_checksum(*outcome.param_checksum);
  // A step replayed after a recovery or a restart replaces its first run's
  // summary (store.h, "Replayed steps"): its times are the new run's.
  effects_.writes.push_back(StepSummaryWrite{id(), summary});
  job_.set_steps_completed(std::max(job_.steps_completed(), pending.step + 1));
  if (state() == zbpp::v1::JOB_STATE_DEGRADED) {
    job_.set_degraded_steps(job_.degraded_steps() + 1);
  }
  *job_.mutable_last_step() = summary;
  if (!job_.has_first_step()) *job_.mutable_first_step() = summary;
  effects_.observations.push_back(StepObserved{summary});
  JobEvent event;
  *event.mutable_step() = summary;
  Emit(std::move(event), /*droppable=*/true);
}

void Job::RecordCheckpoint(const StepOutcome& outcome, int64_t step) {
  // Workers write a checkpoint after every step s with
  // (s + 1) % interval_steps == 0 and say so in their report; only replica
  // 0's do (the others hold the same parameters), and the checkpoint is
  // complete once each of its stages has.
  const zbpp::v1::JobSpec& spec = job_.spec();
  CheckpointRecord checkpoint;
  checkpoint.stages_written = outcome.checkpointed_stages;
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
  effects_.writes.push_back(checkpoint);
  job_.set_last_checkpoint_step(step);
}

void Job::NoteSnapshot(int stage, int64_t step) {
  google::protobuf::RepeatedField<int64_t>& steps = *job_.mutable_snapshot_steps();
  if (steps.size() != stages()) {
    steps.Clear();
    steps.Resize(stages(), -1);
  }
  if (stage < 0 || stage >= stages() || step <= steps.Get(stage)) return;
  steps.Set(stage, step);
  job_.set_last_snapshot_step(*std::min_element(steps.begin(), steps.end()));
}

void Job::RecordPendingStep(PendingStep& pending, int replicas, int microbatches) {
  StepReports reports = model_.AddStep(job_.spec(), pending, versions_, replicas, microbatches);
  StepOutcome outcome = SummarizeStep(reports);
  zbpp::v1::StepTimeline* timeline = job_.mutable_last_step_timeline();
  timeline->Clear();
  timeline->set_step(pending.step);
  timeline->set_schedule_version(pending.version);
  for (int stage = 0; stage < stages(); ++stage) {
    *timeline->add_stages() = std::move(reports.reports.at(stage).timeline);
  }
  RecordStep(outcome, pending);
  RecordCheckpoint(outcome, pending.step);
}

void Job::CompleteStep(PendingStep& pending, bool* last) {
  RecordPendingStep(pending, attempt_.replicas(), attempt_.shape().microbatches);
  *last = job_.steps_completed() >= job_.spec().steps();
  // A re-solve whose result no step could run is not started (the solver's
  // time is the workers' CPU on a small machine); FinishResolve checks
  // again, as grants may reach the last step while it solves.
  if (*last || !StepLeftForNewVersion()) return;
  // A re-solve plans the spec's m microbatches (the model's base problem):
  // none while a degraded attempt runs m' (docs/elastic.md).
  if (attempt_.replicas() != replicas()) return;
  effects_.resolve = model_.MaybeResolve(job_, versions_, attempt_.number(), pending.step);
}

void Job::RecordUnreportedStep(
    int64_t step, const std::vector<std::optional<zbpp::v1::ReportStepRequest>>& step_reports,
    int ended_replicas) {
  const zbpp::v1::ScheduleVersion* version = versions_.InForce(step);
  if (step < job_.steps_completed() || step_reports.empty() || ended_replicas < 1 ||
      version == nullptr) {
    return;
  }
  PendingStep pending{step, version->version(), {}};
  std::map<int64_t, std::map<int, zbpp::v1::ValidationResult>> validations;
  for (int index = 0; index < static_cast<int>(step_reports.size()); ++index) {
    const std::optional<zbpp::v1::ReportStepRequest>& report = step_reports[index];
    if (!report.has_value() || report->step() != step ||
        report->schedule_version() != version->version() || report->stage() != stage_of(index) ||
        report->replica() != replica_of(index)) {
      return;
    }
    absl::StatusOr<MeasuredReport> measured =
        MeasureStepReport(*report, versions_.schedule(version->version()), version->version(),
                          model_.base(), /*start_step=*/0);
    if (!measured.ok()) return;
    pending.reports[index] = std::move(measured->stage);
    for (const zbpp::v1::ValidationResult& v : report->validations()) {
      validations[v.step()][index] = v;
    }
  }
  for (const auto& [at, results] : validations) {
    if (results.size() != step_reports.size()) continue;
    absl::StatusOr<zbpp::v1::ValidationOutcome> outcome =
        GatherValidationOutcome(at, stages(), results);
    if (outcome.ok()) RecordValidation(*outcome);
  }
  const int m = job_.spec().pipeline().microbatches() * replicas() / ended_replicas;
  RecordPendingStep(pending, ended_replicas, m);
}

void Job::FinishResolve(ResolveTask& task) {
  if (task.calibration) {
    FinishCalibration(task);
  } else {
    FinishReSolve(task);
    // The costs it decided on, by its step. A step replayed after a
    // recovery or a restart may re-solve at a step whose snapshot is stored
    // already: this one replaces it, as a replayed step summary does, while
    // the first run's re-solve record stays in the log beside this one's
    // (store.h, "Replayed steps"). A calibration's costs are its version's
    // cost model.
    effects_.writes.push_back(
        CostSnapshotWrite{id(), task.record.step, CostModelToProto(task.measured)});
  }
  effects_.writes.push_back(task.record);
  // A calibration is stored with the re-solves (its reason says so) but is
  // no re-solve to count: its version is counted as any other.
  if (!task.calibration) effects_.observations.push_back(ResolveObserved{task.record.published});
}

void Job::FinishReSolve(ResolveTask& task) {
  model_.EndResolve();
  if (task.drift_input.has_value() && attempt_.number() == task.attempt) {
    // The drift report (job.proto Job.better_layout): the latest re-solve's.
    job_.clear_better_layout();
    job_.clear_better_layout_reason();
    if (task.better_layout.has_value()) {
      job_.mutable_better_layout()->Add(task.better_layout->first.begin(),
                                        task.better_layout->first.end());
      job_.set_better_layout_reason(task.better_layout->second);
    }
  }
  if (!task.candidate.has_value()) return;
  // Publish only onto what was solved for: the same attempt, still
  // running, and no other schedule published meanwhile (a validation-mode
  // switch keeps the schedule: the candidate still applies, and takes the
  // new mode). PublishVersion then takes the effective step from the
  // grants sent by now, so every worker still switches at the same step.
  if (attempt_.number() != task.attempt || !attempt_.active() || IsTerminal(state()) ||
      !versions_.OnlyModeChangesSince(task.current_version)) {
    task.record.reason = absl::StrCat(
        task.record.reason,
        "; not published: the job's attempt or version changed while solving");
    return;
  }
  if (!StepLeftForNewVersion()) {
    task.record.reason = absl::StrCat(
        task.record.reason, "; not published: every step up to the job's last (",
        job_.spec().steps() - 1, ") was granted while solving, so no step could run it");
    return;
  }
  task.record.published = true;
  task.record.version =
      PublishVersion(*std::move(task.candidate), *task.candidate_schedule);
  Persist();
}

}  // namespace zbpp::coordinator
