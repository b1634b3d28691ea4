#include "coordinator/core/profile_check.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/core/step_report_check.h"

namespace zbpp::coordinator {
namespace {

absl::Status CheckPassTime(double seconds, const std::string& field) {
  if (!(seconds > 0) || !(seconds <= kMaxReportedSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be a finite time in (0, ", kMaxReportedSeconds, "] s, got ", seconds));
  }
  return absl::OkStatus();
}

absl::Status CheckBytes(double bytes, const std::string& field) {
  if (!(bytes >= 0) || !std::isfinite(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be a finite number of bytes >= 0, got ", bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MeasuredProfile> MeasureProfile(const zbpp::v1::ReportProfileRequest& profile,
                                               const sched::Schedule& schedule, int stage,
                                               int replica, int replicas) {
  if (profile.stage() != stage) {
    return absl::InvalidArgumentError(absl::StrCat("stage: worker ", profile.worker_id(),
                                                   " runs stage ", stage, ", not ",
                                                   profile.stage()));
  }
  if (profile.replica() < 0 || profile.replica() >= replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", profile.replica(), " is not in [0, ", replicas,
                     ") (pipeline.data_parallel = ", replicas, ")"));
  }
  if (profile.replica() != replica) {
    return absl::InvalidArgumentError(absl::StrCat("replica: worker ", profile.worker_id(),
                                                   " runs replica ", replica, ", not ",
                                                   profile.replica()));
  }
  if (profile.repetitions() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetitions: must be >= 1, got ", profile.repetitions()));
  }
  std::map<int, int> entry_of;  // The stage's virtual stages -> entry, -1 for none yet.
  for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
    if (schedule.stage_of[s] == stage) entry_of[s] = -1;
  }
  MeasuredProfile measured;
  for (int i = 0; i < profile.virtual_stages_size(); ++i) {
    const zbpp::v1::VirtualStageProfile& entry = profile.virtual_stages(i);
    const std::string at = absl::StrCat("virtual_stages[", i, "].");
    auto it = entry_of.find(entry.virtual_stage());
    if (it == entry_of.end()) {
      return absl::InvalidArgumentError(absl::StrCat(at, "virtual_stage: ",
                                                     entry.virtual_stage(),
                                                     " is not a virtual stage of stage ", stage));
    }
    if (it->second >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(at, "virtual_stage: ",
                                                     entry.virtual_stage(),
                                                     " repeats virtual_stages[", it->second, "]"));
    }
    it->second = i;
    for (auto [seconds, name] : {std::pair{entry.f_seconds(), "f_seconds"},
                                 std::pair{entry.b_seconds(), "b_seconds"},
                                 std::pair{entry.w_seconds(), "w_seconds"}}) {
      if (absl::Status st = CheckPassTime(seconds, at + name); !st.ok()) return st;
    }
    // T_BW is optional (0: not measured).
    if (entry.bw_seconds() != 0) {
      if (absl::Status st = CheckPassTime(entry.bw_seconds(), at + "bw_seconds"); !st.ok()) {
        return st;
      }
    }
    if (absl::Status st = CheckBytes(entry.m_b_bytes(), at + "m_b_bytes"); !st.ok()) return st;
    if (absl::Status st = CheckBytes(entry.m_w_bytes(), at + "m_w_bytes"); !st.ok()) return st;
    if (entry.m_w_bytes() > entry.m_b_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(at, "m_w_bytes: ", entry.m_w_bytes(),
                                                     " is above m_b_bytes ",
                                                     entry.m_b_bytes()));
    }
  }
  for (const auto& [virtual_stage, entry] : entry_of) {
    if (entry < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "virtual_stages: virtual stage ", virtual_stage, " of stage ", stage, " is missing"));
    }
    const zbpp::v1::VirtualStageProfile& e = profile.virtual_stages(entry);
    measured.timings.push_back({virtual_stage, e.f_seconds(), e.b_seconds(), e.w_seconds(),
                                std::nullopt, e.bw_seconds()});
    measured.memory.push_back({virtual_stage, e.m_b_bytes(), e.m_w_bytes()});
  }
  absl::StatusOr<std::vector<HopTiming>> hops =
      HopTimingsOf(stage, profile.hop_latencies(), schedule);
  if (!hops.ok()) return hops.status();
  measured.hops = *std::move(hops);
  return measured;
}

}  // namespace zbpp::coordinator
