#include "scheduler/baselines.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/refusal.h"

namespace zbpp::sched {
namespace {

absl::Status NeedOneChunk(const Problem& problem, const char* name) {
  if (problem.chunks != 1) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat(name, " needs chunks = 1, got ", problem.chunks));
  }
  return problem.Validate();
}

Schedule Empty(const Problem& problem, const char* name) {
  Schedule schedule;
  schedule.name = name;
  schedule.stages = problem.stages;
  schedule.chunks = problem.chunks;
  schedule.microbatches = problem.microbatches;
  schedule.stage_of =
      PlaceVirtualStages(Placement::kLoop, problem.stages, problem.chunks);
  schedule.actions.resize(problem.stages);
  return schedule;
}

}  // namespace

absl::StatusOr<Schedule> GenerateGPipe(const Problem& problem) {
  if (absl::Status st = NeedOneChunk(problem, "gpipe"); !st.ok()) return st;
  Schedule schedule = Empty(problem, "gpipe");
  for (const Stage s : schedule.AllStages()) {
    auto& list = schedule.ActionsOf(s);
    const VirtualStage v(s.value());  // One chunk: virtual stage s on stage s.
    for (int mb = 0; mb < problem.microbatches; ++mb) {
      list.push_back({PassKind::kF, v, mb});
    }
    for (int mb = 0; mb < problem.microbatches; ++mb) {
      list.push_back({PassKind::kBW, v, mb});
    }
  }
  return schedule;
}

absl::StatusOr<Schedule> Generate1F1B(const Problem& problem) {
  if (absl::Status st = NeedOneChunk(problem, "1f1b"); !st.ok()) return st;
  Schedule schedule = Empty(problem, "1f1b");
  const int p = problem.stages, m = problem.microbatches;
  for (const Stage s : schedule.AllStages()) {
    auto& list = schedule.ActionsOf(s);
    const VirtualStage v(s.value());  // One chunk: virtual stage s on stage s.
    const int warmup = std::min(p - s.value(), m);
    int next_f = 0;
    while (next_f < warmup) list.push_back({PassKind::kF, v, next_f++});
    for (int mb = 0; mb < m; ++mb) {
      list.push_back({PassKind::kBW, v, mb});
      if (next_f < m) list.push_back({PassKind::kF, v, next_f++});
    }
  }
  return schedule;
}

absl::StatusOr<Schedule> GenerateInterleaved1F1B(const Problem& problem) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  const int p = problem.stages, v = problem.chunks, m = problem.microbatches;
  if (v < 2) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat("1f1b-interleaved needs chunks >= 2, got ", v, " (use 1f1b)"));
  }
  if (m % p != 0) {
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kMicrobatches,
                  absl::StrCat("1f1b-interleaved needs microbatches to be a multiple of "
                               "stages (", p, "), got ", m));
  }
  Schedule schedule = Empty(problem, "1f1b-interleaved");
  // The k-th forward (or backward) of a stage: microbatches advance in
  // groups of p through chunk 0, then chunk 1, ...; backwards visit the
  // chunks in reverse.
  const int total = m * v;
  // Loop placement: chunk c of stage s is virtual stage c·p + s.
  auto forward = [&](Stage s, int k) {
    const int group = k / (p * v);
    const int chunk = (k / p) % v;
    return Action{PassKind::kF, VirtualStage(chunk * p + s.value()), group * p + k % p};
  };
  auto backward = [&](Stage s, int k) {
    const int group = k / (p * v);
    const int chunk = v - 1 - (k / p) % v;
    return Action{PassKind::kBW, VirtualStage(chunk * p + s.value()), group * p + k % p};
  };
  for (const Stage s : schedule.AllStages()) {
    auto& list = schedule.ActionsOf(s);
    const int warmup = std::min((p - s.value() - 1) * 2 + (v - 1) * p, total);
    int next_f = 0, next_b = 0;
    while (next_f < warmup) list.push_back(forward(s, next_f++));
    while (next_b < total) {
      if (next_f < total) list.push_back(forward(s, next_f++));
      list.push_back(backward(s, next_b++));
    }
  }
  return schedule;
}

}  // namespace zbpp::sched
