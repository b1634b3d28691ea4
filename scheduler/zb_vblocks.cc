#include "scheduler/zb_vblocks.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>
#include <vector>

namespace zbpp::sched::internal {
namespace {

constexpr int kPeriod = 6;  // six unit passes per microbatch and worker

// Slot offsets of microbatch 0 on worker w: first-chunk F, second-chunk F,
// second-chunk B, first-chunk B.
struct Offsets {
  int fa, fb, bb, ba;
};

Offsets OffsetsOf(int p, int w, int pace, const VTurnDelays& delays) {
  Offsets o;
  o.fa = pace * w;
  // The forward turns on worker p-1 (first chunk to second), climbs back
  // to worker 0 one slot per worker, turns into the backward there (the
  // loss), goes down at `pace`, turns on worker p-1 and climbs back.
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

std::vector<VTurnDelays> VTurnDelayOptions(int workers, int pace,
                                           int max_extra) {
  std::vector<VTurnDelays> options;
  int smallest = -1;
  for (int total = 0; total < 3 * kPeriod; ++total) {
    if (smallest >= 0 && total > smallest + max_extra) break;
    for (int top = 0; top <= total; ++top) {
      for (int bottom = 0; top + bottom <= total; ++bottom) {
        const VTurnDelays delays{top, bottom, total - top - bottom};
        bool ok = true;
        for (int w = 0; w < workers && ok; ++w) {
          ok = Distinct(OffsetsOf(workers, w, pace, delays));
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
  const int p = model.workers(), m = model.microbatches();
  Orders orders(p);
  // Slots are small integers, distinct per worker for F and B: lay the
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
            model.Id(kW, model.StageOf(id), model.MicrobatchOf(id)));
      }
    }
    order.insert(order.end(), pending_w.begin() + head, pending_w.end());
  }
  return orders;
}

Orders ZbVOrders(const PassModel& model) {
  const int p = model.workers(), m = model.microbatches();
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
