#include "scheduler/zb_greedy.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace zbpp::sched::internal {
namespace {

constexpr double kNotPlaced = -1.0;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Appends passes to per-stage orders and times each one as it goes: a pass
// starts when its stage is free and its input has arrived (simulator.h).
// Also keeps the state the paper's rules read: per-stage memory, pending
// W's and the bubble accumulated since the stage's first pass (§3.1: idle
// before the first F does not count, the span starts there).
class Builder {
 public:
  Builder(const PassModel& model, bool fill_partial_gaps)
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

// Warm-up of LoopGreedy, part 1: microbatch 0 down the pipe. False when a
// virtual stage cannot hold it.
bool PutFirstMicrobatch(const PassModel& model, Builder& g) {
  for (int s = 0; s < model.stages(); ++s) {
    if (!g.MakeRoom(s, model.MemoryDelta(kF, s))) return false;
    g.Put(kF, s);
  }
  return true;
}

// Warm-up of LoopGreedy, part 2, once microbatch 0 is placed: from the last
// virtual stage up, the extra F's each virtual stage runs before its first B, those that
// fit before that B can arrive (estimated from the virtual stage below) and under
// its limit, or those of choices.warmup.
std::vector<int> WarmupExtras(const PassModel& model, const Builder& g,
                              const GreedyChoices& choices) {
  const int p = model.stages(), m = model.microbatches();
  auto f_bytes = [&](int s) { return model.MemoryDelta(kF, s); };
  auto f_seconds = [&](int s) { return model.Duration(kF, s); };
  auto b_seconds = [&](int s) { return model.Duration(kB, s); };
  std::vector<int> extra(p, 0);
  double b_end = g.End(model.Id(kF, p - 1, 0)) + b_seconds(p - 1);
  for (int s = p - 2; s >= 0; --s) {
    const double b_arrives = b_end + model.Hop(s + 1, s);
    double t = g.FreeAt(s), memory = g.Memory(s);
    while (1 + extra[s] < m && memory + f_bytes(s) <= model.Limit(s)) {
      const bool fits = choices.bubble_before_first_b
                            ? t + f_seconds(s) <= b_arrives
                            : t < b_arrives;
      if (!fits) break;
      t += f_seconds(s);
      memory += f_bytes(s);
      ++extra[s];
    }
    b_end = std::max(t, b_arrives) + b_seconds(s);
  }
  if (!choices.warmup.empty()) {
    for (int s = 0; s < p; ++s) {
      extra[s] = std::clamp(choices.warmup[s] - 1, 0, m - 1);
      const double room = model.Limit(s) - g.Memory(s);
      while (extra[s] > 0 && extra[s] * f_bytes(s) > room) --extra[s];
    }
  }
  // Each virtual stage keeps at least one more F in flight than the next (so that
  // the 1F-1B steady state never starves it), unless the virtual stage above has
  // already run all of its F's.
  for (int s = 1; s < p; ++s) {
    const int cap =
        1 + extra[s - 1] == m ? extra[s - 1] : std::max(0, extra[s - 1] - 1);
    extra[s] = std::min(extra[s], cap);
  }
  return extra;
}

}  // namespace

std::vector<int> LoopGreedyWarmup(const PassModel& model,
                                  const GreedyChoices& choices) {
  Builder g(model, choices.fill_partial_gaps);
  if (!PutFirstMicrobatch(model, g)) return {};
  return WarmupExtras(model, g, choices);
}

bool LoopGreedy(const PassModel& model, const GreedyChoices& choices,
                Orders* orders, std::vector<double>* spans,
                LoopGreedyTrace* trace) {
  const int p = model.stages(), m = model.microbatches();
  Builder g(model, choices.fill_partial_gaps);
  g.AbandonAbove(choices.abandon_above);
  auto f_bytes = [&](int s) { return model.MemoryDelta(kF, s); };
  auto f_seconds = [&](int s) { return model.Duration(kF, s); };
  auto b_seconds = [&](int s) { return model.Duration(kB, s); };
  LoopGreedyTrace seen;
  if (trace == nullptr) trace = &seen;
  *trace = LoopGreedyTrace{};
  auto give_up = [&] {
    trace->partial_gap_left = g.PartialGapLeft();
    return false;
  };

  // Warm-up: microbatch 0, then each virtual stage's extra F's, then the B's of
  // microbatch 0 up the pipe.
  if (!PutFirstMicrobatch(model, g)) return false;
  const std::vector<int> extra = WarmupExtras(model, g, choices);
  for (int s = 0; s < p; ++s) {
    for (int k = 0; k < extra[s]; ++k) g.Put(kF, s);
  }
  for (int s = p - 1; s >= 0; --s) g.Put(kB, s);

  // Steady state: one round per microbatch, F's down the pipe then B's up.
  std::vector<char> want(p);
  for (int round = 1; round < m; ++round) {
    if (g.Abandoned()) return give_up();
    for (int s = 0; s < p; ++s) {
      want[s] = !g.Done(kF, s);
      if (!want[s] || !choices.favour_b || s + 1 == p ||
          g.Next(kF, s) < g.Next(kF, s + 1) + 2) {
        continue;
      }
      // This virtual stage is well ahead of the next: skip the F if the next B
      // (estimated from the next virtual stage's F and B) would otherwise wait,
      // unless skipping makes this virtual stage's bubble the largest.
      const double b_arrives = g.FreeAt(s + 1) + f_seconds(s + 1) +
                               b_seconds(s + 1) + model.Hop(s + 1, s);
      if (g.FreeAt(s) >= b_arrives) {
        want[s] = 0;
      } else if (g.FreeAt(s) + f_seconds(s) + g.RoomCost(s, f_bytes(s)) >
                 b_arrives) {
        want[s] = b_arrives - g.FreeAt(s) > g.MaxBubble() - g.Bubble(s);
      }
      trace->favour_b_decided |= !want[s];
    }
    // A virtual stage never runs more F's than the one above it has.
    for (int s = p - 2; s >= 0; --s) want[s] = want[s] && want[s + 1];
    for (int s = 0; s < p; ++s) {
      if (!want[s]) continue;
      if (!g.MakeRoom(s, f_bytes(s))) return give_up();
      if (s > 0) g.FillGap(s, g.InputReady(kF, s));
      g.Put(kF, s);
    }
    for (int s = p - 1; s >= 0; --s) {
      if (s + 1 < p) g.FillGap(s, g.InputReady(kB, s));
      // Virtual stage 0's B feeds no one: once its F's are done, W's first.
      if (s == 0 && g.Done(kF, 0)) g.FlushW(0);
      g.Put(kB, s);
    }
  }
  for (int s = 0; s < p; ++s) g.FlushW(s);
  if (g.Abandoned()) return give_up();
  trace->partial_gap_left = g.PartialGapLeft();
  *orders = g.Take(spans);
  return true;
}

bool ListGreedy(const PassModel& model, const ListChoices& choices,
                Orders* orders, std::vector<double>* spans) {
  const int p = model.stages(), m = model.microbatches();
  Builder g(model, choices.fill_partial_gaps);
  // Room an F of `virtual stage` must leave for one activation of each later
  // virtual stage of its stage, whose F's are still to come.
  auto reserve = [&](int virtual_stage) {
    double bytes = 0;
    for (int later : model.VirtualStagesOf(model.owner()[virtual_stage])) {
      if (later > virtual_stage && !g.Done(kF, later)) {
        bytes += model.MemoryDelta(kF, later);
      }
    }
    return bytes;
  };
  for (int w = 0; w < p; ++w) {
    for (int s : model.VirtualStagesOf(w)) {
      if (model.MemoryDelta(kF, s) + reserve(s) > model.Limit(w)) return false;
    }
  }

  // Each stage's next decision time: when it is free, or when the next
  // of its inputs arrives; infinity while it waits for a pass that is not
  // placed yet. Decisions are taken in time order, so at time t every pass
  // that can be ready by t has been placed.
  WakeTimes wake(p);
  for (int w = 0; w < p; ++w) wake.Set(w, 0.0);
  std::vector<int> left(p, 0);  // F's and B's still to place per stage
  for (int w = 0; w < p; ++w) {
    left[w] = 2 * m * static_cast<int>(model.VirtualStagesOf(w).size());
  }
  constexpr double kEps = 1e-12;

  auto place = [&](int w, Pass pass, int virtual_stage, double ready) {
    g.MakeRoom(w, model.MemoryDelta(kF, virtual_stage) * (pass == kF));
    g.FillGap(w, ready);
    const int32_t id = model.Id(pass, virtual_stage, g.Next(pass, virtual_stage));
    g.Put(pass, virtual_stage);
    --left[w];
    if (left[w] == 0) g.FlushW(w);
    wake.Set(w, left[w] > 0 ? g.FreeAt(w) : kInf);
    const int consumer = model.Consumer(id);
    if (consumer >= 0 && left[consumer] > 0) {
      const double arrives =
          std::max(g.End(id) + model.comm_seconds(), g.FreeAt(consumer));
      if (arrives < wake.Get(consumer)) wake.Set(consumer, arrives);
    }
  };

  for (int w = wake.Earliest(); w >= 0; w = wake.Earliest()) {
    const double t = wake.Get(w);
    // Candidates: the next B and F of each virtual stage of this stage
    // whose input is placed, with the time that input is there.
    int best_b = -1, best_f = -1;
    double b_ready = 0, f_ready = 0, next_b = kInf, next_any = kInf;
    for (int s : model.VirtualStagesOf(w)) {
      const double rb = g.Ready(kB, s);
      if (rb == kInf) {
        // Its input is not placed yet: a producer's placement wakes us.
      } else if (rb > t + kEps) {
        next_b = std::min(next_b, rb);
      } else if (best_b < 0 || rb < b_ready - kEps ||
                 (rb <= b_ready + kEps &&
                  (s > best_b) == choices.later_virtual_stage_first)) {
        best_b = s;
        b_ready = rb;
      }
    }
    if (best_b >= 0) {
      place(w, kB, best_b, b_ready);
      continue;
    }
    for (int s : model.VirtualStagesOf(w)) {
      const double rf = g.Ready(kF, s);
      if (rf == kInf) continue;
      // Closest to the loss first: it finishes a microbatch in flight
      // instead of starting a new one.
      const double bytes = model.MemoryDelta(kF, s) + reserve(s);
      if (g.Memory(w) - g.PendingWBytes(w) + bytes > model.Limit(w)) {
        // Waits for its own B's to release memory.
      } else if (rf > t + kEps) {
        next_any = std::min(next_any, rf);
      } else if (s > best_f) {
        best_f = s;
        f_ready = rf;
      }
    }
    next_any = std::min(next_any, next_b);
    if (best_f >= 0 &&
        !(choices.favour_b && next_b < std::max(g.FreeAt(w), f_ready) +
                                           model.Duration(kF, best_f))) {
      place(w, kF, best_f, f_ready);
    } else {
      wake.Set(w, next_any);  // infinity: until a producer places an input
    }
  }
  for (int w = 0; w < p; ++w) {
    if (left[w] > 0) return false;
  }
  *orders = g.Take(spans);
  return true;
}

bool VRoundGreedy(const PassModel& model, const VRoundChoices& choices,
                  const std::vector<double>& allowance, Orders* orders,
                  std::vector<double>* spans, std::vector<double>* bubbles) {
  const int p = model.stages(), m = model.microbatches();
  for (int w = 0; w < p; ++w) {
    const std::vector<int>& held = model.VirtualStagesOf(w);
    if (held.size() != 2 || held[0] != w || held[1] != 2 * p - 1 - w) {
      return false;
    }
  }
  Builder g(model, /*fill_partial_gaps=*/false);
  if (!allowance.empty()) g.SetAllowance(allowance);
  // Stage w holds virtual stage w (first chunk, forward going down) and virtual stage
  // 2p-1-w (second chunk, forward coming back up to the loss on stage 0).
  auto first = [](int w) { return w; };
  auto second = [p](int w) { return 2 * p - 1 - w; };
  auto fits = [&](int w, int virtual_stage) {
    return g.Memory(w) + model.MemoryDelta(kF, virtual_stage) <= model.Limit(w);
  };
  // Places an F whose input is placed and that fits; false otherwise.
  auto put_f = [&](int w, int virtual_stage) {
    if (g.Done(kF, virtual_stage) || g.Ready(kF, virtual_stage) == kInf || !fits(w, virtual_stage)) {
      return false;
    }
    g.Put(kF, virtual_stage);
    return true;
  };
  auto forwards = [&](int w) {
    return g.Next(kF, first(w)) + g.Next(kF, second(w));
  };

  // Warm-up 1: microbatch 0 down the first chunk.
  for (int w = 0; w < p; ++w) {
    if (!put_f(w, first(w))) return false;
  }
  // Warm-up 2: from stage p-1 up, extra first-chunk F's on stages 0..w
  // while they end before the second chunk's first F reaches w and leave
  // room for the F's still to come on w; then w's first second-chunk F.
  for (int w = p - 1; w >= 0; --w) {
    if (w < p - 1) {
      const double arrives = g.Ready(kF, second(w));
      const double room = model.MemoryDelta(kF, first(w)) * (2 + 2 * w);
      while (g.Memory(w) + room <= model.Limit(w) &&
             g.FreeAt(w) + model.Duration(kF, first(w)) <= arrives &&
             !g.Done(kF, first(w))) {
        bool placed = true;
        for (int j = 0; j <= w && placed; ++j) placed = put_f(j, first(j));
        if (!placed) break;
      }
    }
    if (!put_f(w, second(w))) return false;
  }
  // Warm-up 3: each stage w >= 1 catches up with the one above in F's
  // (and in second-chunk F's), stages p-1..w alternating chunks.
  int chunk = 0;
  for (int w = 1; w < p; ++w) {
    while (forwards(w) < forwards(w - 1) ||
           (g.Next(kF, second(w)) <= g.Next(kF, second(w - 1)) &&
            g.Next(kF, second(w - 1)) < m)) {
      bool placed = false;
      for (int j = p - 1; j >= w; --j) {
        placed |= put_f(j, chunk == 0 ? first(j) : second(j));
      }
      chunk = 1 - chunk;
      if (!placed && !put_f(w, first(w)) && !put_f(w, second(w))) break;
    }
  }

  // Steady state and cool-down: rounds of one B, then one F, per stage.
  std::vector<int> b_first, b_second;
  auto left = [&] {
    for (int w = 0; w < p; ++w) {
      if (!g.Done(kB, first(w)) || !g.Done(kB, second(w))) return true;
    }
    return false;
  };
  while (left()) {
    bool progress = false;
    b_first.clear();
    b_second.clear();
    for (int w = 0; w < p; ++w) {
      const int done_a = g.Next(kB, first(w)), done_b = g.Next(kB, second(w));
      if (done_a >= m && done_b >= m) continue;
      // The first chunk's B once its input is there (stage p-1: once its
      // own second-chunk B ran), else the second chunk's.
      const bool take_first =
          done_a < done_b &&
          (w == p - 1 || g.Ready(kB, first(w)) != kInf || done_b >= m);
      (take_first ? b_first : b_second).push_back(w);
    }
    auto put_b = [&](int w, int virtual_stage, bool may_fill_partial) {
      const double ready = g.Ready(kB, virtual_stage);
      if (ready == kInf) return;
      g.FillGap(w, ready, may_fill_partial);
      g.Put(kB, virtual_stage);
      progress = true;
    };
    for (auto it = b_first.rbegin(); it != b_first.rend(); ++it) {
      put_b(*it, first(*it), true);
    }
    for (int w : b_second) {
      put_b(w, second(w), choices.fill_before_second_b);
    }
    for (int w = 0; w < p; ++w) {
      if (g.Done(kF, second(w))) continue;
      int virtual_stage = -1;
      if (g.Next(kF, second(w)) >= g.Next(kF, first(w))) {
        virtual_stage = first(w);
      } else if (w == p - 1 || g.Ready(kF, second(w)) != kInf) {
        virtual_stage = second(w);
      } else if (!g.Done(kF, first(w))) {
        virtual_stage = first(w);
      }
      if (virtual_stage < 0) continue;
      const double ready = g.Ready(kF, virtual_stage);
      if (ready == kInf) continue;
      if (!g.MakeRoom(w, model.MemoryDelta(kF, virtual_stage))) return false;
      g.FillGap(w, ready, choices.fill_before_f);
      g.Put(kF, virtual_stage);
      progress = true;
    }
    if (!progress) return false;
  }
  for (int w = 0; w < p; ++w) g.FlushW(w);
  if (bubbles != nullptr) *bubbles = g.Bubbles();
  *orders = g.Take(spans);
  return true;
}

bool RetimeW(const PassModel& model, const Orders& orders,
             bool fill_partial_gaps, Orders* retimed,
             std::vector<double>* spans) {
  const int p = model.stages();
  Builder g(model, fill_partial_gaps);
  std::vector<size_t> next(p, 0);
  // Stages are advanced like the evaluator does: as far as the inputs of
  // their next F or B are placed; a blocked one is retried when the stage
  // it waits for has placed something.
  std::vector<int> queue(p);
  std::vector<char> queued(p, 1);
  for (int w = 0; w < p; ++w) queue[w] = w;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int w = queue[head];
    queued[w] = 0;
    const std::vector<int32_t>& order = orders[w];
    for (; next[w] < order.size(); ++next[w]) {
      const int32_t id = order[next[w]];
      const Pass pass = model.PassOf(id);
      if (pass == kW) continue;
      const int virtual_stage = model.VirtualStageOf(id);
      if (model.MicrobatchOf(id) != g.Next(pass, virtual_stage)) return false;
      const double ready = g.Ready(pass, virtual_stage);
      if (ready == kInf) break;
      if (pass == kF && !g.MakeRoom(w, model.MemoryDelta(kF, virtual_stage))) {
        return false;
      }
      g.FillGap(w, ready);
      g.Put(pass, virtual_stage);
      const int consumer = model.Consumer(id);
      if (consumer >= 0 && !queued[consumer]) {
        queued[consumer] = 1;
        queue.push_back(consumer);
      }
    }
  }
  for (int w = 0; w < p; ++w) {
    if (next[w] < orders[w].size()) return false;
    g.FlushW(w);
  }
  *retimed = g.Take(spans);
  return true;
}

}  // namespace zbpp::sched::internal
