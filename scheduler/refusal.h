#ifndef ZBPP_SCHEDULER_REFUSAL_H_
#define ZBPP_SCHEDULER_REFUSAL_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace zbpp::sched {

/// The input of a Problem that a generator refuses to serve, carried as
/// data on its error (an absl::Status payload) so that a caller can tell
/// its user which setting to change without reading the message.
enum class RefusedInput {
  kMicrobatches,  ///< Problem::microbatches (e.g. ZB-H2's m >= 2p).
  kChunks,        ///< Problem::chunks (e.g. the V placement's 2).
  kMemoryLimit,   ///< Problem::memory_limit_bytes (a peak above it).
};

/// The payload's type URL (absl::Status::SetPayload); its value is
/// RefusedInputName.
inline constexpr absl::string_view kRefusedInputPayload =
    "type.zbpp.dev/zbpp.sched.RefusedInput";

/// "microbatches", "chunks", "memory_limit". Thread-safe (pure).
inline absl::string_view RefusedInputName(RefusedInput input) {
  switch (input) {
    case RefusedInput::kMicrobatches:
      return "microbatches";
    case RefusedInput::kChunks:
      return "chunks";
    case RefusedInput::kMemoryLimit:
      return "memory_limit";
  }
  return "?";
}

/// An error of `code` with `message` whose payload says it refuses `input`.
/// Thread-safe (pure).
inline absl::Status Refuse(absl::StatusCode code, RefusedInput input,
                           absl::string_view message) {
  absl::Status status(code, message);
  status.SetPayload(kRefusedInputPayload, absl::Cord(RefusedInputName(input)));
  return status;
}

/// The input `status` refuses (Refuse); nullopt for OK or an error that
/// refuses none in particular. Thread-safe (pure).
inline std::optional<RefusedInput> RefusedInputOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kRefusedInputPayload);
  if (!payload.has_value()) return std::nullopt;
  for (RefusedInput input : {RefusedInput::kMicrobatches, RefusedInput::kChunks,
                             RefusedInput::kMemoryLimit}) {
    if (*payload == RefusedInputName(input)) return input;
  }
  return std::nullopt;
}

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_REFUSAL_H_
