#include "scheduler/zb_handcrafted.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/refusal.h"

namespace zbpp::sched {
namespace {

// Stage s of a handcrafted zero-bubble schedule: `warmup` forwards, then
// for each microbatch its B, the W that lags it by `lag`, and the next F;
// the W's still owed run at the end, filling the cool-down.
std::vector<Action> SplitOrder(Stage s, int m, int warmup, int lag) {
  const VirtualStage v(s.value());  // One chunk: virtual stage s on stage s.
  std::vector<Action> list;
  int next_f = 0, next_w = 0;
  while (next_f < std::min(warmup, m)) list.push_back({PassKind::kF, v, next_f++});
  for (int mb = 0; mb < m; ++mb) {
    list.push_back({PassKind::kB, v, mb});
    if (mb - next_w >= lag) list.push_back({PassKind::kW, v, next_w++});
    if (next_f < m) list.push_back({PassKind::kF, v, next_f++});
  }
  while (next_w < m) list.push_back({PassKind::kW, v, next_w++});
  return list;
}

absl::StatusOr<Schedule> Build(const Problem& problem, const char* name,
                               int (*warmup)(int p, int s),
                               int (*lag)(int p, int s)) {
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
  for (const Stage s : schedule.AllStages()) {
    schedule.actions.push_back(
        SplitOrder(s, problem.microbatches, warmup(p, s.value()), lag(p, s.value())));
  }
  return schedule;
}

}  // namespace

absl::StatusOr<Schedule> GenerateZbH1(const Problem& problem) {
  return Build(
      problem, "zb-h1", [](int p, int s) { return p - s; },
      [](int, int s) { return s; });
}

absl::StatusOr<Schedule> GenerateZbH2(const Problem& problem) {
  if (problem.microbatches < 2 * problem.stages) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kMicrobatches,
                  absl::StrCat("zb-h2 needs microbatches >= 2 * stages (", 2 * problem.stages,
                               "): its warm-up alone takes 2p-1; got ",
                               problem.microbatches));
  }
  return Build(
      problem, "zb-h2", [](int p, int s) { return 2 * (p - 1 - s) + 1; },
      [](int, int s) { return 2 * s; });
}

}  // namespace zbpp::sched
