#ifndef ZBPP_SCHEDULER_ZB_GREEDY_BUILDER_H_
#define ZBPP_SCHEDULER_ZB_GREEDY_BUILDER_H_

// Internal to the greedy list schedulers (zb_greedy.cc): the state they
// build orders in, pass by pass, with every pass timed as it is appended
// (GreedyBuilder), and the stages' next decision times (WakeTimes).
// Header-only so that the greedies' inner loops inline these small members,
// as they did when both lived in zb_greedy.cc.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "scheduler/zb_orders.h"

namespace zbpp::sched::internal {

/// The end time GreedyBuilder keeps for a pass not yet placed.
constexpr double kNotPlaced = -1.0;
/// "Never" / "not ready", seconds.
constexpr double kInf = std::numeric_limits<double>::infinity();

// Appends passes to per-stage orders and times each one as it goes: a pass
// starts when its stage is free and its input has arrived (simulator.h).
// Also keeps the state the paper's rules read: per-stage memory, pending
// W's and the bubble accumulated since the stage's first pass (§3.1: idle
// before the first F does not count, the span starts there).
class GreedyBuilder {
 public:
  GreedyBuilder(const PassModel& model, bool fill_partial_gaps)
      : model_(model),
        fill_partial_gaps_(fill_partial_gaps),
        end_(model.num_ids(), kNotPlaced),
        next_(3 * model.virtual_stages(), 0),
        orders_(model.stages()),
        free_at_(model.stages(), 0.0),
        first_start_(model.stages(), 0.0),
        memory_(model.stages(), 0.0),
        bubble_(model.stages(), 0.0),
        pending_w_(model.stages()),
        pending_head_(model.stages(), 0),
        pending_w_bytes_(model.stages(), 0.0) {
    for (auto& order : orders_) order.reserve(3 * model.microbatches() * 2);
  }

  // Microbatch of the next `pass` of `virtual stage` (== m when all are placed).
  int Next(Pass pass, int virtual_stage) const {
    return next_[pass * model_.virtual_stages() + virtual_stage];
  }
  bool Done(Pass pass, int virtual_stage) const {
    return Next(pass, virtual_stage) >= model_.microbatches();
  }
  double FreeAt(int stage) const { return free_at_[stage]; }
  double Memory(int stage) const { return memory_[stage]; }
  double Bubble(int stage) const { return bubble_[stage]; }
  double MaxBubble() const { return max_bubble_; }
  double End(int32_t id) const { return end_[id]; }
  bool HasPendingW(int stage) const {
    return pending_head_[stage] < pending_w_[stage].size();
  }
  // Bytes that running every pending W of `stage` would release.
  double PendingWBytes(int stage) const { return pending_w_bytes_[stage]; }
  double NextWSeconds(int stage) const {
    return model_.Duration(pending_w_[stage][pending_head_[stage]]);
  }

  // When the input of the next `pass` of `virtual stage` is there (it must be
  // placed): the previous virtual stage's F or the next virtual stage's B plus one hop;
  // 0 for passes without a cross-virtual stage input.
  double InputReady(Pass pass, int virtual_stage) const {
    return InputReadyOf(model_.Id(pass, virtual_stage, Next(pass, virtual_stage)));
  }

  // When the next `pass` of `virtual stage` could start as far as its inputs go:
  // its cross-virtual stage input's arrival and, for B, its own F's end. Infinity
  // while an input is not placed or when no such pass remains.
  double Ready(Pass pass, int virtual_stage) const {
    const int mb = Next(pass, virtual_stage);
    if (mb >= model_.microbatches()) return kInf;
    const PassModel::PassInfo& info = model_.Info(model_.Id(pass, virtual_stage, mb));
    double ready = 0;
    if (info.dependency >= 0) {
      const double end = end_[info.dependency];
      if (end == kNotPlaced) return kInf;
      ready = end + info.hop;
    }
    if (pass == kB) {
      const double own_f = end_[model_.Id(kF, virtual_stage, mb)];
      if (own_f == kNotPlaced) return kInf;
      ready = std::max(ready, own_f);
    }
    return ready;
  }

  // Places the next `pass` of `virtual stage`. B's own F and W's own B are placed
  // before by construction; the caller checks memory for F.
  void Put(Pass pass, int virtual_stage) {
    const int32_t id = model_.Id(pass, virtual_stage, Next(pass, virtual_stage));
    ++next_[pass * model_.virtual_stages() + virtual_stage];
    const int stage = model_.owner()[virtual_stage];
    double start = std::max(free_at_[stage], InputReadyOf(id));
    if (pass == kB)
      start =
          std::max(start, end_[model_.Id(kF, virtual_stage, model_.MicrobatchOf(id))]);
    Append(stage, id, start);
    if (pass == kB) {
      const int32_t w = model_.Id(kW, virtual_stage, model_.MicrobatchOf(id));
      pending_w_[stage].push_back(w);
      pending_w_bytes_[stage] -= model_.MemoryDelta(w);
    }
  }

  // Places the oldest pending W of `stage` (W's run in the order of their
  // B's, so that M_W is released first-in first-out).
  void PutW(int stage) {
    const int32_t id = pending_w_[stage][pending_head_[stage]++];
    pending_w_bytes_[stage] += model_.MemoryDelta(id);
    ++next_[kW * model_.virtual_stages() + model_.VirtualStageOf(id)];
    Append(stage, id, free_at_[stage]);
  }

  void FlushW(int stage) {
    while (HasPendingW(stage)) PutW(stage);
  }

  // Runs pending W's until `bytes` more fit under the stage's limit
  // (§3.1: "when memory must be released before the next F"). False when
  // the pending W's cannot release enough.
  bool MakeRoom(int stage, double bytes) {
    while (memory_[stage] + bytes > model_.Limit(stage)) {
      if (!HasPendingW(stage)) return false;
      PutW(stage);
    }
    return true;
  }

  // Seconds of the W's that MakeRoom(stage, bytes) would run; infinity
  // when even all pending W's are not enough.
  double RoomCost(int stage, double bytes) const {
    double memory = memory_[stage], seconds = 0;
    for (size_t i = pending_head_[stage];
         memory + bytes > model_.Limit(stage); ++i) {
      if (i >= pending_w_[stage].size()) {
        return std::numeric_limits<double>::infinity();
      }
      memory += model_.MemoryDelta(pending_w_[stage][i]);
      seconds += model_.Duration(pending_w_[stage][i]);
    }
    return seconds;
  }

  // The paper's W insertion before a pass whose input arrives at `ready`
  // (§3.1): W's that fit whole into the gap run; then, when
  // `may_fill_partial`, a W goes into the remaining shorter gap when idling
  // through it would make this stage's bubble the largest (or always, with
  // fill_partial_gaps). "The largest" is at least the stage's allowance
  // (SetAllowance).
  void FillGap(int stage, double ready, bool may_fill_partial = true) {
    while (HasPendingW(stage) &&
           free_at_[stage] + NextWSeconds(stage) <= ready) {
      PutW(stage);
    }
    if (!may_fill_partial || !HasPendingW(stage) ||
        free_at_[stage] >= ready) {
      return;
    }
    const double gap = ready - free_at_[stage];
    const double largest =
        allowance_.empty() ? max_bubble_
                           : std::max(max_bubble_, allowance_[stage]);
    if (gap > largest - bubble_[stage] || fill_partial_gaps_) {
      PutW(stage);
    } else {
      partial_gap_left_ = true;
    }
  }

  // Whether FillGap ever left a W out of a partial gap that it would have
  // filled with fill_partial_gaps.
  bool PartialGapLeft() const { return partial_gap_left_; }

  // Bubble each stage may reach before the gap rule of FillGap fills a
  // partial gap, on top of the largest bubble so far: a second greedy pass
  // that knows each stage's final bubble from a first one leaves idle the
  // stages that end up with less than the others. Size p, or empty.
  void SetAllowance(std::vector<double> allowance) {
    allowance_ = std::move(allowance);
  }
  // Per stage: idle seconds between its first pass and its last one.
  const std::vector<double>& Bubbles() const { return bubble_; }

  // From now on, Abandoned() tells whether some stage's span is bound to
  // exceed `seconds`: its idle time so far plus the seconds of all of its
  // passes (the span of a complete run is exactly that sum).
  void AbandonAbove(double seconds) {
    if (!(seconds < kInf)) return;
    idle_allowed_.assign(model_.stages(), 0.0);
    for (int w = 0; w < model_.stages(); ++w) {
      double busy = 0;
      for (int s : model_.VirtualStagesOf(w)) {
        busy += model_.microbatches() *
                (model_.Duration(kF, s) + model_.Duration(kB, s) +
                 model_.Duration(kW, s));
      }
      idle_allowed_[w] = seconds - busy;
    }
    abandon_ = true;
  }
  bool Abandoned() const { return abandoned_; }

  // Hands over the orders and, when `spans` is set, each stage's span
  // (first start to last end), as the evaluator would compute them.
  Orders Take(std::vector<double>* spans) {
    if (spans != nullptr) {
      spans->assign(model_.stages(), 0.0);
      for (int w = 0; w < model_.stages(); ++w) {
        if (!orders_[w].empty()) (*spans)[w] = free_at_[w] - first_start_[w];
      }
    }
    return std::move(orders_);
  }

 private:
  double InputReadyOf(int32_t id) const {
    const int32_t dep = model_.CrossDependency(id);
    return dep < 0 ? 0.0 : end_[dep] + model_.CrossHop(id);
  }

  void Append(int stage, int32_t id, double start) {
    if (orders_[stage].empty()) {
      first_start_[stage] = start;
    } else {
      bubble_[stage] += start - free_at_[stage];
      max_bubble_ = std::max(max_bubble_, bubble_[stage]);
      if (abandon_ && bubble_[stage] > idle_allowed_[stage]) {
        abandoned_ = true;
      }
    }
    end_[id] = start + model_.Duration(id);
    free_at_[stage] = end_[id];
    memory_[stage] += model_.MemoryDelta(id);
    orders_[stage].push_back(id);
  }

  const PassModel& model_;
  const bool fill_partial_gaps_;
  std::vector<double> end_;
  std::vector<int> next_;
  Orders orders_;
  std::vector<double> free_at_, first_start_, memory_, bubble_;
  double max_bubble_ = 0;
  std::vector<double> allowance_;
  bool abandon_ = false, abandoned_ = false, partial_gap_left_ = false;
  std::vector<double> idle_allowed_;  // per stage, with abandon_
  std::vector<std::vector<int32_t>> pending_w_;
  std::vector<size_t> pending_head_;
  std::vector<double> pending_w_bytes_;
};

// Next decision time per stage, with the earliest one kept at the root of
// a tournament tree (leaves padded to a power of two): O(log p) per update,
// O(1) to find the earliest, ties to the lowest index.
class WakeTimes {
 public:
  explicit WakeTimes(int stages) {
    while (leaves_ < stages) leaves_ *= 2;
    time_.assign(leaves_, kInf);
    winner_.assign(2 * leaves_, -1);
    for (int w = 0; w < leaves_; ++w) winner_[leaves_ + w] = w;
    for (int node = leaves_ - 1; node >= 1; --node) Replay(node);
  }
  double Get(int stage) const { return time_[stage]; }
  void Set(int stage, double time) {
    time_[stage] = time;
    for (int node = (leaves_ + stage) / 2; node >= 1; node /= 2) {
      const int before = winner_[node];
      Replay(node);
      // Above a node whose winner is another stage both before and after,
      // nothing changes.
      if (winner_[node] == before && before != stage) break;
    }
  }
  // The stage with the earliest finite time (lowest index on ties), -1
  // when all are infinite.
  int Earliest() const {
    const int w = winner_[1];
    return time_[w] < kInf ? w : -1;
  }

 private:
  void Replay(int node) {
    const int a = winner_[2 * node], b = winner_[2 * node + 1];
    winner_[node] = time_[b] < time_[a] ? b : a;
  }

  int leaves_ = 1;
  std::vector<double> time_;
  std::vector<int> winner_;
};

}  // namespace zbpp::sched::internal

#endif  // ZBPP_SCHEDULER_ZB_GREEDY_BUILDER_H_
