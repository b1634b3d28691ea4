// google.protobuf.Timestamp <-> absl::Time, for the API's time fields
// (Job.create_time, ScheduleVersion.publish_time, ...): the coordinator
// writes them, zbppctl and the benchmarks read them.

#ifndef ZBPP_API_TIME_PROTO_H_
#define ZBPP_API_TIME_PROTO_H_

#include <google/protobuf/timestamp.pb.h>

#include "absl/time/time.h"

namespace zbpp {

/// `time` as a Timestamp, truncated to whole nanoseconds. Meant for times
/// after the Unix epoch (nanos is then in [0, 1e9)). Pure; thread-safe.
google::protobuf::Timestamp ToTimestamp(absl::Time time);

/// Inverse of ToTimestamp. An unset Timestamp (seconds and nanos both 0)
/// reads as absl::InfinitePast(): "never", not 1970. Pure; thread-safe.
absl::Time FromTimestamp(const google::protobuf::Timestamp& timestamp);

}  // namespace zbpp

#endif  // ZBPP_API_TIME_PROTO_H_
