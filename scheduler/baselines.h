#ifndef ZBPP_SCHEDULER_BASELINES_H_
#define ZBPP_SCHEDULER_BASELINES_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// GPipe, 1F1B and interleaved 1F1B run fused BW passes only (T_BW each,
/// VirtualStageCost::bw_seconds): there is no pair to merge.
///
/// GPipe: every stage runs all m forwards, then all m fused backwards in
/// the same microbatch order. Peak activation memory m·M_B. Needs v == 1.
absl::StatusOr<Schedule> GenerateGPipe(const Problem& problem);

/// 1F1B (PipeDream-flush): stage r runs min(p-r, m) forwards, then
/// alternates one fused backward and one forward, then drains the
/// backwards. Bubble (p-1)(T_F+T_B+T_W) for uniform costs and no
/// communication; peak min(p-r, m)·M_B on stage r. Needs v == 1.
absl::StatusOr<Schedule> Generate1F1B(const Problem& problem);

/// Interleaved 1F1B (Narayanan et al., SC'21, Megatron-LM) with v >= 2
/// chunks per stage, virtual stage s on stage s mod p. Microbatches go
/// through the chunks in groups of p; stage r warms up with
/// (p-r-1)·2 + (v-1)·p forwards. Bubble (p-1)(T_F+T_B+T_W)/v for uniform
/// costs. Errors: InvalidArgument when v < 2 or m is not a multiple of p
/// (the grouping needs whole groups).
absl::StatusOr<Schedule> GenerateInterleaved1F1B(const Problem& problem);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_BASELINES_H_
