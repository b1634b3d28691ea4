#include "api/time_proto.h"

#include <cstdint>

namespace zbpp {

google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  google::protobuf::Timestamp timestamp;
  const int64_t nanos = absl::ToUnixNanos(time);
  timestamp.set_seconds(nanos / 1000000000);
  timestamp.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return timestamp;
}

absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp) {
  if (timestamp.seconds() == 0 && timestamp.nanos() == 0) {
    return absl::InfinitePast();
  }
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

}  // namespace zbpp
