#ifndef ZBPP_SCHEDULER_TESTING_AUTHORS_GENERATORS_H_
#define ZBPP_SCHEDULER_TESTING_AUTHORS_GENERATORS_H_

// A reference for tests and benchmarks (linked into no binary zbpp
// ships): zbpp's own re-implementation of the schedule
// generators the Zero Bubble authors publish with their Megatron fork
// (github.com/sail-sg/zero-bubble-pipeline-parallelism,
// megatron/core/pipeline_parallel/zerobubble/scheduler/): the ZB-1p/2p
// greedy of `zb.py` (`initial_solution`: `manual_order` under its 8 binary
// choices, without the ILP that may follow it) and the ZB-V greedy of
// `zbv.py` (`try_v_schedule` under its 4 choices, each re-run with its own
// bubbles as `approved_bubble` while that helps). Written from the
// algorithms as they are described there and in the paper (§3.1, §6), not
// copied. The solver (scheduler/zb_auto.h) must never be worse than these
// on the comparison grids (solver_reference_test.cc, bench/results/
// solver.md); their per-stage orders are timed by our simulator, so both
// sides are measured the same way.
//
// Where the authors' code would stop on an assertion (a pass whose input is
// not placed, a memory limit that cannot be met) these return false.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <vector>

#include "scheduler/schedule.h"
#include "scheduler/zb_orders.h"

namespace zbpp::sched::testing {

namespace authors_internal {

using internal::kB;
using internal::kF;
using internal::kW;
using internal::Orders;
using internal::Pass;
using internal::PassModel;

// Per-stage orders built pass by pass with each pass timed as appended
// (start = max(stage free, input end + hop)), and the per-stage bubble the
// authors' rules read (idle time after the stage's first pass).
class Timeline {
 public:
  explicit Timeline(const PassModel& model)
      : model_(model),
        end_(model.num_ids(), -1.0),
        count_(3 * model.virtual_stages(), 0),
        orders_(model.stages()),
        free_(model.stages(), 0.0),
        memory_(model.stages(), 0.0),
        bubble_(model.stages(), 0.0),
        pending_w_(model.stages()) {}

  int Count(Pass pass, int virtual_stage) const {
    return count_[pass * model_.virtual_stages() + virtual_stage];
  }
  bool Done(Pass pass, int virtual_stage) const {
    return Count(pass, virtual_stage) >= model_.microbatches();
  }
  // End of pass (pass, virtual stage, microbatch); -1 while not placed (also for a
  // microbatch out of range).
  double End(Pass pass, int virtual_stage, int mb) const {
    if (mb < 0 || mb >= model_.microbatches()) return -1;
    return end_[model_.Id(pass, virtual_stage, mb)];
  }
  // When the input of the next `pass` of `virtual stage` arrives from another
  // virtual stage; -1 when that input is not placed, 0 when it has none.
  double Arrival(Pass pass, int virtual_stage) const {
    const int mb = Count(pass, virtual_stage);
    if (mb >= model_.microbatches()) return -1;
    const int32_t id = model_.Id(pass, virtual_stage, mb);
    const int32_t dep = model_.CrossDependency(id);
    if (dep < 0) return 0;
    return end_[dep] < 0 ? -1 : end_[dep] + model_.CrossHop(id);
  }
  double Free(int w) const { return free_[w]; }
  double Memory(int w) const { return memory_[w]; }
  double Bubble(int w) const { return bubble_[w]; }
  const std::vector<double>& Bubbles() const { return bubble_; }
  double MaxBubble() const {
    return *std::max_element(bubble_.begin(), bubble_.end());
  }
  bool HasPendingW(int w) const { return !pending_w_[w].empty(); }
  double NextWSeconds(int w) const {
    return model_.Duration(pending_w_[w].front());
  }
  bool FitsF(int virtual_stage) const {
    const int w = model_.owner()[virtual_stage];
    return memory_[w] + model_.MemoryDelta(kF, virtual_stage) <= model_.Limit(w);
  }

  // Places the next `pass` of `virtual stage`; false when none is left, its input
  // is not placed or the stage's limit would be exceeded.
  bool Put(Pass pass, int virtual_stage) {
    const int mb = Count(pass, virtual_stage);
    if (mb >= model_.microbatches()) return false;
    const int32_t id = model_.Id(pass, virtual_stage, mb);
    const int w = model_.owner()[virtual_stage];
    if (memory_[w] + model_.MemoryDelta(id) > model_.Limit(w)) return false;
    double start = free_[w];
    const int32_t dep = model_.CrossDependency(id);
    if (dep >= 0) {
      if (end_[dep] < 0) return false;
      start = std::max(start, end_[dep] + model_.CrossHop(id));
    }
    // Same-virtual stage inputs (B after its F, W after its B) come earlier in the
    // stage's order by construction.
    if (pass != kF && end_[model_.Id(pass == kB ? kF : kB, virtual_stage, mb)] < 0) {
      return false;
    }
    if (!orders_[w].empty()) bubble_[w] += start - free_[w];
    end_[id] = start + model_.Duration(id);
    free_[w] = end_[id];
    memory_[w] += model_.MemoryDelta(id);
    ++count_[pass * model_.virtual_stages() + virtual_stage];
    orders_[w].push_back(id);
    if (pass == kB) pending_w_[w].push_back(model_.Id(kW, virtual_stage, mb));
    return true;
  }

  // Places `stage`'s oldest pending W; false when there is none.
  bool PutW(int stage) {
    if (pending_w_[stage].empty()) return false;
    const int32_t id = pending_w_[stage].front();
    pending_w_[stage].pop_front();
    const int virtual_stage = model_.VirtualStageOf(id);
    return Put(kW, virtual_stage);
  }

  // Pending W's until an F of `virtual stage` fits; false when they cannot free
  // enough.
  bool MakeRoomForF(int virtual_stage) {
    const int w = model_.owner()[virtual_stage];
    while (!FitsF(virtual_stage)) {
      if (!PutW(w)) return false;
    }
    return true;
  }

  void FlushW() {
    for (int w = 0; w < model_.stages(); ++w) {
      while (PutW(w)) {
      }
    }
  }

  Orders Take() { return std::move(orders_); }

 private:
  const PassModel& model_;
  std::vector<double> end_;
  std::vector<int> count_;
  Orders orders_;
  std::vector<double> free_, memory_, bubble_;
  std::vector<std::deque<int32_t>> pending_w_;
};

// The W gap rule both generators apply before a pass of `stage` whose
// input from another stage arrives at `arrival`: W's that end by the
// arrival run; then, if the stage would still idle, one more W runs when
// `fill_over` and idling would make its bubble exceed `largest` (the
// largest bubble it may reach), or anyway when `fill_anyway`.
inline bool FillGap(Timeline& t, int stage, double arrival, double largest,
                    bool fill_over, bool fill_anyway) {
  while (t.HasPendingW(stage) &&
         arrival >= t.Free(stage) + t.NextWSeconds(stage)) {
    if (!t.PutW(stage)) return false;
  }
  if (t.HasPendingW(stage) && t.Free(stage) < arrival) {
    const bool over = arrival - t.Free(stage) > largest - t.Bubble(stage);
    if ((over && fill_over) || fill_anyway) return t.PutW(stage);
  }
  return true;
}

// zb.py's `manual_order` with its three choices; virtual stage j on stage j.
inline bool ZbGreedyOnce(const PassModel& model, bool bubble_before_first_b,
                         bool prioritize_b, bool fill_partial, Orders* orders) {
  const int p = model.stages(), m = model.microbatches();
  const double comm = model.comm_seconds();
  Timeline t(model);
  auto f_cost = [&](int j) { return model.Duration(kF, j); };
  auto b_cost = [&](int j) { return model.Duration(kB, j); };
  auto w_cost = [&](int j) { return model.Duration(kW, j); };
  auto f_mem = [&](int j) { return model.MemoryDelta(kF, j); };

  // Microbatch 0 down the pipe, then warm-up F's from the last virtual stage up:
  // as many as end before (or, with bubble_before_first_b, start before)
  // the first B arrives, within memory.
  for (int j = 0; j < p; ++j) {
    if (!t.Put(kF, j)) return false;
  }
  std::vector<int> extra(p, 0);
  double b_done = t.End(kF, p - 1, 0) + b_cost(p - 1);
  for (int j = p - 2; j >= 0; --j) {
    double clock = t.Free(j), memory = t.Memory(j);
    while (1 + extra[j] < m && memory + f_mem(j) <= model.Limit(j)) {
      const bool stop = bubble_before_first_b
                            ? clock + f_cost(j) > b_done + comm
                            : clock >= b_done + comm;
      if (stop) break;
      memory += f_mem(j);
      clock += f_cost(j);
      ++extra[j];
    }
    b_done = std::max(clock, b_done + comm) + b_cost(j);
  }
  for (int j = 1; j < p; ++j) {
    while (extra[j] > 0 && extra[j] >= extra[j - 1] && 1 + extra[j] < m) {
      --extra[j];
    }
  }
  for (int j = 0; j < p; ++j) {
    for (int k = 0; k < extra[j]; ++k) {
      if (!t.Put(kF, j)) return false;
    }
  }
  for (int j = p - 1; j >= 0; --j) {
    if (!t.Put(kB, j)) return false;
  }

  std::vector<char> want(p);
  for (int round = 1; round < m; ++round) {
    for (int j = 0; j < p; ++j) {
      want[j] = !t.Done(kF, j);
      if (!want[j] || !prioritize_b || j + 1 >= p ||
          t.Count(kF, j) < t.Count(kF, j + 1) + 2) {
        continue;
      }
      const double next_b =
          t.Free(j + 1) + f_cost(j + 1) + b_cost(j + 1) + comm;
      if (t.Free(j) >= next_b) {
        want[j] = 0;
        continue;
      }
      // The W's an F would need first to fit.
      double w_seconds = 0, memory = t.Memory(j) + f_mem(j);
      for (int k = t.Count(kW, j);
           memory > model.Limit(j) && k < t.Count(kB, j); ++k) {
        w_seconds += w_cost(j);
        memory += model.MemoryDelta(kW, j);
      }
      if (t.Free(j) + f_cost(j) + w_seconds <= next_b) continue;
      if (next_b - t.Free(j) <= t.MaxBubble() - t.Bubble(j)) want[j] = 0;
    }
    for (int j = p - 2; j >= 0; --j) want[j] = std::min(want[j], want[j + 1]);
    for (int j = 0; j < p; ++j) {
      if (!want[j]) continue;
      if (!t.MakeRoomForF(j)) return false;
      if (j > 0 &&
          !FillGap(t, j, t.Arrival(kF, j), t.MaxBubble(), true, fill_partial)) {
        return false;
      }
      if (!t.Put(kF, j)) return false;
    }
    for (int j = p - 1; j >= 0; --j) {
      if (t.Count(kB, j) != round) return false;
      if (j + 1 < p &&
          !FillGap(t, j, t.Arrival(kB, j), t.MaxBubble(), true, fill_partial)) {
        return false;
      }
      if (j == 0 && t.Done(kF, 0)) {
        while (t.PutW(0)) {
        }
      }
      if (!t.Put(kB, j)) return false;
    }
  }
  t.FlushW();
  *orders = t.Take();
  return true;
}

// zbv.py's `try_v_schedule` (one run; the re-runs are in AuthorsZbV).
// Stage i holds virtual stages i (first chunk) and 2p-1-i (second chunk).
// `approved` (size p or empty): each stage's bubble allowance.
inline bool ZbVOnce(const PassModel& model, bool fill_f, bool fill_b,
                    const std::vector<double>& approved, Orders* orders,
                    std::vector<double>* bubbles) {
  const int p = model.stages(), m = model.microbatches();
  Timeline t(model);
  auto first = [](int i) { return i; };
  auto second = [p](int i) { return 2 * p - 1 - i; };
  const double top_approved =
      approved.empty() ? -1
                       : *std::max_element(approved.begin(), approved.end());
  auto largest = [&](int i) {
    double value = t.MaxBubble();
    if (!approved.empty()) value = std::max(value, top_approved - approved[i]);
    return value;
  };
  auto forwards = [&](int i) {
    return t.Count(kF, first(i)) + t.Count(kF, second(i));
  };

  for (int i = 0; i < p; ++i) {
    if (!t.Put(kF, first(i))) return false;
  }
  // From the bottom stage up: first-chunk F's on stages 0..i while they
  // end before the second chunk's first F reaches i, leaving room for the
  // F's still to come on i; then i's first second-chunk F.
  for (int i = p - 1; i >= 0; --i) {
    if (i < p - 1) {
      const double arrival = t.Arrival(kF, second(i));
      while (t.Memory(i) + model.MemoryDelta(kF, first(i)) * (2 + 2 * i) <=
                 model.Limit(i) &&
             t.Free(i) + model.Duration(kF, first(i)) <= arrival &&
             !t.Done(kF, first(i))) {
        for (int j = 0; j <= i; ++j) {
          if (!t.Put(kF, first(j))) return false;
        }
      }
    }
    if (!t.Put(kF, second(i))) return false;
  }
  // Each stage catches up with the one above, the lower stages placing
  // F's of alternate chunks.
  int chunk = 0;
  for (int i = 1; i < p; ++i) {
    while (forwards(i) < forwards(i - 1) ||
           (t.Count(kF, second(i)) <= t.Count(kF, second(i - 1)) &&
            t.Count(kF, second(i - 1)) < m)) {
      for (int j = p - 1; j >= i; --j) {
        const int virtual_stage = chunk == 0 ? first(j) : second(j);
        if (!t.Done(kF, virtual_stage) && !t.Put(kF, virtual_stage)) return false;
      }
      chunk = 1 - chunk;
    }
  }

  std::vector<int> b_first, b_second;
  for (int round = 0; round < 2 * m; ++round) {
    // One B per stage: the second chunk's (from the loss) first while the
    // first chunk's has caught up or cannot start, from stage 0 down; the
    // first chunk's from stage p-1 up, before them.
    b_first.clear();
    b_second.clear();
    for (int i = 0; i < p; ++i) {
      const int done_second = t.Count(kB, second(i));
      const int done_first = t.Count(kB, first(i));
      if (done_first >= done_second) {
        b_second.push_back(i);
      } else if (i == p - 1 || t.End(kB, first(i + 1), done_first) >= 0 ||
                 done_second >= m) {
        b_first.push_back(i);
      } else {
        b_second.push_back(i);
      }
    }
    auto place_b = [&](int i, int virtual_stage, bool fill) {
      // At the turns of the V the input comes from the stage itself: no
      // arrival to wait for, no W placed.
      const bool crosses = virtual_stage == first(i) ? i < p - 1 : i > 0;
      if (crosses) {
        const double arrival = t.Arrival(kB, virtual_stage);
        if (arrival < 0 || !FillGap(t, i, arrival, largest(i), fill, false)) {
          return false;
        }
      }
      return t.Put(kB, virtual_stage);
    };
    for (auto it = b_first.rbegin(); it != b_first.rend(); ++it) {
      if (!place_b(*it, first(*it), true)) return false;
    }
    for (int i : b_second) {
      if (!place_b(i, second(i), fill_b)) return false;
    }
    // One F per stage.
    for (int i = 0; i < p; ++i) {
      if (t.Done(kF, second(i))) continue;
      int virtual_stage = -1;
      if (t.Count(kF, second(i)) >= t.Count(kF, first(i))) {
        virtual_stage = first(i);
      } else if (i == p - 1 ||
                 t.End(kF, second(i + 1), t.Count(kF, second(i))) >= 0) {
        virtual_stage = second(i);
      } else if (!t.Done(kF, first(i)) &&
                 (i == 0 ||
                  t.End(kF, first(i - 1), t.Count(kF, first(i))) >= 0)) {
        virtual_stage = first(i);
      }
      if (virtual_stage < 0) continue;
      if (!t.MakeRoomForF(virtual_stage)) return false;
      const bool crosses = virtual_stage == first(i) ? i > 0 : i < p - 1;
      if (crosses) {
        const double arrival = t.Arrival(kF, virtual_stage);
        if (arrival < 0 || !FillGap(t, i, arrival, largest(i), fill_f, false)) {
          return false;
        }
      }
      if (!t.Put(kF, virtual_stage)) return false;
    }
  }
  t.FlushW();
  if (bubbles != nullptr) *bubbles = t.Bubbles();
  *orders = t.Take();
  return true;
}

}  // namespace authors_internal

/// The authors' ZB-1p/2p greedy (zb.py `initial_solution`, no ILP): the
/// best of `manual_order` under its 8 choices by makespan (the first of
/// equals in their loop order). One chunk per stage, Placement::kLoop.
/// False when no choice completes within the model's limits.
inline bool AuthorsZbGreedy(const internal::PassModel& model,
                            internal::Orders* orders) {
  internal::Evaluator evaluator(model);
  double best = std::numeric_limits<double>::infinity();
  for (bool before : {true, false}) {
    for (bool prioritize : {true, false}) {
      for (bool fill : {true, false}) {
        internal::Orders candidate;
        if (!authors_internal::ZbGreedyOnce(model, before, prioritize, fill,
                                            &candidate)) {
          continue;
        }
        const internal::OrderCost cost = evaluator.Run(candidate);
        if (cost.complete && cost.fits_memory && cost.makespan < best) {
          best = cost.makespan;
          *orders = std::move(candidate);
        }
      }
    }
  }
  return best < std::numeric_limits<double>::infinity();
}

/// The authors' ZB-V greedy (zbv.py): `try_v_schedule` under its 4 choices
/// (fill_b, fill_f), each re-run with its bubbles as approved bubbles while
/// the largest bubble shrinks; the best by largest bubble. Placement::kV.
/// False when no choice completes within the model's limits.
inline bool AuthorsZbV(const internal::PassModel& model,
                       internal::Orders* orders) {
  double best = std::numeric_limits<double>::infinity();
  for (bool fill_b : {true, false}) {
    for (bool fill_f : {true, false}) {
      std::vector<double> approved;
      double previous = -1;
      internal::Orders chosen;
      double chosen_bubble = std::numeric_limits<double>::infinity();
      while (true) {
        internal::Orders candidate;
        std::vector<double> bubbles;
        if (!authors_internal::ZbVOnce(model, fill_f, fill_b, approved,
                                       &candidate, &bubbles)) {
          break;
        }
        const double top = *std::max_element(bubbles.begin(), bubbles.end());
        if (top < chosen_bubble) {
          chosen_bubble = top;
          chosen = std::move(candidate);
        }
        // Re-run only while the run beats its allowance's largest bubble.
        if (previous >= 0 && !(top < previous)) break;
        previous = top;
        approved = std::move(bubbles);
      }
      if (chosen_bubble < best) {
        best = chosen_bubble;
        *orders = std::move(chosen);
      }
    }
  }
  return best < std::numeric_limits<double>::infinity();
}

/// The authors' schedule on `problem` (which carries the schedule's memory
/// limit): AuthorsZbGreedy for one chunk per stage (ZB-1p/2p), AuthorsZbV
/// for two (ZB-V, V placement). nullopt when their generator cannot build
/// one.
inline std::optional<Schedule> AuthorsSchedule(const Problem& problem) {
  const Placement placement =
      problem.chunks == 2 ? Placement::kV : Placement::kLoop;
  const internal::PassModel model(
      problem, PlaceVirtualStages(placement, problem.stages, problem.chunks));
  internal::Orders orders;
  const bool built = placement == Placement::kV
                         ? AuthorsZbV(model, &orders)
                         : AuthorsZbGreedy(model, &orders);
  if (!built) return std::nullopt;
  return internal::ToSchedule(model, orders, "authors", problem.chunks);
}

}  // namespace zbpp::sched::testing

#endif  // ZBPP_SCHEDULER_TESTING_AUTHORS_GENERATORS_H_
