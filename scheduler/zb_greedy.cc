#include "scheduler/zb_greedy.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "scheduler/zb_greedy_builder.h"

namespace zbpp::sched::internal {
namespace {

// Warm-up of LoopGreedy, part 1: microbatch 0 down the pipe. False when a
// virtual stage cannot hold it.
bool PutFirstMicrobatch(const PassModel& model, GreedyBuilder& g) {
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
std::vector<int> WarmupExtras(const PassModel& model, const GreedyBuilder& g,
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
  GreedyBuilder g(model, choices.fill_partial_gaps);
  if (!PutFirstMicrobatch(model, g)) return {};
  return WarmupExtras(model, g, choices);
}

bool LoopGreedy(const PassModel& model, const GreedyChoices& choices,
                Orders* orders, std::vector<double>* spans,
                LoopGreedyTrace* trace) {
  const int p = model.stages(), m = model.microbatches();
  GreedyBuilder g(model, choices.fill_partial_gaps);
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
  GreedyBuilder g(model, choices.fill_partial_gaps);
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
  GreedyBuilder g(model, /*fill_partial_gaps=*/false);
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
  GreedyBuilder g(model, fill_partial_gaps);
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
