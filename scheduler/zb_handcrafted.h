#ifndef ZBPP_SCHEDULER_ZB_HANDCRAFTED_H_
#define ZBPP_SCHEDULER_ZB_HANDCRAFTED_H_

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// ZB-H1 (Zero Bubble paper §2.1, Figure 3 top): 1F1B's warm-up (stage r
/// runs p-r forwards), with B and W split and stage r's W lagging its B by
/// r microbatches so that the W's fill the cool-down. Bubble
/// (p-1)(T_F+T_B-T_W) for uniform costs with T_W <= T_F+T_B and no
/// communication; peak p·M_B, like 1F1B. Needs v == 1; any m >= 1.
/// Merged pairs (MergesWithNext): stage 0's W lags by nothing, so its m
/// pairs run merged at T_BW; every other stage's W lags, none merges.
absl::StatusOr<Schedule> GenerateZbH1(const Problem& problem);

/// ZB-H2 (paper §2.1, Figure 3 bottom): stage r warms up with
/// 2(p-1-r)+1 forwards and lets W lag B by 2r microbatches, filling the
/// warm-up bubble too. Bubble (p-1)(T_F+T_B-2T_W) for uniform costs with
/// 2T_W <= T_F+T_B and no communication; peak (2p-1)·M_B. Needs v == 1.
/// Merged pairs: stage 0's m, as in ZB-H1.
/// Errors: InvalidArgument when m < 2p (the warm-up alone takes 2p-1
/// microbatches and the steady state needs at least one more).
absl::StatusOr<Schedule> GenerateZbH2(const Problem& problem);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_ZB_HANDCRAFTED_H_
