#ifndef ZBPP_COORDINATOR_CORE_SPEC_REFUSAL_H_
#define ZBPP_COORDINATOR_CORE_SPEC_REFUSAL_H_

#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zbpp::coordinator {

/// Why a job spec is refused, as data: the field a user changes and the
/// reason. Every refusal of the spec checks (job_spec_check.h), of planning
/// (planning.h) and of a schedule file (schedule_file.h) is one.
struct SpecRefusal {
  /// Path of the field in zbpp.v1.JobSpec, e.g. "pipeline.microbatches".
  std::string field;
  /// What is wrong with it, e.g. "must be >= 1, got 0".
  std::string reason;
};

/// The payload's type URL (absl::Status::SetPayload): the field, a newline
/// (never part of a field path), the reason.
inline constexpr absl::string_view kSpecRefusalPayload =
    "type.zbpp.dev/zbpp.coordinator.SpecRefusal";

/// InvalidArgument "field: reason" (what a user reads, at the gRPC edge
/// too) carrying `refusal` as its payload. Thread-safe (pure).
absl::Status RefusalStatus(const SpecRefusal& refusal);

/// RefusalStatus({field, StrCat(reason...)}). Thread-safe (pure).
template <typename... Reason>
absl::Status RefuseField(std::string field, const Reason&... reason) {
  return RefusalStatus({std::move(field), absl::StrCat(reason...)});
}

/// The refusal `status` carries (RefusalStatus); nullopt for OK or any
/// other error. Thread-safe (pure).
std::optional<SpecRefusal> SpecRefusalOf(const absl::Status& status);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_SPEC_REFUSAL_H_
