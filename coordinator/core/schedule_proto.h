// Moved to common/schedule_proto.h (namespace zbpp, library
// zbpp_schedule_proto). This header only forwards, for
// bench/coordinator_load_bench.cc, which is being written; delete it once
// that includes common/schedule_proto.h instead.

#ifndef ZBPP_COORDINATOR_CORE_SCHEDULE_PROTO_H_
#define ZBPP_COORDINATOR_CORE_SCHEDULE_PROTO_H_

#include "common/schedule_proto.h"

#endif  // ZBPP_COORDINATOR_CORE_SCHEDULE_PROTO_H_
