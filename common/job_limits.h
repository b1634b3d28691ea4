// Limits of a job spec that both zbppctl and the coordinator apply.

#ifndef ZBPP_COMMON_JOB_LIMITS_H_
#define ZBPP_COMMON_JOB_LIMITS_H_

#include <cstddef>

namespace zbpp {

/// Most bytes of SchedulePolicy.file_text (a schedule file carried in a job
/// spec): 3 MiB, so that a SubmitJobRequest stays under gRPC's default
/// 4 MiB receive limit. A PyTorch CSV of p = 32, m = 128, v = 2 with its
/// SEND/RECV actions is about 0.5 MiB.
inline constexpr size_t kMaxScheduleFileBytes = size_t{3} << 20;

}  // namespace zbpp

#endif  // ZBPP_COMMON_JOB_LIMITS_H_
