#include "coordinator/core/schedule_versions.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

absl::StatusOr<std::unique_ptr<ScheduleVersions>> ScheduleVersions::Create(
    Options options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError(
        "ScheduleVersions::Options.clock is null");
  }
  if (options.switch_lead_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "switch_lead_steps must be >= 1, got ", options.switch_lead_steps));
  }
  return std::unique_ptr<ScheduleVersions>(new ScheduleVersions(options));
}

absl::StatusOr<ScheduleVersion> ScheduleVersions::Publish(
    sched::Schedule schedule, const PredictedStats& predicted,
    int64_t current_step) {
  if (current_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("current_step must be >= 0, got ", current_step));
  }
  ScheduleVersion version;
  version.schedule = std::move(schedule);
  version.predicted = predicted;
  version.published_at = options_.clock->Now();
  absl::MutexLock lock(&mu_);
  version.number = static_cast<int64_t>(versions_.size()) + 1;
  if (versions_.empty()) {
    version.effective_step = current_step;
  } else {
    // A worker may already be inside current_step (or, having reported it,
    // inside the next one); only a step it has not begun can switch for
    // everybody at once.
    version.effective_step = std::max(current_step + options_.switch_lead_steps,
                                      versions_.back().effective_step + 1);
  }
  versions_.push_back(version);
  return version;
}

absl::StatusOr<ScheduleVersion> ScheduleVersions::ScheduleForStep(
    int64_t step) const {
  absl::MutexLock lock(&mu_);
  // Effective steps strictly increase, so the latest one <= step wins.
  for (auto it = versions_.rbegin(); it != versions_.rend(); ++it) {
    if (it->effective_step <= step) return *it;
  }
  return absl::NotFoundError(
      absl::StrCat("no schedule version in force at step ", step));
}

absl::StatusOr<ScheduleVersion> ScheduleVersions::Latest() const {
  absl::MutexLock lock(&mu_);
  if (versions_.empty()) {
    return absl::NotFoundError("no schedule version published");
  }
  return versions_.back();
}

std::vector<ScheduleVersion> ScheduleVersions::History() const {
  absl::MutexLock lock(&mu_);
  return versions_;
}

absl::Status ScheduleVersions::Restore(std::vector<ScheduleVersion> history) {
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].number != static_cast<int64_t>(i) + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("restored version #", i, " has number ",
                       history[i].number, ", expected ", i + 1));
    }
    if (i > 0 && history[i].effective_step <= history[i - 1].effective_step) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restored version ", history[i].number, " takes effect at step ",
          history[i].effective_step, ", not after version ", i, "'s step ",
          history[i - 1].effective_step));
    }
  }
  absl::MutexLock lock(&mu_);
  if (!versions_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot restore: ", versions_.size(), " versions already published"));
  }
  versions_ = std::move(history);
  return absl::OkStatus();
}

}  // namespace zbpp::coordinator
