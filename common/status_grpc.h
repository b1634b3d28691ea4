#ifndef ZBPP_COMMON_STATUS_GRPC_H_
#define ZBPP_COMMON_STATUS_GRPC_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

// The single converter between absl::Status (everything inside zbpp) and
// grpc::Status (the RPC edge): converted there and nowhere else. This is
// the only header in common/ that includes grpcpp: the coordinator core and
// other gRPC-free code must not include it.

namespace zbpp {

/// Longest status message `ToGrpcStatus` sends, in bytes as they go on the
/// wire, the truncation marker included. gRPC carries the message in the
/// `grpc-message` trailer, percent-encoded (a byte outside printable ASCII,
/// or '%', takes 3 bytes), and a trailer above the peer's metadata limit
/// (8 KiB by default) fails the whole call and hides the real error.
inline constexpr std::size_t kMaxGrpcStatusMessageBytes = 4096;

/// Appended to a message that `TruncateGrpcStatusMessage` shortened.
inline constexpr std::string_view kGrpcStatusTruncationMarker =
    " [... truncated]";

/// `message` unchanged when its wire size (see kMaxGrpcStatusMessageBytes)
/// is at most `max_wire_bytes`; otherwise its longest prefix that, followed
/// by kGrpcStatusTruncationMarker, fits, cut at a UTF-8 character boundary.
/// `max_wire_bytes` must be at least the marker's size. Thread-safe (pure).
std::string TruncateGrpcStatusMessage(
    std::string_view message,
    std::size_t max_wire_bytes = kMaxGrpcStatusMessageBytes);

/// `status` as a grpc::Status with the same code (absl and gRPC number the
/// canonical codes alike, checked at compile time in status_grpc.cc) and
/// its message truncated by TruncateGrpcStatusMessage. A code outside the
/// canonical 0..16 becomes UNKNOWN, with "[absl code N] " before the
/// message. Payloads are dropped. OK maps to grpc::Status::OK.
/// Thread-safe (pure).
grpc::Status ToGrpcStatus(const absl::Status& status);

/// `status` as an absl::Status with the same code and message. A code
/// outside the canonical 0..16 (e.g. grpc::StatusCode::DO_NOT_USE) becomes
/// kUnknown, with "[grpc code N] " before the message. OK becomes
/// absl::OkStatus() (whose message is always empty); error details are
/// dropped. Thread-safe (pure).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace zbpp

#endif  // ZBPP_COMMON_STATUS_GRPC_H_
