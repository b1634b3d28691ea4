#include "scheduler/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zbpp::sched {
namespace {

constexpr double kNotDone = -1.0;

// Flat index of (stage, microbatch).
struct Index {
  int m;
  int operator()(int stage, int microbatch) const {
    return stage * m + microbatch;
  }
};

std::string Where(int worker, size_t position, const Action& action) {
  return absl::StrCat("worker ", worker, ", action #", position, " (",
                      ActionToString(action), ")");
}

double Duration(const StageCost& c, PassKind kind) {
  switch (kind) {
    case PassKind::kF:
      return c.f_seconds;
    case PassKind::kB:
      return c.b_seconds;
    case PassKind::kW:
      return c.w_seconds;
    case PassKind::kBW:
      return c.b_seconds + c.w_seconds;
  }
  return 0;
}

}  // namespace

absl::Status CheckSchedule(const Problem& problem, const Schedule& schedule) {
  if (schedule.workers != problem.workers ||
      schedule.chunks != problem.chunks ||
      schedule.microbatches != problem.microbatches) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule is for p=", schedule.workers, " v=", schedule.chunks,
        " m=", schedule.microbatches, " but the problem has p=",
        problem.workers, " v=", problem.chunks, " m=", problem.microbatches));
  }
  const int num_stages = problem.num_stages();
  const int m = problem.microbatches;
  if (static_cast<int>(schedule.worker_of_stage.size()) != num_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_of_stage must have ", num_stages,
                     " entries, got ", schedule.worker_of_stage.size()));
  }
  for (int s = 0; s < num_stages; ++s) {
    const int w = schedule.worker_of_stage[s];
    if (w < 0 || w >= problem.workers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker_of_stage[", s, "] = ", w, " is not a worker in [0, ",
          problem.workers, ")"));
    }
  }
  if (static_cast<int>(schedule.actions.size()) != problem.workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("actions must have one list per worker (",
                     problem.workers, "), got ", schedule.actions.size()));
  }
  // Every (stage, microbatch) needs an F and a B or BW, so a schedule with
  // fewer actions than pairs is incomplete. Checked before the tables of
  // num_stages * m entries below, so that one huge microbatch number (an
  // imported "0F399999992") is refused instead of allocating gigabytes
  // (found by tests/fuzz/schedule_io_fuzz).
  size_t total_actions = 0;
  for (const auto& list : schedule.actions) total_actions += list.size();
  const int64_t pairs = int64_t{num_stages} * m;
  if (pairs > static_cast<int64_t>(total_actions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule has ", total_actions, " actions, too few for its ", pairs,
        " (stage, microbatch) pairs"));
  }
  // Position of each pass in its worker's list, -1 when absent.
  const Index at{m};
  std::vector<int> f_pos(num_stages * m, -1), b_pos(num_stages * m, -1),
      w_pos(num_stages * m, -1);
  std::vector<char> fused(num_stages * m, 0);
  for (int w = 0; w < problem.workers; ++w) {
    const auto& list = schedule.actions[w];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.stage < 0 || a.stage >= num_stages) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(w, i, a), ": stage out of range [0, ",
                         num_stages, ")"));
      }
      if (a.microbatch < 0 || a.microbatch >= m) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, i, a), ": microbatch out of range [0, ", m, ")"));
      }
      if (schedule.worker_of_stage[a.stage] != w) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, i, a), ": stage ", a.stage, " is held by worker ",
            schedule.worker_of_stage[a.stage]));
      }
      const int k = at(a.stage, a.microbatch);
      int* slot = a.kind == PassKind::kF   ? &f_pos[k]
                  : a.kind == PassKind::kW ? &w_pos[k]
                                           : &b_pos[k];
      if (*slot >= 0 || (a.kind == PassKind::kW && fused[k]) ||
          (a.kind == PassKind::kBW && w_pos[k] >= 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(w, i, a), ": duplicate pass"));
      }
      *slot = static_cast<int>(i);
      if (a.kind == PassKind::kBW) fused[k] = 1;
    }
  }
  for (int s = 0; s < num_stages; ++s) {
    const int w = schedule.worker_of_stage[s];
    for (int mb = 0; mb < m; ++mb) {
      const int k = at(s, mb);
      if (f_pos[k] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "worker ", w, ": missing F of stage ", s, " microbatch ", mb));
      }
      if (b_pos[k] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("worker ", w, ": missing B of stage ", s,
                         " microbatch ", mb));
      }
      if (!fused[k] && w_pos[k] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("worker ", w, ": missing W of stage ", s,
                         " microbatch ", mb));
      }
      const auto& list = schedule.actions[w];
      if (b_pos[k] < f_pos[k]) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, b_pos[k], list[b_pos[k]]), ": B before its F (",
            ActionToString(list[f_pos[k]]), ")"));
      }
      if (!fused[k] && w_pos[k] < b_pos[k]) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, w_pos[k], list[w_pos[k]]), ": W before its B (",
            ActionToString(list[b_pos[k]]), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SimulationResult> Simulate(const Problem& problem,
                                          const Schedule& schedule) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (absl::Status st = CheckSchedule(problem, schedule); !st.ok()) return st;

  const int p = problem.workers;
  const int num_stages = problem.num_stages();
  const int m = problem.microbatches;
  const Index at{m};
  const auto& owner = schedule.worker_of_stage;

  // End time of each pass; the B slot holds B or BW.
  std::vector<double> f_end(num_stages * m, kNotDone);
  std::vector<double> b_end(num_stages * m, kNotDone);

  SimulationResult result;
  result.timings.resize(p);
  for (int w = 0; w < p; ++w) result.timings[w].resize(schedule.actions[w].size());
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0.0);
  std::vector<char> queued(p, 1);
  std::deque<int> ready;
  for (int w = 0; w < p; ++w) ready.push_back(w);

  // When a dependency is produced on another worker, it arrives one hop
  // later; between chunks of the same worker it is handed over at once.
  auto arrival = [&](int from_stage, int to_stage, double end) {
    return owner[from_stage] == owner[to_stage] ? end
                                                : end + problem.comm_seconds;
  };
  auto wake = [&](int stage) {
    if (stage < 0 || stage >= num_stages) return;
    const int w = owner[stage];
    if (!queued[w]) {
      queued[w] = 1;
      ready.push_back(w);
    }
  };

  while (!ready.empty()) {
    const int w = ready.front();
    ready.pop_front();
    queued[w] = 0;
    const auto& list = schedule.actions[w];
    while (next[w] < list.size()) {
      const Action& a = list[next[w]];
      const int k = at(a.stage, a.microbatch);
      double start = free_at[w];
      bool blocked = false;
      switch (a.kind) {
        case PassKind::kF:
          if (a.stage > 0) {
            const double dep = f_end[at(a.stage - 1, a.microbatch)];
            if (dep == kNotDone) {
              blocked = true;
            } else {
              start = std::max(start, arrival(a.stage - 1, a.stage, dep));
            }
          }
          break;
        case PassKind::kB:
        case PassKind::kBW:
          // Own F precedes B in the list (CheckSchedule), so it is done.
          start = std::max(start, f_end[k]);
          if (a.stage + 1 < num_stages) {
            const double dep = b_end[at(a.stage + 1, a.microbatch)];
            if (dep == kNotDone) {
              blocked = true;
            } else {
              start = std::max(start, arrival(a.stage + 1, a.stage, dep));
            }
          }
          break;
        case PassKind::kW:
          start = std::max(start, b_end[k]);
          break;
      }
      if (blocked) break;
      const double end = start + Duration(problem.stages[a.stage], a.kind);
      result.timings[w][next[w]] = {start, end};
      free_at[w] = end;
      ++next[w];
      if (a.kind == PassKind::kF) {
        f_end[k] = end;
        wake(a.stage + 1);
      } else if (a.kind != PassKind::kW) {
        b_end[k] = end;
        wake(a.stage - 1);
      }
    }
  }

  std::vector<std::string> stuck;
  for (int w = 0; w < p; ++w) {
    const auto& list = schedule.actions[w];
    if (next[w] == list.size()) continue;
    const Action& a = list[next[w]];
    const Action needs =
        a.kind == PassKind::kF
            ? Action{PassKind::kF, a.stage - 1, a.microbatch}
            : Action{PassKind::kB, a.stage + 1, a.microbatch};
    stuck.push_back(absl::StrCat(Where(w, next[w], a), " waits for ",
                                 ActionToString(needs), " on worker ",
                                 owner[needs.stage]));
  }
  if (!stuck.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("deadlock: ", absl::StrJoin(stuck, "; ")));
  }

  result.busy_seconds.assign(p, 0.0);
  result.idle_seconds.assign(p, 0.0);
  result.peak_memory_bytes.assign(p, 0.0);
  result.peak_memory_m_b.assign(p, 0.0);
  double first_start = 0, last_end = 0, busy_total = 0;
  bool any = false;
  for (int w = 0; w < p; ++w) {
    const auto& list = schedule.actions[w];
    if (list.empty()) continue;
    const auto& t = result.timings[w];
    double memory = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const StageCost& c = problem.stages[a.stage];
      result.busy_seconds[w] += t[i].end_seconds - t[i].start_seconds;
      switch (a.kind) {
        case PassKind::kF:
          memory += c.m_b_bytes;
          result.peak_memory_bytes[w] =
              std::max(result.peak_memory_bytes[w], memory);
          break;
        case PassKind::kB:
          memory -= c.m_b_bytes - c.m_w_bytes;
          break;
        case PassKind::kW:
          memory -= c.m_w_bytes;
          break;
        case PassKind::kBW:
          memory -= c.m_b_bytes;
          break;
      }
    }
    result.makespan_seconds =
        std::max(result.makespan_seconds,
                 t.back().end_seconds - t.front().start_seconds);
    first_start = any ? std::min(first_start, t.front().start_seconds)
                      : t.front().start_seconds;
    last_end = std::max(last_end, t.back().end_seconds);
    any = true;
    busy_total += result.busy_seconds[w];
  }
  result.step_seconds = last_end - first_start;
  std::vector<double> unit(p, 0.0);
  for (int s = 0; s < num_stages; ++s) unit[owner[s]] += problem.stages[s].m_b_bytes;
  for (int w = 0; w < p; ++w) {
    result.idle_seconds[w] = result.makespan_seconds - result.busy_seconds[w];
    result.peak_memory_m_b[w] =
        unit[w] > 0 ? result.peak_memory_bytes[w] / unit[w] : 0.0;
    result.max_peak_memory_m_b =
        std::max(result.max_peak_memory_m_b, result.peak_memory_m_b[w]);
  }
  result.bubble_rate =
      result.makespan_seconds > 0
          ? std::max(0.0, 1.0 - busy_total / (p * result.makespan_seconds))
          : 0.0;
  return result;
}

}  // namespace zbpp::sched
