#include "coordinator/core/job_attempt.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/core/checkpoint_directory.h"
#include "coordinator/core/planning.h"

namespace zbpp::coordinator {

bool JobAttempt::Holds(const std::string& worker_id) const {
  return std::find(workers_.begin(), workers_.end(), worker_id) != workers_.end();
}

std::string JobAttempt::scope(const std::string& job_id) const {
  return absl::StrCat(job_id, "/attempt-", number_);
}

SessionMessage JobAttempt::AssignmentMessage(int index, const zbpp::v1::Job& job,
                                             const ScheduleVersions& versions,
                                             const WorkerRegistry& registry) const {
  auto message = std::make_shared<zbpp::v1::SessionResponse>();
  zbpp::v1::Assignment& assignment = *message->mutable_assignment();
  assignment.set_job_id(job.id());
  assignment.set_attempt(number_);
  *assignment.mutable_spec() = job.spec();
  const int stage = stage_of(index);
  assignment.set_stage(stage);
  assignment.set_replica(replica_of(index));
  const zbpp::v1::ScheduleVersion* version = versions.InForce(start_step_);
  if (version != nullptr) {
    const auto& owners = version->schedule().stage_of();
    for (int s = 0; s < owners.size(); ++s) {
      if (owners[s] == stage) assignment.add_virtual_stages(s);
    }
    *assignment.mutable_schedule() = *version;
  }
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    zbpp::v1::Peer* peer = assignment.add_peers();
    peer->set_stage(stage_of(i));
    peer->set_replica(replica_of(i));
    peer->set_worker_id(workers_[i]);
    if (const zbpp::v1::WorkerDescription* d = registry.Description(workers_[i])) {
      *peer->mutable_description() = *d;
    }
  }
  assignment.set_rendezvous_scope(scope(job.id()));
  assignment.set_transport(job.transport());
  assignment.set_start_step(start_step_);
  assignment.set_profile(calibrating_);
  if (calibrating_ && version != nullptr && LayoutOpenAtCalibration(job, start_step_)) {
    assignment.set_layout_part_blocks(
        LayoutPartBlocks(job.spec(), version->schedule().stage_of_size()));
  }
  if (shape_.from_memory) {
    // docs/elastic.md: the same global batch, replica r of d' taking
    // [r·m', (r+1)·m').
    const int microbatches =
        shape_.microbatches > 0 ? shape_.microbatches : job.spec().pipeline().microbatches();
    assignment.set_resume_from_memory(shape_.live_replicas == 0 ||
                                      replica_of(index) < shape_.live_replicas);
    if (shape_.live_replicas > 0) {
      // The copy is a collective of the data-parallel group: replica 0's
      // worker sends, every other one takes it (zbpp-worker's
      // StageTrainer::CopyStateFromReplica), so every worker joins it.
      assignment.set_receive_state(true);
      assignment.set_state_source_replica(0);
    }
    assignment.set_replicas(replicas());
    assignment.set_microbatch_offset(replica_of(index) * microbatches);
    assignment.set_microbatches(microbatches);
  } else if (const RestorePoint restore = NewestRestorePoint(job); restore.step >= 0) {
    assignment.mutable_restore()->set_step(restore.step);
    assignment.mutable_restore()->set_directory(restore.directory);
  }
  return message;
}

SessionMessage JobAttempt::GrantMessage(const std::string& job_id) const {
  auto message = std::make_shared<zbpp::v1::SessionResponse>();
  zbpp::v1::StepGrant* grant = message->mutable_grant();
  grant->set_job_id(job_id);
  grant->set_attempt(number_);
  grant->set_through_step(granted_);
  return message;
}

void JobAttempt::Start(std::vector<std::string> workers, bool calibrate, AttemptShape shape) {
  ++number_;
  shape_ = shape;
  calibrating_ = calibrate;
  calibration_solving_ = false;
  profiles_.clear();
  workers_ = std::move(workers);
  acknowledged_.clear();
  last_completed_.assign(workers_.size(), start_step_ - 1);
  granted_ = start_step_ - 1;
  pending_.clear();
  validations_.clear();
}

void JobAttempt::End() {
  workers_.clear();
  acknowledged_.clear();
  last_completed_.clear();
  pending_.clear();
  validations_.clear();
  profiles_.clear();
  calibrating_ = calibration_solving_ = false;
  granted_ = -1;
}

bool JobAttempt::NextGrant(int64_t lookahead, int64_t last_step) {
  if (calibrating_) return false;
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int64_t done : last_completed_) slowest = std::min(slowest, done);
  const int64_t through = std::min(slowest + lookahead, last_step);
  if (through <= granted_) return false;
  granted_ = through;
  return true;
}

bool JobAttempt::Acknowledge(const std::string& worker_id) {
  acknowledged_.insert(worker_id);
  return acknowledged_.size() == workers_.size();
}

absl::Status JobAttempt::CheckReportPlace(const zbpp::v1::ReportStepRequest& report,
                                          int index) const {
  if (report.stage() != stage_of(index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage: worker ", report.worker_id(), " runs stage ",
                     stage_of(index), ", not ", report.stage()));
  }
  if (report.replica() < 0 || report.replica() >= replicas()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", report.replica(), " is not in [0, ", replicas(), ") (",
                     replicas() == spec_replicas_
                         ? absl::StrCat("pipeline.data_parallel = ", spec_replicas_)
                         : absl::StrCat("a degraded attempt of ", replicas(), " of ",
                                        spec_replicas_, " replicas"),
                     ")"));
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

std::optional<PendingStep> JobAttempt::AddReport(int index, int64_t step,
                                                 int64_t version, StageReport report) {
  PendingStep& pending = pending_[step];
  pending.step = step;
  pending.version = version;
  // A second report of one (stage, replica) for a step replaces the first.
  pending.reports[index] = std::move(report);
  int64_t& done = last_completed_[index];
  done = std::max(done, step);
  if (pending.reports.size() != workers_.size()) return std::nullopt;
  std::optional<PendingStep> complete = std::move(pending);
  pending_.erase(step);
  return complete;
}

std::optional<std::map<int, zbpp::v1::ReportProfileRequest>> JobAttempt::AddProfile(
    int index, const zbpp::v1::ReportProfileRequest& profile) {
  if (!calibrating_ || calibration_solving_) return std::nullopt;
  profiles_[index] = profile;
  if (profiles_.size() != workers_.size()) return std::nullopt;
  calibration_solving_ = true;
  std::optional<std::map<int, zbpp::v1::ReportProfileRequest>> all = std::move(profiles_);
  profiles_.clear();
  return all;
}

std::optional<std::map<int, zbpp::v1::ValidationResult>> JobAttempt::AddValidation(
    int index, const zbpp::v1::ValidationResult& result) {
  std::map<int, zbpp::v1::ValidationResult>& results = validations_[result.step()];
  results[index] = result;
  if (results.size() != workers_.size()) return std::nullopt;
  std::optional<std::map<int, zbpp::v1::ValidationResult>> all = std::move(results);
  validations_.erase(result.step());
  return all;
}

std::vector<int> JobAttempt::MissingProfiles() const {
  std::vector<int> missing;
  if (!calibrating_ || calibration_solving_) return missing;
  for (int index = 0; index < static_cast<int>(workers_.size()); ++index) {
    if (!profiles_.count(index)) missing.push_back(index);
  }
  return missing;
}

}  // namespace zbpp::coordinator
