#include "scheduler/zb_vblocks.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>
#include <vector>

namespace zbpp::sched::internal {
namespace {

constexpr int kPeriod = 6;  // six unit passes per microbatch and stage

// Slot offsets of microbatch 0 on stage w: first-chunk F, second-chunk F,
// second-chunk B, first-chunk B.
struct Offsets {
  int fa, fb, bb, ba;
};

Offsets OffsetsOf(int p, int w, int pace, const VTurnDelays& delays) {
  Offsets o;
  o.fa = pace * w;
  // The forward turns on stage p-1 (first chunk to second), climbs back
  // to stage 0 one slot per stage, turns into the backward there (the
  // loss), goes down at `pace`, turns on stage p-1 and climbs back.
  const int fb_last = pace * (p - 1) + 1 + delays.top;
  o.fb = fb_last + (p - 1 - w);
  const int bb_first = fb_last + (p - 1) + 1 + delays.bottom;
  o.bb = bb_first + pace * w;
  const int ba_last = bb_first + pace * (p - 1) + 1 + delays.back;
  o.ba = ba_last + (p - 1 - w);
  return o;
}

bool Distinct(const Offsets& o) {
  const std::array<int, 4> r = {o.fa % kPeriod, o.fb % kPeriod, o.bb % kPeriod,
                                o.ba % kPeriod};
  for (int i = 0; i < 4; ++i) {
    for (int k = i + 1; k < 4; ++k) {
      if (r[i] == r[k]) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<VTurnDelays> VTurnDelayOptions(int stages, int pace,
                                           int max_extra) {
  std::vector<VTurnDelays> options;
  int smallest = -1;
  for (int total = 0; total < 3 * kPeriod; ++total) {
    if (smallest >= 0 && total > smallest + max_extra) break;
    for (int top = 0; top <= total; ++top) {
      for (int bottom = 0; top + bottom <= total; ++bottom) {
        const VTurnDelays delays{top, bottom, total - top - bottom};
        bool ok = true;
        for (int w = 0; w < stages && ok; ++w) {
          ok = Distinct(OffsetsOf(stages, w, pace, delays));
        }
        if (!ok) continue;
        if (smallest < 0) smallest = total;
        options.push_back(delays);
      }
    }
  }
  return options;
}

Orders VBlockOrders(const PassModel& model, int pace,
                    const VTurnDelays& delays) {
  const int p = model.stages(), m = model.microbatches();
  Orders orders(p);
  // Slots are small integers, distinct per stage for F and B: lay the
  // passes out in a slot array instead of sorting them.
  std::vector<int32_t> at_slot;
  std::vector<int32_t> pending_w;
  for (int w = 0; w < p; ++w) {
    const Offsets o = OffsetsOf(p, w, pace, delays);
    const int a = w, b = 2 * p - 1 - w;
    const int last = std::max({o.fa, o.fb, o.bb, o.ba}) + kPeriod * (m - 1);
    at_slot.assign(last + 1, -1);
    for (int j = 0; j < m; ++j) {
      const int base = kPeriod * j;
      at_slot[base + o.fa] = model.Id(kF, a, j);
      at_slot[base + o.fb] = model.Id(kF, b, j);
      at_slot[base + o.bb] = model.Id(kB, b, j);
      at_slot[base + o.ba] = model.Id(kB, a, j);
    }
    // Each W takes the first free slot after its B, in the order of the
    // B's (so W's stay first-in first-out); the rest run at the end.
    pending_w.clear();
    size_t head = 0;
    std::vector<int32_t>& order = orders[w];
    for (int32_t id : at_slot) {
      if (id < 0) {
        if (head < pending_w.size()) order.push_back(pending_w[head++]);
        continue;
      }
      order.push_back(id);
      if (model.PassOf(id) == kB) {
        pending_w.push_back(
            model.Id(kW, model.VirtualStageOf(id), model.MicrobatchOf(id)));
      }
    }
    order.insert(order.end(), pending_w.begin() + head, pending_w.end());
  }
  return orders;
}

namespace {

// The passes of a V block on stage w, by kind: F and B of the first chunk
// (virtual stage w), of the second chunk (virtual stage 2p-1-w), and the stage's W's,
// counted but not named while squeezing (the k-th W follows the k-th B).
enum Kind { kFa = 0, kFb = 1, kBb = 2, kBa = 3, kAnyW = 4, kKinds = 5 };

// Unit-time slots of every pass of a V block, and the squeezing of
// SqueezedVBlockOrders on them.
class SlotBlock {
 public:
  SlotBlock(int p, int m, int pace, const VTurnDelays& delays) : p_(p), m_(m) {
    for (int k = 0; k < kKinds; ++k) slot_[k].assign(p * Count(k), -1);
    for (int w = 0; w < p; ++w) {
      const Offsets o = OffsetsOf(p, w, pace, delays);
      for (int j = 0; j < m; ++j) {
        At(kFa, w, j) = o.fa + kPeriod * j;
        At(kFb, w, j) = o.fb + kPeriod * j;
        At(kBb, w, j) = o.bb + kPeriod * j;
        At(kBa, w, j) = o.ba + kPeriod * j;
      }
    }
  }

  // W's of stage w (anonymous, first-in first-out) into its free slots
  // after their B's; those left over right after its last pass.
  void PlaceAnyW() {
    for (int w = 0; w < p_; ++w) {
      std::vector<int> kind_at = Layout(w, /*with_w=*/false);
      int pending = 0, k = 0;
      size_t t = 0;
      for (; t < kind_at.size(); ++t) {
        if (kind_at[t] == kBb || kind_at[t] == kBa) ++pending;
        if (kind_at[t] < 0 && pending > 0) {
          At(kAnyW, w, k++) = static_cast<int>(t);
          --pending;
        }
      }
      for (; pending > 0; --pending) At(kAnyW, w, k++) = static_cast<int>(t++);
    }
  }

  // Moves the passes of the warm-up (with_w) and of the cool-down to the
  // earliest free slot their inputs allow, keeping every stage's
  // activation count within the largest one of the block: W's explicit
  // (with_w) or implied by the free slots after B's.
  void Squeeze(bool with_w) {
    const std::vector<Pass4> order = GlobalOrder(with_w);
    std::vector<std::vector<int>> kind_at(p_);
    std::vector<LevelTree> level(p_);
    std::vector<ImpliedCount> implied(with_w ? 0 : p_);
    std::vector<std::vector<char>> taken(p_);
    int peak = 0;
    for (int w = 0; w < p_; ++w) {
      kind_at[w] = Layout(w, with_w);
      taken[w].assign(kind_at[w].size(), 0);
      if (with_w) {
        std::vector<int> count(kind_at[w].size(), 0);
        for (size_t t = 0; t < count.size(); ++t) {
          count[t] = (t > 0 ? count[t - 1] : 0) + Activation(kind_at[w][t]);
        }
        level[w].Build(count);
      }
      if (!with_w) implied[w].Update(kind_at[w], 0);
      peak = std::max(peak, with_w ? level[w].Max() : implied[w].Peak());
    }
    int phase = 0;  // 0 warm-up, 1 steady state, 2 cool-down
    ResetBs();
    for (const Pass4& pass : order) {
      const int w = pass.stage;
      int& at = At(pass.kind, w, pass.mb);
      if (phase == 0 && pass.kind == kBa && w == 0) phase = 1;
      const bool movable = phase == 2 || (phase == 0 && with_w);
      if (phase == 1 && pass.kind == kFa && pass.mb == m_ - 1) phase = 2;
      if (movable) {
        const int from = at;
        int earliest = EarliestSlot(pass);
        if (with_w) {
          earliest = FirstFitting(level[w], pass.kind, earliest, from, peak);
        }
        for (int t = earliest; t < from; ++t) {
          if (taken[w][t]) continue;
          if (with_w || FitsImplied(implied[w], kind_at[w], pass.kind, t,
                                    from, peak)) {
            at = t;
            break;
          }
        }
        if (at != from) {
          kind_at[w][at] = pass.kind;
          kind_at[w][from] = -1;
          if (with_w) {
            level[w].Add(at, from, Activation(pass.kind));
          } else {
            implied[w].Update(kind_at[w], at);
          }
        }
      }
      taken[w][at] = 1;
      NoteB(pass, at);
    }
  }

  // Every pass as early as its inputs and its stage allow with unit times
  // and in the current order (the evaluator's semantics, every hop free).
  void Compact(bool with_w) {
    std::vector<int> free_at(p_, 0);
    ResetBs();
    for (const Pass4& pass : GlobalOrder(with_w)) {
      const int start = std::max(free_at[pass.stage], EarliestSlot(pass));
      At(pass.kind, pass.stage, pass.mb) = start;
      free_at[pass.stage] = start + 1;
      NoteB(pass, start);
    }
  }

  // The per-stage orders: F's and B's by slot, W's per chunk into the free
  // slots, the second chunk's first (then the leftovers, in that order).
  Orders ToOrders(const PassModel& model) {
    Orders orders(p_);
    for (int w = 0; w < p_; ++w) {
      const int a = w, b = 2 * p_ - 1 - w;
      const std::vector<int> kind_at = Layout(w, /*with_w=*/false);
      std::vector<int32_t>& order = orders[w];
      int next[kKinds] = {};
      int w_done[2] = {}, b_done[2] = {};
      for (int kind : kind_at) {
        if (kind >= 0) {
          const int virtual_stage = kind == kFa || kind == kBa ? a : b;
          order.push_back(model.Id(kind <= kFb ? kF : kB, virtual_stage, next[kind]++));
          if (kind == kBb) ++b_done[1];
          if (kind == kBa) ++b_done[0];
          continue;
        }
        for (int c : {1, 0}) {
          if (w_done[c] < b_done[c]) {
            order.push_back(model.Id(kW, c == 0 ? a : b, w_done[c]++));
            break;
          }
        }
      }
      for (int c : {1, 0}) {
        while (w_done[c] < m_) order.push_back(model.Id(kW, c == 0 ? a : b, w_done[c]++));
      }
    }
    return orders;
  }

 private:
  struct Pass4 {
    int slot, stage, kind, mb;
  };

  int Count(int kind) const { return kind == kAnyW ? 2 * m_ : m_; }
  int& At(int kind, int w, int mb) { return slot_[kind][w * Count(kind) + mb]; }

  static int Activation(int kind) {
    return kind == kFa || kind == kFb ? 1 : kind == kAnyW ? -1 : 0;
  }

  // Per slot of stage w, the kind of the pass there or -1.
  std::vector<int> Layout(int w, bool with_w) {
    int last = 0;
    for (int k = 0; k < kKinds; ++k) {
      if (k == kAnyW && !with_w) continue;
      for (int j = 0; j < Count(k); ++j) last = std::max(last, At(k, w, j));
    }
    std::vector<int> kind_at(last + 1, -1);
    for (int k = 0; k < kKinds; ++k) {
      if (k == kAnyW && !with_w) continue;
      for (int j = 0; j < Count(k); ++j) kind_at[At(k, w, j)] = k;
    }
    return kind_at;
  }

  // Every pass by slot, ties by stage, kind, microbatch (a counting sort:
  // slots are small integers).
  std::vector<Pass4> GlobalOrder(bool with_w) {
    const int kinds = with_w ? kKinds : kAnyW;
    int last = 0;
    for (int k = 0; k < kinds; ++k) {
      for (int t : slot_[k]) last = std::max(last, t);
    }
    std::vector<int> first(last + 2, 0);
    for (int k = 0; k < kinds; ++k) {
      for (int t : slot_[k]) ++first[t + 1];
    }
    for (int t = 0; t <= last; ++t) first[t + 1] += first[t];
    std::vector<Pass4> order(first[last + 1]);
    for (int w = 0; w < p_; ++w) {
      for (int k = 0; k < kinds; ++k) {
        for (int j = 0; j < Count(k); ++j) {
          const int t = At(k, w, j);
          order[first[t]++] = {t, w, k, j};
        }
      }
    }
    return order;
  }

  // One past the latest slot of the passes `pass` waits for: the previous
  // microbatch's pass of its kind, its input from the neighbouring stage
  // (or from its own stage at the turns of the V), its B for a W.
  int EarliestSlot(const Pass4& pass) {
    const int w = pass.stage, j = pass.mb;
    int dep = -1;
    if (j > 0) dep = At(pass.kind, w, j - 1);
    switch (pass.kind) {
      case kFa:
        if (w > 0) dep = std::max(dep, At(kFa, w - 1, j));
        break;
      case kFb:
        dep = std::max(dep, At(kFa, w, j));
        if (w + 1 < p_) dep = std::max(dep, At(kFb, w + 1, j));
        break;
      case kBb:
        dep = std::max(dep, At(kFb, w, j));
        if (w > 0) dep = std::max(dep, At(kBb, w - 1, j));
        break;
      case kBa:
        dep = std::max(dep, At(kBb, w, j));
        if (w + 1 < p_) dep = std::max(dep, At(kBa, w + 1, j));
        break;
      case kAnyW:
        dep = std::max(dep, b_slots_[w][j]);
        break;
    }
    return dep + 1;
  }

  // The B's of each stage seen so far in the global order, by slot: the
  // k-th W waits for the k-th of them.
  void ResetBs() { b_slots_.assign(p_, {}); }
  void NoteB(const Pass4& pass, int slot) {
    if (pass.kind != kBb && pass.kind != kBa) return;
    std::vector<int>& b = b_slots_[pass.stage];
    b.insert(std::upper_bound(b.begin(), b.end(), slot), slot);
  }

  // A stage's activation count after each slot (F +1, W -1) under range
  // additions, with the last slot of a range at or above a value: a segment
  // tree whose nodes hold the maximum of their range and an addition not
  // pushed down. O(log slots) per operation.
  class LevelTree {
   public:
    void Build(const std::vector<int>& count) {
      n_ = std::max<int>(1, static_cast<int>(count.size()));
      max_.assign(4 * n_, 0);
      add_.assign(4 * n_, 0);
      Build(1, 0, n_, count);
    }
    int Max() const { return max_[1]; }
    // Adds `delta` to the slots [lo, hi).
    void Add(int lo, int hi, int delta) { Add(1, 0, n_, lo, hi, delta); }
    // The last slot of [lo, hi) whose count is >= `value`, or -1.
    int LastAtLeast(int lo, int hi, int value) const {
      return Last(1, 0, n_, lo, hi, value);
    }

   private:
    void Build(int node, int nl, int nr, const std::vector<int>& count) {
      if (nr - nl == 1) {
        max_[node] = nl < static_cast<int>(count.size()) ? count[nl] : 0;
        return;
      }
      const int mid = (nl + nr) / 2;
      Build(2 * node, nl, mid, count);
      Build(2 * node + 1, mid, nr, count);
      max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
    }
    void Add(int node, int nl, int nr, int lo, int hi, int delta) {
      if (hi <= nl || nr <= lo) return;
      if (lo <= nl && nr <= hi) {
        max_[node] += delta;
        add_[node] += delta;
        return;
      }
      const int mid = (nl + nr) / 2;
      Add(2 * node, nl, mid, lo, hi, delta);
      Add(2 * node + 1, mid, nr, lo, hi, delta);
      max_[node] =
          std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
    }
    int Last(int node, int nl, int nr, int lo, int hi, int value) const {
      if (hi <= nl || nr <= lo || max_[node] < value) return -1;
      if (nr - nl == 1) return nl;
      const int mid = (nl + nr) / 2;
      const int right =
          Last(2 * node + 1, mid, nr, lo, hi, value - add_[node]);
      return right >= 0 ? right
                        : Last(2 * node, nl, mid, lo, hi, value - add_[node]);
    }

    int n_ = 1;
    std::vector<int> max_, add_;
  };

  // The earliest slot from `lo` on that a pass of `kind` at slot `from`
  // may move to without the count exceeding `peak`: only an F raises it,
  // by one over the slots it moves across, so the slots that fit are those
  // after the last one already at the peak.
  static int FirstFitting(const LevelTree& level, int kind, int lo, int from,
                          int peak) {
    if (Activation(kind) <= 0 || from <= lo) return lo;
    return std::max(lo, level.LastAtLeast(lo, from, peak) + 1);
  }

  // A stage's activation count when each free slot runs one W owed by an
  // earlier B, kept per slot so that a move is checked from its target
  // slot on (the cool-down moves are near the end of the layout).
  class ImpliedCount {
   public:
    // Recomputes the state from slot `from` on.
    void Update(const std::vector<int>& kind_at, int from) {
      const int n = static_cast<int>(kind_at.size());
      count_.resize(n + 1);
      pending_.resize(n + 1);
      peak_.resize(n + 1);
      if (from == 0) count_[0] = pending_[0] = peak_[0] = 0;
      for (int t = from; t < n; ++t) {
        int count = count_[t], pending = pending_[t];
        Step(kind_at[t], &count, &pending);
        count_[t + 1] = count;
        pending_[t + 1] = pending;
        peak_[t + 1] = std::max(peak_[t], count);
      }
    }
    int Peak() const { return peak_.back(); }
    // Largest count of `kind_at`, which differs from the layout of the last
    // Update only from slot `from` on.
    int PeakWith(const std::vector<int>& kind_at, int from) const {
      int count = count_[from], pending = pending_[from], peak = peak_[from];
      for (size_t t = from; t < kind_at.size(); ++t) {
        Step(kind_at[t], &count, &pending);
        peak = std::max(peak, count);
      }
      return peak;
    }

   private:
    static void Step(int kind, int* count, int* pending) {
      if (kind < 0) {
        if (*pending > 0) --*pending, --*count;
      } else if (kind == kFa || kind == kFb) {
        ++*count;
      } else {
        ++*pending;
      }
    }
    std::vector<int> count_, pending_, peak_;
  };

  // Whether moving a pass of `kind` from slot `from` to the earlier `to`
  // keeps the stage's implied count within `peak`.
  static bool FitsImplied(const ImpliedCount& implied,
                          std::vector<int>& kind_at, int kind, int to,
                          int from, int peak) {
    kind_at[to] = kind;
    kind_at[from] = -1;
    const bool fits = implied.PeakWith(kind_at, to) <= peak;
    kind_at[from] = kind;
    kind_at[to] = -1;
    return fits;
  }

  int p_, m_;
  std::vector<int> slot_[kKinds];
  std::vector<std::vector<int>> b_slots_;
};

}  // namespace

Orders SqueezedVBlockOrders(const PassModel& model, int pace,
                            const VTurnDelays& delays) {
  SlotBlock block(model.stages(), model.microbatches(), pace, delays);
  block.PlaceAnyW();
  block.Squeeze(/*with_w=*/true);
  block.Compact(/*with_w=*/true);
  block.Squeeze(/*with_w=*/false);
  block.PlaceAnyW();
  block.Compact(/*with_w=*/true);
  return block.ToOrders(model);
}

Orders ZbVOrders(const PassModel& model) {
  const int p = model.stages(), m = model.microbatches();
  // The pattern needs 2p-1 microbatches in flight to close its warm-up;
  // with fewer, build it for 2p-1 and drop the ones that do not exist.
  const int n = std::max(m, 2 * p - 1);
  Orders orders(p);
  for (int r = 0; r < p; ++r) {
    const int a = r, b = 2 * p - 1 - r;
    int next[3][2] = {};  // [pass][chunk]: next microbatch
    std::vector<int32_t>& order = orders[r];
    auto run = [&](Pass pass, int chunk) {
      const int mb = next[pass][chunk]++;
      if (mb < m) order.push_back(model.Id(pass, chunk == 0 ? a : b, mb));
    };
    // `times` repetitions of a group of (pass, chunk).
    auto repeat = [&](int times,
                      std::initializer_list<std::pair<Pass, int>> group) {
      for (int k = 0; k < times; ++k) {
        for (const auto& [pass, chunk] : group) run(pass, chunk);
      }
    };
    repeat(2 * (p - r) - 1, {{kF, 0}});
    repeat(r, {{kF, 1}, {kF, 0}});
    repeat(p - r, {{kF, 1}, {kB, 1}, {kW, 1}});
    while (next[kF][1] < n) {
      if (next[kF][0] < n) run(kF, 0);
      repeat(1, {{kB, 0}, {kW, 0}, {kF, 1}, {kB, 1}, {kW, 1}});
    }
    repeat(r, {{kB, 0}, {kB, 1}});
    repeat(p - r, {{kB, 0}, {kW, 0}});
    while (next[kW][1] < n) run(kW, 1);
    while (next[kW][0] < n) run(kW, 0);
  }
  return orders;
}

}  // namespace zbpp::sched::internal
