// common/status_grpc.h: codes and messages survive the trip to gRPC and back;
// long messages are cut to fit the grpc-message trailer.
#include "common/status_grpc.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Wire size of a message in the percent-encoded trailer.
std::size_t WireSize(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c >= 0x20 && c <= 0x7e && c != '%') ? 1 : 3;
  return n;
}

class EveryCode : public ::testing::TestWithParam<int> {};

TEST_P(EveryCode, RoundTripKeepsCodeAndMessage) {
  const auto code = static_cast<absl::StatusCode>(GetParam());
  const absl::Status original(code, "stage 2: \"1W3\" before its B (100%)");
  const grpc::Status wire = ToGrpcStatus(original);
  EXPECT_EQ(static_cast<int>(wire.error_code()), GetParam());
  const absl::Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back, original);  // OK's message is empty on both sides.
  if (code != absl::StatusCode::kOk) {
    EXPECT_EQ(wire.error_message(), original.message());
  }
}

TEST_P(EveryCode, FromGrpcKeepsCodeAndMessage) {
  const auto code = static_cast<grpc::StatusCode>(GetParam());
  const grpc::Status wire(code, "from the peer");
  const absl::Status status = FromGrpcStatus(wire);
  EXPECT_EQ(static_cast<int>(status.code()), GetParam());
  if (GetParam() != 0) {
    EXPECT_EQ(status.message(), "from the peer");
  }
}

INSTANTIATE_TEST_SUITE_P(Codes0To16, EveryCode, ::testing::Range(0, 17));

TEST(StatusGrpc, NamedCodesMatch) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                        "late"))
                .code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(StatusGrpc, OkWithAMessageFromGrpcIsOk) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status(grpc::StatusCode::OK, "fine")).ok());
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(StatusGrpc, UnknownAbslCodeBecomesUnknownAndSaysWhich) {
  const absl::Status odd(static_cast<absl::StatusCode>(42), "odd");
  const grpc::Status wire = ToGrpcStatus(odd);
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(wire.error_message(), "[absl code 42] odd");
}

TEST(StatusGrpc, UnknownGrpcCodeBecomesUnknownAndSaysWhich) {
  for (int code : {-1, 17, 99}) {
    const absl::Status status = FromGrpcStatus(
        grpc::Status(static_cast<grpc::StatusCode>(code), "odd"));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnknown) << code;
    EXPECT_EQ(status.message(), "[grpc code " + std::to_string(code) + "] odd");
  }
}

TEST(StatusGrpc, MessageAtTheLimitIsKept) {
  const std::string message(kMaxGrpcStatusMessageBytes, 'a');
  EXPECT_EQ(ToGrpcStatus(absl::InternalError(message)).error_message(),
            message);
}

TEST(StatusGrpc, LongMessageIsTruncatedWithAMarker) {
  const std::string message =
      "bad spec: " + std::string(3 * kMaxGrpcStatusMessageBytes, 'x');
  const grpc::Status wire = ToGrpcStatus(absl::InvalidArgumentError(message));
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(wire.error_message().size(), kMaxGrpcStatusMessageBytes);
  EXPECT_THAT(wire.error_message(), StartsWith("bad spec: xxx"));
  EXPECT_THAT(wire.error_message(),
              EndsWith(std::string(kGrpcStatusTruncationMarker)));
  // And back: the code survives, the message is the truncated one.
  const absl::Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(back.message(), wire.error_message());
}

TEST(StatusGrpc, TruncationCountsPercentEncodedBytes) {
  // '%' and control bytes take 3 bytes on the wire each.
  const std::string message(kMaxGrpcStatusMessageBytes, '%');
  const std::string cut = TruncateGrpcStatusMessage(message);
  EXPECT_LE(WireSize(cut), kMaxGrpcStatusMessageBytes);
  EXPECT_GT(WireSize(cut), kMaxGrpcStatusMessageBytes - 3);
  EXPECT_THAT(cut, EndsWith(std::string(kGrpcStatusTruncationMarker)));
}

TEST(StatusGrpc, TruncationNeverSplitsAUtf8Character) {
  // "é" is 2 bytes (6 on the wire), "€" 3 bytes (9): try every cut phase.
  for (const std::string& unit : {std::string("\xc3\xa9"),
                                  std::string("\xe2\x82\xac")}) {
    for (std::size_t limit = 40; limit < 60; ++limit) {
      std::string message;
      for (int i = 0; i < 100; ++i) message += unit;
      const std::string cut = TruncateGrpcStatusMessage(message, limit);
      EXPECT_LE(WireSize(cut), limit);
      const std::string body =
          cut.substr(0, cut.size() - kGrpcStatusTruncationMarker.size());
      EXPECT_EQ(body.size() % unit.size(), 0u)
          << "limit " << limit << " cut inside a character";
    }
  }
}

TEST(StatusGrpc, TinyLimitKeepsOnlyTheMarker) {
  EXPECT_EQ(TruncateGrpcStatusMessage(std::string(100, 'a'),
                                      kGrpcStatusTruncationMarker.size()),
            kGrpcStatusTruncationMarker);
}

TEST(StatusGrpc, NoMarkerForShortMessages) {
  EXPECT_EQ(TruncateGrpcStatusMessage("short"), "short");
  EXPECT_THAT(TruncateGrpcStatusMessage(""), ::testing::IsEmpty());
  EXPECT_THAT(ToGrpcStatus(absl::NotFoundError("job j-1")).error_message(),
              Not(HasSubstr("truncated")));
}

}  // namespace
}  // namespace zbpp
