#include "coordinator/core/spec_refusal.h"

#include "absl/strings/cord.h"

namespace zbpp::coordinator {

absl::Status RefusalStatus(const SpecRefusal& refusal) {
  absl::Status status = absl::InvalidArgumentError(
      absl::StrCat(refusal.field, ": ", refusal.reason));
  status.SetPayload(kSpecRefusalPayload,
                    absl::Cord(absl::StrCat(refusal.field, "\n", refusal.reason)));
  return status;
}

std::optional<SpecRefusal> SpecRefusalOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kSpecRefusalPayload);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return std::nullopt;
  return SpecRefusal{text.substr(0, newline), text.substr(newline + 1)};
}

}  // namespace zbpp::coordinator
