#include "scheduler/zb_v.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "scheduler/refusal.h"
#include "scheduler/registry.h"
#include "scheduler/zb_auto.h"

namespace zbpp::sched {
namespace {

const char* NameOf(VShape shape) {
  switch (shape) {
    case VShape::kZbV:
      return "zb-v";
    case VShape::kHalf:
      return "v-half";
    case VShape::kMin:
      return "v-min";
  }
  return "v";
}

}  // namespace

double VShapeLimitMb(VShape shape, int stages) {
  if (stages <= 0) return 0;
  switch (shape) {
    case VShape::kZbV:
      return stages;
    case VShape::kHalf:
      return (stages + 2) / 2;
    case VShape::kMin:
      return (stages + 4) / 3;
  }
  return stages;
}

absl::StatusOr<Schedule> GenerateVSchedule(const Problem& problem,
                                           VShape shape) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (problem.chunks != 2) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat(NameOf(shape), " needs chunks = 2 (the V placement), got ",
                               problem.chunks));
  }
  // One machinery for the three shapes: the solver with the V placement,
  // under the shape's limit. Which schedule comes out (the list
  // scheduler's ZB-V, a building block of pace 1 or 2, refined) follows
  // from the limit.
  Problem limited = problem;
  if (limited.memory_limit_bytes.empty()) {
    limited.memory_limit_bytes = MbUnitBytes(problem, Placement::kV);
    for (double& bytes : limited.memory_limit_bytes) {
      bytes *= VShapeLimitMb(shape, problem.stages);
    }
  }
  AutoSolverOptions options;
  options.placement = Placement::kV;
  absl::StatusOr<Schedule> schedule = SolveZeroBubble(limited, options);
  if (!schedule.ok()) return schedule.status();
  schedule->name = NameOf(shape);
  return schedule;
}

}  // namespace zbpp::sched
