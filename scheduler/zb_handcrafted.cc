#include "scheduler/zb_handcrafted.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/refusal.h"

namespace zbpp::sched {
namespace {

// Stage r of a handcrafted zero-bubble schedule: `warmup` forwards, then
// for each microbatch its B, the W that lags it by `lag`, and the next F;
// the W's still owed run at the end, filling the cool-down.
std::vector<Action> SplitOrder(int r, int m, int warmup, int lag) {
  std::vector<Action> list;
  int next_f = 0, next_w = 0;
  while (next_f < std::min(warmup, m)) list.push_back({PassKind::kF, r, next_f++});
  for (int mb = 0; mb < m; ++mb) {
    list.push_back({PassKind::kB, r, mb});
    if (mb - next_w >= lag) list.push_back({PassKind::kW, r, next_w++});
    if (next_f < m) list.push_back({PassKind::kF, r, next_f++});
  }
  while (next_w < m) list.push_back({PassKind::kW, r, next_w++});
  return list;
}

absl::StatusOr<Schedule> Build(const Problem& problem, const char* name,
                               int (*warmup)(int p, int r),
                               int (*lag)(int p, int r)) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (problem.chunks != 1) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat(name, " needs chunks = 1, got ", problem.chunks));
  }
  const int p = problem.stages;
  Schedule schedule;
  schedule.name = name;
  schedule.stages = p;
  schedule.chunks = 1;
  schedule.microbatches = problem.microbatches;
  schedule.stage_of = PlaceVirtualStages(Placement::kLoop, p, 1);
  for (int r = 0; r < p; ++r) {
    schedule.actions.push_back(
        SplitOrder(r, problem.microbatches, warmup(p, r), lag(p, r)));
  }
  return schedule;
}

}  // namespace

absl::StatusOr<Schedule> GenerateZbH1(const Problem& problem) {
  return Build(
      problem, "zb-h1", [](int p, int r) { return p - r; },
      [](int, int r) { return r; });
}

absl::StatusOr<Schedule> GenerateZbH2(const Problem& problem) {
  if (problem.microbatches < 2 * problem.stages) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kMicrobatches,
                  absl::StrCat("zb-h2 needs microbatches >= 2 * stages (", 2 * problem.stages,
                               "): its warm-up alone takes 2p-1; got ",
                               problem.microbatches));
  }
  return Build(
      problem, "zb-h2", [](int p, int r) { return 2 * (p - 1 - r) + 1; },
      [](int, int r) { return 2 * r; });
}

}  // namespace zbpp::sched
