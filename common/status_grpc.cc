#include "common/status_grpc.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace zbpp {
namespace {

// Both libraries number the canonical codes of google.rpc.Code; a code is
// converted by value, so every pair must agree. The table also lists every
// code once, in order, so that "in range" below means "canonical".
struct CodePair {
  absl::StatusCode absl_code;
  grpc::StatusCode grpc_code;
};

constexpr CodePair kCodePairs[] = {
    {absl::StatusCode::kOk, grpc::StatusCode::OK},
    {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
    {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
    {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {absl::StatusCode::kDeadlineExceeded,
     grpc::StatusCode::DEADLINE_EXCEEDED},
    {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
    {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
    {absl::StatusCode::kPermissionDenied,
     grpc::StatusCode::PERMISSION_DENIED},
    {absl::StatusCode::kResourceExhausted,
     grpc::StatusCode::RESOURCE_EXHAUSTED},
    {absl::StatusCode::kFailedPrecondition,
     grpc::StatusCode::FAILED_PRECONDITION},
    {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
    {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
    {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
    {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
    {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
    {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
    {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
};

constexpr int kNumCodes = sizeof(kCodePairs) / sizeof(kCodePairs[0]);

constexpr bool CodePairsAgree() {
  for (int i = 0; i < kNumCodes; ++i) {
    if (static_cast<int>(kCodePairs[i].absl_code) != i ||
        static_cast<int>(kCodePairs[i].grpc_code) != i) {
      return false;
    }
  }
  return true;
}

static_assert(kNumCodes == 17, "google.rpc.Code has 17 canonical codes");
static_assert(CodePairsAgree(),
              "absl::StatusCode and grpc::StatusCode numbering differ");

bool IsCanonical(int code) { return code >= 0 && code < kNumCodes; }

// Bytes `c` takes in the percent-encoded grpc-message trailer (gRPC's
// "unreserved" set is printable ASCII except '%').
std::size_t WireBytes(unsigned char c) {
  return (c >= 0x20 && c <= 0x7e && c != '%') ? 1 : 3;
}

}  // namespace

std::string TruncateGrpcStatusMessage(std::string_view message,
                                      std::size_t max_wire_bytes) {
  std::size_t total = 0;
  for (unsigned char c : message) total += WireBytes(c);
  if (total <= max_wire_bytes) return std::string(message);

  const std::size_t budget =
      max_wire_bytes > kGrpcStatusTruncationMarker.size()
          ? max_wire_bytes - kGrpcStatusTruncationMarker.size()
          : 0;
  std::size_t cut = 0;
  std::size_t used = 0;
  while (cut < message.size() &&
         used + WireBytes(message[cut]) <= budget) {
    used += WireBytes(message[cut]);
    ++cut;
  }
  // Never leave half a UTF-8 character: back up over continuation bytes
  // (10xxxxxx) and the lead byte they belong to.
  if (cut < message.size() &&
      (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) {
    while (cut > 0 &&
           (static_cast<unsigned char>(message[cut - 1]) & 0xC0) == 0x80) {
      --cut;
    }
    if (cut > 0) --cut;  // The lead byte.
  }
  std::string out(message.substr(0, cut));
  out.append(kGrpcStatusTruncationMarker);
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // raw_code(): code() already maps a non-canonical value to kUnknown,
  // which would lose the value we report.
  const int code = status.raw_code();
  // Debian's Abseil has its own string_view, not std::string_view.
  const std::string_view message(status.message().data(),
                                 status.message().size());
  if (!IsCanonical(code)) {
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        TruncateGrpcStatusMessage(absl::StrCat(
                            "[absl code ", code, "] ", status.message())));
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code),
                      TruncateGrpcStatusMessage(message));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  if (!IsCanonical(code)) {
    return absl::UnknownError(
        absl::StrCat("[grpc code ", code, "] ", status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      status.error_message());
}

}  // namespace zbpp
