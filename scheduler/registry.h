#ifndef ZBPP_SCHEDULER_REGISTRY_H_
#define ZBPP_SCHEDULER_REGISTRY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// What callers need to know about a named schedule before building its
/// problem: how many chunks, where they live, and its memory limit.
struct ScheduleTraits {
  std::string name;      ///< e.g. "zb-h1".
  int default_chunks;    ///< v used when the caller does not choose.
  bool chunks_fixed;     ///< True when only `default_chunks` is accepted.
  Placement placement;   ///< Where virtual stages live.
  /// True when the generator takes the memory limit as an input (the
  /// automatic solver); false when its memory follows from its shape and a
  /// limit is only checked.
  bool limit_is_input;
  /// The schedule's own limit per stage in units of M_B for p stages and
  /// m microbatches (e.g. ZB-2p: 2p); +infinity for none.
  double (*default_limit_m_b)(int stages, int microbatches);
};

/// Every schedule name, in the order `zbpp-sched compare` lists them:
/// gpipe 1f1b 1f1b-interleaved zb-h1 zb-h2 zb-1p zb-2p zb-auto zb-v v-half
/// v-min dualpipe-v.
const std::vector<ScheduleTraits>& AllSchedules();

/// Traits of `name`. NotFound listing the known names otherwise.
absl::StatusOr<ScheduleTraits> FindSchedule(std::string_view name);

/// Bytes of one M_B unit on each stage for `problem` under `placement`:
/// the sum of M_B over the virtual stages the stage holds. Size p.
std::vector<double> MbUnitBytes(const Problem& problem, Placement placement);

/// Builds the schedule `name` for `problem` (whose chunks must suit the
/// schedule). When `problem.memory_limit_bytes` is set, a schedule whose
/// shape needs more (1F1B, ZB-H1, ...) is refused with ResourceExhausted
/// naming the need and the limit; the solver-based ones plan within it.
/// Errors: NotFound for an unknown name, InvalidArgument for a problem the
/// generator cannot serve (saying why), ResourceExhausted as above; a
/// refusal of the problem's microbatches, chunks or memory limit says which
/// as data (RefusedInputOf, scheduler/refusal.h).
absl::StatusOr<Schedule> Generate(std::string_view name,
                                  const Problem& problem);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_REGISTRY_H_
