// Which schedule version is in force at an optimizer step: one rule for the
// coordinator (assignments, step reports) and the worker (the version each
// granted step runs).

#ifndef ZBPP_API_SCHEDULE_VERSION_H_
#define ZBPP_API_SCHEDULE_VERSION_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "zbpp/v1/schedule.pb.h"

namespace zbpp {
namespace internal {

inline const v1::ScheduleVersion& AsVersion(const v1::ScheduleVersion& version) {
  return version;
}
template <typename Key>
const v1::ScheduleVersion& AsVersion(const std::pair<const Key, v1::ScheduleVersion>& entry) {
  return entry.second;
}
template <typename Key>
const v1::ScheduleVersion& AsVersion(
    const std::pair<const Key, std::shared_ptr<const v1::ScheduleVersion>>& entry) {
  return *entry.second;
}

}  // namespace internal

/// The version in force at `step`: of `versions`, in publication order (a
/// container of v1::ScheduleVersion, or a map from version number to it or
/// to a shared pointer to it), the last one whose `effective_step` is <=
/// `step`. A version stays in force until the next one's effective step, so
/// that every worker switches at the same step boundary; of versions sharing
/// an effective step (a CALIBRATION version published at the start step
/// after the first plan) the later wins. nullptr when none is (nothing published, or `step` before the
/// first effective step). The pointer is into `versions`. Pure.
template <typename Versions>
const v1::ScheduleVersion* VersionInForce(const Versions& versions, int64_t step) {
  const v1::ScheduleVersion* found = nullptr;
  for (const auto& entry : versions) {
    const v1::ScheduleVersion& version = internal::AsVersion(entry);
    if (version.effective_step() <= step) found = &version;
  }
  return found;
}

}  // namespace zbpp

#endif  // ZBPP_API_SCHEDULE_VERSION_H_
