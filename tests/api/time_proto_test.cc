// api/time_proto.h: Timestamp <-> absl::Time.

#include "api/time_proto.h"

#include "gtest/gtest.h"

namespace zbpp {
namespace {

TEST(TimeProto, RoundTripKeepsNanoseconds) {
  const absl::Time time = absl::FromUnixSeconds(1700000000) + absl::Nanoseconds(123456789);
  const google::protobuf::Timestamp timestamp = ToTimestamp(time);
  EXPECT_EQ(timestamp.seconds(), 1700000000);
  EXPECT_EQ(timestamp.nanos(), 123456789);
  EXPECT_EQ(FromTimestamp(timestamp), time);
}

TEST(TimeProto, SubNanosecondsAreTruncated) {
  const absl::Time time = absl::FromUnixSeconds(5) + absl::Nanoseconds(7) +
                          absl::Nanoseconds(1) / 4;
  EXPECT_EQ(ToTimestamp(time).nanos(), 7);
}

TEST(TimeProto, AnUnsetTimestampIsInfinitePast) {
  EXPECT_EQ(FromTimestamp(google::protobuf::Timestamp()), absl::InfinitePast());
  google::protobuf::Timestamp only_nanos;
  only_nanos.set_nanos(1);
  EXPECT_EQ(FromTimestamp(only_nanos), absl::UnixEpoch() + absl::Nanoseconds(1));
}

}  // namespace
}  // namespace zbpp
