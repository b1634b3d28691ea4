#include "coordinator/core/schedule_versions.h"

#include <algorithm>
#include <utility>

#include "api/schedule_proto.h"
#include "api/schedule_version.h"
#include "api/time_proto.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

zbpp::v1::ScheduleVersion BuildVersion(
    const std::string& job_id, const sched::Schedule& schedule,
    const sched::Problem& costs, const sched::SimulationResult& predicted,
    zbpp::v1::ScheduleChangeReason reason, const std::string& detail,
    const sched::SimulationResult* previous) {
  zbpp::v1::ScheduleVersion version;
  version.set_job_id(job_id);
  *version.mutable_schedule() = ScheduleToProto(schedule);
  *version.mutable_cost_model() = CostModelToProto(costs);
  *version.mutable_predicted() = PredictionToProto(predicted);
  if (previous != nullptr) {
    *version.mutable_previous_predicted() = PredictionToProto(*previous);
  }
  version.set_reason(reason);
  version.set_reason_detail(detail);
  return version;
}

const zbpp::v1::ScheduleVersion* ScheduleVersions::InForce(int64_t step) const {
  return VersionInForce(versions_, step);
}

std::vector<const zbpp::v1::ScheduleVersion*> ScheduleVersions::After(
    int64_t step) const {
  std::vector<const zbpp::v1::ScheduleVersion*> later;
  const zbpp::v1::ScheduleVersion* in_force = InForce(step);
  if (in_force == nullptr) return later;
  for (const zbpp::v1::ScheduleVersion& version : versions_) {
    if (version.version() > in_force->version() &&
        version.effective_step() > in_force->effective_step()) {
      later.push_back(&version);
    }
  }
  return later;
}

const zbpp::v1::ScheduleVersion* ScheduleVersions::Find(int64_t number) const {
  if (number >= 1 && number <= static_cast<int64_t>(versions_.size()) &&
      versions_[number - 1].version() == number) {
    return &versions_[number - 1];
  }
  // Numbers are 1.. without gaps unless the store lost one; search then.
  auto it = std::find_if(versions_.begin(), versions_.end(),
                         [number](const auto& v) { return v.version() == number; });
  return it == versions_.end() ? nullptr : &*it;
}

int64_t ScheduleVersions::NextEffectiveStep(int64_t granted, int64_t start_step,
                                            bool calibration, bool replicas) const {
  if (versions_.empty()) return start_step;
  if (replicas && granted < start_step) return start_step;
  if (calibration && granted < start_step) {
    return std::max(versions_.back().effective_step(), start_step);
  }
  return std::max({granted + 1, versions_.back().effective_step() + 1, start_step});
}

void ScheduleVersions::Stamp(zbpp::v1::ScheduleVersion& version, int64_t granted,
                             int64_t start_step, absl::Time now) const {
  version.set_version(static_cast<int64_t>(versions_.size()) + 1);
  version.set_effective_step(NextEffectiveStep(
      granted, start_step,
      version.reason() == zbpp::v1::SCHEDULE_CHANGE_REASON_CALIBRATION,
      version.reason() == zbpp::v1::SCHEDULE_CHANGE_REASON_REPLICAS));
  *version.mutable_publish_time() = ToTimestamp(now);
}

void ScheduleVersions::Add(zbpp::v1::ScheduleVersion version,
                           const sched::Schedule& schedule) {
  parsed_[version.version()] = schedule;
  versions_.push_back(std::move(version));
}

absl::Status ScheduleVersions::Restore(zbpp::v1::ScheduleVersion version) {
  absl::StatusOr<sched::Schedule> parsed = ScheduleFromProto(version.schedule());
  if (!parsed.ok()) return parsed.status();
  parsed_[version.version()] = *std::move(parsed);
  versions_.push_back(std::move(version));
  return absl::OkStatus();
}

void ScheduleVersions::Sort() {
  std::sort(versions_.begin(), versions_.end(), [](const auto& a, const auto& b) {
    return a.version() < b.version();
  });
}

bool ScheduleVersions::OnlyModeChangesSince(int64_t number) const {
  if (versions_.empty() || versions_.back().version() < number) return false;
  for (size_t i = static_cast<size_t>(number); i < versions_.size(); ++i) {
    if (versions_[i].reason() != zbpp::v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE) {
      return false;
    }
  }
  return true;
}

}  // namespace zbpp::coordinator
