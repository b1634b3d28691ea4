// Job: calibration before an attempt's first step (job.h; job_spec.proto
// SchedulePolicy.calibrate): the workers' profiles in, the calibrated
// version out, then the first grant.

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "coordinator/core/job.h"
#include "coordinator/core/profile_check.h"
#include "coordinator/core/planning.h"

namespace zbpp::coordinator {

absl::Status Job::ReportProfile(const zbpp::v1::ReportProfileRequest& profile, int index) {
  const zbpp::v1::ScheduleVersion* assigned = versions_.InForce(attempt_.start_step());
  if (!attempt_.active() || !attempt_.calibrating() || assigned == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id(), " attempt ", attempt_.number(), " has no calibration pending"));
  }
  // Checked against what the worker's Assignment carried: the version in
  // force at the start step until the calibrated one is out.
  const sched::Schedule& schedule = versions_.schedule(assigned->version());
  absl::StatusOr<MeasuredProfile> measured =
      MeasureProfile(profile, schedule, stage_of(index), replica_of(index), attempt_.replicas());
  if (!measured.ok()) return measured.status();
  // A worker that profiled holds the attempt (going RUNNING stores the
  // record itself).
  if (absl::StatusOr<bool> running = Acknowledge(profile.worker_id()); !running.ok()) {
    return running.status();
  }
  std::optional<std::map<int, zbpp::v1::ReportProfileRequest>> all =
      attempt_.AddProfile(index, profile);
  if (!all.has_value()) return absl::OkStatus();
  std::map<int, MeasuredProfile> profiles;
  for (const auto& [i, each] : *all) {
    // Each was checked when it came; the schedule has not changed since.
    absl::StatusOr<MeasuredProfile> m =
        MeasureProfile(each, schedule, stage_of(i), replica_of(i), attempt_.replicas());
    if (m.ok()) profiles.emplace(i, *std::move(m));
  }
  effects_.resolve = model_.Calibrate(job_, versions_, attempt_.number(),
                                      attempt_.start_step(), profiles);
  if (effects_.resolve == nullptr) {
    // The measured problem could not be built: the attempt runs the
    // version it was assigned rather than waiting for ever.
    attempt_.EndCalibration();
    UpdateGrant();
  }
  return absl::OkStatus();
}

void Job::FinishCalibration(ResolveTask& task) {
  if (attempt_.number() != task.attempt || !attempt_.active() || IsTerminal(state()) ||
      !attempt_.calibration_solving()) {
    task.record.reason =
        absl::StrCat(task.record.reason, "; not published: the attempt ended while solving");
    return;
  }
  if (!task.failure.empty()) {
    Fail(task.failure).IgnoreError();  // The error repeats task.failure.
    return;
  }
  if (task.layout.has_value()) {
    job_.clear_layout();
    job_.mutable_layout()->Add(task.layout->layout.begin(), task.layout->layout.end());
    job_.set_layout_reason(task.layout->reason);
    job_.set_layout_source(zbpp::v1::LAYOUT_SOURCE_PROFILED);
    if (task.layout->changed) {
      Relayout(task.layout->layout);
      return;
    }
  }
  attempt_.EndCalibration();
  if (task.candidate.has_value()) {
    task.record.published = true;
    task.record.version = PublishVersion(*std::move(task.candidate), *task.candidate_schedule);
  }
  UpdateGrant();
  Persist();
}

void Job::Relayout(const std::vector<int>& layout) {
  StoreLayout(*job_.mutable_spec(), layout);
  model_.ForgetLayout();
  // Before step 0 nothing trained is lost: the same workers (or any free
  // ones) take a new attempt at once (Waiting), not counted as a recovery.
  EndAttempt(absl::StrCat("the calibration chose the layout ", LayoutText(layout),
                          ": a new attempt builds its chunks"),
             /*keep_state=*/false);
  relayout_pending_ = true;
  job_.set_state_message(absl::StrCat("layout ", LayoutText(layout),
                                      " chosen at calibration; starting its attempt"));
  Persist();
}

}  // namespace zbpp::coordinator
