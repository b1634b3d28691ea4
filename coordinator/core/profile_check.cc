#include "coordinator/core/profile_check.h"

#include <cmath>
#include <map>
#include <string>
#include <tuple>
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

absl::Status CheckActivationBytes(double bytes, const std::string& field) {
  if (!(bytes > 0) || !std::isfinite(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": must be a finite number of bytes > 0 (a stage holds its forward's "
               "activation until its B), got ", bytes));
  }
  return absl::OkStatus();
}

// One profiled virtual stage's times and memory (MeasureProfile's rules
// from f_seconds on), its fields named under `at`.
absl::Status CheckEntry(const zbpp::v1::VirtualStageProfile& entry, const std::string& at) {
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
  if (absl::Status st = CheckActivationBytes(entry.m_b_bytes(), at + "m_b_bytes"); !st.ok()) {
    return st;
  }
  if (absl::Status st = CheckBytes(entry.m_w_bytes(), at + "m_w_bytes"); !st.ok()) return st;
  if (absl::Status st = CheckBytes(entry.transient_bytes(), at + "transient_bytes"); !st.ok()) {
    return st;
  }
  if (entry.m_w_bytes() > entry.m_b_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(at, "m_w_bytes: ", entry.m_w_bytes(),
                                                   " is above m_b_bytes ", entry.m_b_bytes()));
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
    if (schedule.StageOf(VirtualStage(s)) == Stage(stage)) entry_of[s] = -1;
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
    if (absl::Status st = CheckEntry(entry, at); !st.ok()) return st;
  }
  double pass_seconds = 0;  // F + B + W over the stage's virtual stages.
  for (const auto& [virtual_stage, entry] : entry_of) {
    if (entry < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "virtual_stages: virtual stage ", virtual_stage, " of stage ", stage, " is missing"));
    }
    const zbpp::v1::VirtualStageProfile& e = profile.virtual_stages(entry);
    pass_seconds += e.f_seconds() + e.b_seconds() + e.w_seconds();
    measured.timings.push_back({virtual_stage, e.f_seconds(), e.b_seconds(), e.w_seconds(),
                                std::nullopt, e.bw_seconds()});
    measured.memory.push_back(
        {virtual_stage, e.m_b_bytes(), e.m_w_bytes(), e.transient_bytes()});
  }
  const double step_seconds = schedule.microbatches * pass_seconds;
  if (step_seconds > kMaxReportedSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "virtual_stages: stage ", stage, "'s passes would make a step of ", step_seconds,
        " s (", schedule.microbatches, " microbatches x ", pass_seconds,
        " s of F+B+W), more than the longest step a report may hold (", kMaxReportedSeconds,
        " s)"));
  }
  if (profile.layout_parts_size() != 0 && profile.layout_parts_size() != kLayoutParts) {
    return absl::InvalidArgumentError(absl::StrCat("layout_parts: ", kLayoutParts,
                                                   " entries or none, got ",
                                                   profile.layout_parts_size()));
  }
  for (int k = 0; k < profile.layout_parts_size(); ++k) {
    const zbpp::v1::VirtualStageProfile& part = profile.layout_parts(k);
    const std::string at = absl::StrCat("layout_parts[", k, "].");
    if (part.virtual_stage() != k) {
      return absl::InvalidArgumentError(absl::StrCat(at, "virtual_stage: must be ", k,
                                                     ", got ", part.virtual_stage()));
    }
    if (absl::Status st = CheckEntry(part, at); !st.ok()) return st;
    measured.layout_parts.push_back({part.f_seconds(), part.b_seconds(), part.w_seconds(),
                                     part.m_b_bytes(), part.m_w_bytes(), 0.0,
                                     part.bw_seconds(), part.transient_bytes()});
  }
  if (profile.has_vocabulary() != sched::HoldsVocabularyPasses(schedule)) {
    return absl::InvalidArgumentError(
        profile.has_vocabulary()
            ? "vocabulary: set, but the schedule has no vocabulary passes"
            : "vocabulary: required, the schedule has vocabulary passes (S, T)");
  }
  if (profile.has_vocabulary()) {
    const zbpp::v1::VocabularyCost& v = profile.vocabulary();
    for (const auto& [value, field, positive] :
         {std::tuple{v.s_seconds(), "vocabulary.s_seconds", true},
          std::tuple{v.t_seconds(), "vocabulary.t_seconds", true},
          std::tuple{v.m_bytes(), "vocabulary.m_bytes", false},
          std::tuple{v.transient_bytes(), "vocabulary.transient_bytes", false}}) {
      if (!std::isfinite(value) || value < 0 || (positive && value == 0) ||
          (positive && value > kMaxReportedSeconds)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": must be finite and ", positive ? "> 0 (at most the longest step)" : ">= 0",
            ", got ", value));
      }
    }
    measured.vocabulary =
        sched::VocabularyCost{v.s_seconds(), v.t_seconds(), v.m_bytes(), v.transient_bytes()};
  }
  absl::StatusOr<std::vector<HopTiming>> hops =
      HopTimingsOf(stage, profile.hop_latencies(), schedule);
  if (!hops.ok()) return hops.status();
  measured.hops = *std::move(hops);
  return measured;
}

absl::Status CheckProfileMemory(const zbpp::v1::ReportProfileRequest& profile,
                                double min_m_b_bytes, uint64_t device_memory_bytes) {
  for (const auto& [entries, name] :
       {std::pair{&profile.virtual_stages(), "virtual_stages"},
        std::pair{&profile.layout_parts(), "layout_parts"}}) {
    for (int i = 0; i < entries->size(); ++i) {
      const double m_b = entries->Get(i).m_b_bytes();
      const std::string field = absl::StrCat(name, "[", i, "].m_b_bytes: ");
      if (m_b > static_cast<double>(device_memory_bytes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, m_b, " is more than the worker's device holds (memory_bytes ",
            device_memory_bytes, " as registered)"));
      }
      if (m_b < min_m_b_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, m_b, " is less than the stage's input activation alone (",
            min_m_b_bytes, " bytes: microbatch_size x seq_len x hidden at one byte each)"));
      }
    }
  }
  return absl::OkStatus();
}

double ActivationFloorBytes(const zbpp::v1::JobSpec& spec) {
  return static_cast<double>(spec.pipeline().microbatch_size()) * spec.model().seq_len() *
         spec.model().hidden();
}

}  // namespace zbpp::coordinator
