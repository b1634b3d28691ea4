#include "coordinator/core/job_attempt.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

bool JobAttempt::Holds(const std::string& worker_id) const {
  return std::find(workers_.begin(), workers_.end(), worker_id) != workers_.end();
}

void JobAttempt::Start(std::vector<std::string> workers) {
  ++number_;
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
  granted_ = -1;
}

std::optional<int64_t> JobAttempt::NextGrant(int64_t lookahead, int64_t last_step) {
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int64_t done : last_completed_) slowest = std::min(slowest, done);
  const int64_t through = std::min(slowest + lookahead, last_step);
  if (through <= granted_) return std::nullopt;
  granted_ = through;
  return through;
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
  if (report.replica() < 0 || report.replica() >= replicas_) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", report.replica(), " is not in [0, ", replicas_,
                     ") (pipeline.data_parallel = ", replicas_, ")"));
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

std::optional<std::map<int, zbpp::v1::ValidationResult>> JobAttempt::AddValidation(
    int index, const zbpp::v1::ValidationResult& result) {
  std::map<int, zbpp::v1::ValidationResult>& results = validations_[result.step()];
  results[index] = result;
  if (results.size() != workers_.size()) return std::nullopt;
  std::optional<std::map<int, zbpp::v1::ValidationResult>> all = std::move(results);
  validations_.erase(result.step());
  return all;
}

}  // namespace zbpp::coordinator
