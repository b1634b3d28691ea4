#ifndef ZBPP_COORDINATOR_CORE_SCHEDULE_VERSIONS_H_
#define ZBPP_COORDINATOR_CORE_SCHEDULE_VERSIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator {

/// A version's content — schedule, cost model (`costs`) and `predicted`,
/// the schedule simulated under `costs` by its caller (PlanJob for
/// version 1, ResolvePolicy::Decide for a re-solve: no version simulates
/// twice) — without its number, effective step or publish time
/// (ScheduleVersions::Stamp sets those). `previous` (may be null): the
/// schedule it replaces simulated under the same costs, kept as
/// previous_predicted. Pure; thread-safe: re-solves build versions outside
/// the coordinator's mutex.
zbpp::v1::ScheduleVersion BuildVersion(
    const std::string& job_id, const sched::Schedule& schedule,
    const sched::Problem& costs, const sched::SimulationResult& predicted,
    zbpp::v1::ScheduleChangeReason reason, const std::string& detail,
    const sched::SimulationResult* previous);

/// One job's schedule versions (schedule.proto ScheduleVersion), numbered
/// from 1 in publish order, each with its parsed schedule. The version in
/// force at a step is the latest whose effective step is <= it
/// (api/schedule_version.h VersionInForce: of those whose effective step is
/// <= it, the last published); effective steps never decrease with the
/// number (two share one only when a calibration superseded a version no
/// step ran) but for a replicas version (SCHEDULE_CHANGE_REASON_REPLICAS),
/// which takes effect at its attempt's start step and so supersedes every
/// version published before it from that step on; no step mixes two
/// versions.
///
/// Thread-compatible: the owning Job is used under the coordinator's mutex.
class ScheduleVersions {
 public:
  bool empty() const { return versions_.empty(); }
  /// The latest version; requires !empty().
  const zbpp::v1::ScheduleVersion& latest() const { return versions_.back(); }
  /// Version `number` (1-based); requires 1 <= number <= size.
  const zbpp::v1::ScheduleVersion& at(int64_t number) const {
    return versions_[number - 1];
  }
  /// Version `number`; null when the job has no such version.
  const zbpp::v1::ScheduleVersion* Find(int64_t number) const;
  /// The parsed schedule of version `number`; requires that it exists.
  const sched::Schedule& schedule(int64_t number) const { return parsed_.at(number); }

  /// The version in force at `step`; null before the first one's effective
  /// step or without versions.
  const zbpp::v1::ScheduleVersion* InForce(int64_t step) const;

  /// The versions published after the one in force at `step` that take
  /// effect after it, in order: what a worker starting at `step` must hold
  /// besides that one (a version a later one superseded is not among them).
  std::vector<const zbpp::v1::ScheduleVersion*> After(int64_t step) const;

  /// The effective step the next version would get: `start_step` for the
  /// first version; otherwise strictly after every step granted
  /// (`granted`) and after the latest version's effective step, and not
  /// before `start_step`, so no worker can have started its first step
  /// under the old one (worker.proto StepGrant). A `calibration`
  /// (SCHEDULE_CHANGE_REASON_CALIBRATION) published while nothing of the
  /// attempt is granted (`granted` < `start_step`) supersedes the version
  /// in force before it runs: the start step or the latest version's
  /// effective step, whichever is later (schedule.proto, versioning rule).
  /// A `replicas` version (SCHEDULE_CHANGE_REASON_REPLICAS: the next
  /// attempt runs another number of replicas or microbatches,
  /// docs/elastic.md) published while nothing of the attempt is granted
  /// takes effect at `start_step` itself, superseding from there every
  /// version published before it, whatever their effective steps.
  int64_t NextEffectiveStep(int64_t granted, int64_t start_step,
                            bool calibration = false, bool replicas = false) const;

  /// Numbers `version` as the next one and sets its publish time (`now`)
  /// and effective step (NextEffectiveStep; a calibration when its reason
  /// is CALIBRATION, a replicas version when it is REPLICAS). Does not add
  /// it.
  void Stamp(zbpp::v1::ScheduleVersion& version, int64_t granted,
             int64_t start_step, absl::Time now) const;

  /// Adds `version` (stamped by Stamp) with its parsed `schedule`.
  void Add(zbpp::v1::ScheduleVersion version, const sched::Schedule& schedule);

  /// Adds a version loaded from the store, parsing its schedule; Sort()
  /// once all are loaded. Errors of ScheduleFromProto.
  absl::Status Restore(zbpp::v1::ScheduleVersion version);
  /// Puts restored versions in number order.
  void Sort();

  /// True when every version after `number` only switched the validation
  /// mode (reason VALIDATION_MODE): a schedule solved from version `number`
  /// still applies. False when `number` is past the latest version.
  bool OnlyModeChangesSince(int64_t number) const;

 private:
  std::vector<zbpp::v1::ScheduleVersion> versions_;  ///< versions_[i] = i+1.
  std::map<int64_t, sched::Schedule> parsed_;        ///< By version number.
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_SCHEDULE_VERSIONS_H_
