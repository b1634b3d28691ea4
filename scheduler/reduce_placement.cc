#include "scheduler/reduce_placement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

bool IsWeightPass(PassKind kind) {
  return kind == PassKind::kW || kind == PassKind::kBW;
}

// Per virtual stage, the position of its last W or BW in its stage's list.
std::vector<int> LastWeightPass(const Schedule& schedule) {
  std::vector<int> last(schedule.num_virtual_stages(), -1);
  for (const std::vector<Action>& list : schedule.actions) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (IsWeightPass(list[i].kind)) last[list[i].virtual_stage.value()] = static_cast<int>(i);
    }
  }
  return last;
}

// `list` (one stage's passes) with each virtual stage's reduction right after its
// last W or BW.
std::vector<Action> WithReductionsAfterLastBackward(
    const std::vector<Action>& list, const std::vector<int>& last) {
  std::vector<Action> out;
  out.reserve(list.size() + 2);
  for (size_t i = 0; i < list.size(); ++i) {
    out.push_back(list[i]);
    if (IsWeightPass(list[i].kind) && last[list[i].virtual_stage.value()] == static_cast<int>(i)) {
      out.push_back({PassKind::kReduce, list[i].virtual_stage, 0});
    }
  }
  return out;
}

Schedule AfterLastBackward(const Schedule& schedule) {
  const std::vector<int> last = LastWeightPass(schedule);
  Schedule out = schedule;
  for (std::vector<Action>& list : out.actions) {
    list = WithReductionsAfterLastBackward(list, last);
  }
  return out;
}

Schedule AfterSchedule(const Schedule& schedule) {
  const std::vector<int> last = LastWeightPass(schedule);
  Schedule out = schedule;
  for (int w = 0; w < schedule.stages; ++w) {
    std::vector<int> virtual_stages;
    for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
      if (schedule.StageOf(VirtualStage(s)) == Stage(w)) virtual_stages.push_back(s);
    }
    std::sort(virtual_stages.begin(), virtual_stages.end(),
              [&](int a, int b) { return last[a] < last[b]; });
    for (int s : virtual_stages) out.actions[w].push_back({PassKind::kReduce, VirtualStage(s), 0});
  }
  return out;
}

// The solver's view of one stage: its passes re-timed alone, with the
// arrivals from other stages fixed at what the after-last-backward
// simulation gave. Reordering only W passes never delays an F or B here
// (checked), so every other stage's arrivals can only come earlier, and the
// real schedule ends no later than this estimate (dependencies are max-plus
// in the start times).
class StageModel {
 public:
  // What one order of the stage's passes gives.
  struct Eval {
    double end_seconds = 0;     // later of its last pass and last reduction
    double peak_bytes = 0;      // activation memory, as the simulator counts it
    bool no_pass_later = true;  // no F or B starts after its base time
  };

  StageModel(const Problem& problem, const Schedule& base,
              const SimulationResult& sim, int stage)
      : problem_(problem), owner_(base.stage_of), stage_(stage),
        m_(problem.microbatches), local_(problem.num_virtual_stages(), -1) {
    int held = 0;
    for (int s = 0; s < problem.num_virtual_stages(); ++s) {
      if (owner_[s] == stage) local_[s] = held++;
    }
    const int n = problem.num_virtual_stages() * m_;
    f_end_.assign(n, 0);
    b_end_.assign(n, 0);
    f_start_.assign(n, 0);
    b_start_.assign(n, 0);
    weight_passes_.assign(held, 0);
    for (int w = 0; w < problem.stages; ++w) {
      const std::vector<Action>& list = base.actions[w];
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        const ActionTiming& t = sim.timings[w][i];
        const int k = a.virtual_stage.value() * m_ + a.microbatch;
        if (a.kind == PassKind::kF) {
          f_end_[k] = t.end_seconds;
          f_start_[k] = t.start_seconds;
        } else if (a.kind == PassKind::kB || a.kind == PassKind::kBW) {
          b_end_[k] = t.end_seconds;
          b_start_[k] = t.start_seconds;
        }
        if (w == stage && IsWeightPass(a.kind)) ++weight_passes_[local_[a.virtual_stage.value()]];
      }
    }
    // Relative, so that it does not depend on the time unit.
    slack_ = 1e-9 * std::max(1.0, sim.step_seconds);
  }

  // Times `order` (the stage's passes, no reductions) with each virtual stage's
  // reduction issued at the end of its last W or BW.
  Eval Evaluate(const std::vector<Action>& order) const {
    Eval e;
    // End of F and of B or BW of this stage's virtual stages, re-timed.
    std::vector<double> f_end(weight_passes_.size() * m_, 0);
    std::vector<double> b_end(weight_passes_.size() * m_, 0);
    std::vector<int> weight_left = weight_passes_;
    double free_at = 0, comm_free_at = 0, memory = 0;
    for (const Action& a : order) {
      const int own = local_[a.virtual_stage.value()] * m_ + a.microbatch;
      const int k = a.virtual_stage.value() * m_ + a.microbatch;
      const VirtualStageCost& c = problem_.CostOf(a.virtual_stage);
      double start = free_at;
      if (a.kind == PassKind::kF) {
        if (a.virtual_stage.value() > 0) start = std::max(start, Arrival(f_end, f_end_, a.virtual_stage.value() - 1, a.microbatch));
      } else if (a.kind == PassKind::kW) {
        start = std::max(start, b_end[own]);
      } else {  // B or BW: no reduction is in `order`
        start = std::max(start, f_end[own]);
        if (a.virtual_stage.value() + 1 < problem_.num_virtual_stages()) {
          start = std::max(start, Arrival(b_end, b_end_, a.virtual_stage.value() + 1, a.microbatch));
        }
      }
      if (a.kind != PassKind::kW &&
          start > (a.kind == PassKind::kF ? f_start_[k] : b_start_[k]) + slack_) {
        e.no_pass_later = false;
      }
      free_at = start + PassSeconds(c, a, 1);
      memory += PassMemoryBytes(c, a, 1);
      e.peak_bytes = std::max(e.peak_bytes, memory);
      if (a.kind == PassKind::kF) f_end[own] = free_at;
      if (a.kind == PassKind::kB || a.kind == PassKind::kBW) b_end[own] = free_at;
      if (IsWeightPass(a.kind) && --weight_left[local_[a.virtual_stage.value()]] == 0) {
        comm_free_at = std::max(comm_free_at, free_at) + c.reduce_seconds;
      }
    }
    e.end_seconds = std::max(free_at, comm_free_at);
    return e;
  }

 private:
  // When the pass of (`virtual stage`, `microbatch`) that a pass on this stage
  // needs is there: re-timed (`own`) on this stage, else as simulated
  // (`base`) plus one hop.
  double Arrival(const std::vector<double>& own, const std::vector<double>& base,
                 int virtual_stage, int microbatch) const {
    if (owner_[virtual_stage] == stage_) return own[local_[virtual_stage] * m_ + microbatch];
    return base[virtual_stage * m_ + microbatch] + problem_.comm_seconds;
  }

  const Problem& problem_;
  const std::vector<int>& owner_;
  const int stage_;
  const int m_;
  std::vector<int> local_;  // per virtual stage, its index among the stage's, or -1
  std::vector<double> f_end_, b_end_, f_start_, b_start_;  // simulated
  std::vector<int> weight_passes_;  // per own virtual stage: its W and BW passes
  double slack_ = 0;
};

// `order` with the last `count` W passes of virtual stages other than `virtual stage` that
// precede `virtual stage`'s last W moved to right after it (in their order), so that
// `virtual stage`'s reduction is issued earlier and overlaps them. Moving a W later
// keeps it after its B.
std::vector<Action> HoldBack(const std::vector<Action>& order, VirtualStage virtual_stage,
                             int count) {
  int last = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].kind == PassKind::kW && order[i].virtual_stage == virtual_stage) last = static_cast<int>(i);
  }
  std::vector<char> moved(order.size(), 0);
  for (int i = last - 1, left = count; i >= 0 && left > 0; --i) {
    if (order[i].kind == PassKind::kW && order[i].virtual_stage != virtual_stage) {
      moved[i] = 1;
      --left;
    }
  }
  std::vector<Action> out, held;
  out.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    if (moved[i]) {
      held.push_back(order[i]);
      continue;
    }
    out.push_back(order[i]);
    if (static_cast<int>(i) == last) out.insert(out.end(), held.begin(), held.end());
  }
  return out;
}

// `order` with every W of `virtual stage` after position `at` moved to right before
// it (in their order): they jump the F or B pass there, which may be
// waiting for another stage, so that `virtual stage`'s W passes end earlier. The
// W passes stay after `virtual stage`'s last B, which precedes `at`.
std::vector<Action> PullForward(const std::vector<Action>& order, VirtualStage virtual_stage,
                                int at) {
  std::vector<Action> out(order.begin(), order.begin() + at), rest;
  for (size_t i = at; i < order.size(); ++i) {
    const bool pulled = order[i].kind == PassKind::kW && order[i].virtual_stage == virtual_stage;
    (pulled ? out : rest).push_back(order[i]);
  }
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// The positions PullForward may take for `virtual stage`: every F or B pass after
// `virtual stage`'s last B and before its last W.
std::vector<int> PullPoints(const std::vector<Action>& order, VirtualStage virtual_stage) {
  int last_b = -1, last_w = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].virtual_stage != virtual_stage) continue;
    if (order[i].kind == PassKind::kB) last_b = static_cast<int>(i);
    if (order[i].kind == PassKind::kW) last_w = static_cast<int>(i);
  }
  std::vector<int> points;
  for (int i = last_b + 1; i < last_w; ++i) {
    if (order[i].kind != PassKind::kW) points.push_back(i);
  }
  return points;
}

// The seconds of each W pass of other virtual stages that precedes `virtual stage`'s last W
// in `order`, nearest first: HoldBack's candidates in the order it takes them.
std::vector<double> HoldableBefore(const Problem& problem,
                                   const std::vector<Action>& order, VirtualStage virtual_stage) {
  int last = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].kind == PassKind::kW && order[i].virtual_stage == virtual_stage) last = static_cast<int>(i);
  }
  std::vector<double> seconds;
  for (int i = last - 1; i >= 0; --i) {
    if (order[i].kind == PassKind::kW && order[i].virtual_stage != virtual_stage) {
      seconds.push_back(problem.CostOf(order[i].virtual_stage).w_seconds);
    }
  }
  return seconds;
}

// One stage's W order, improved greedily: each round tries every hold-back
// (virtual stage, count) and pull-forward (virtual stage, position) and keeps the best,
// until none helps. `target`: the
// makespan the passes alone set; ending within it is as good as it gets, so
// ties there go to the fewest W passes held back (least extra memory).
// Holding back more W work than all the stage's reductions last (plus one
// pass, for a gap it may fill) only adds memory: the count stops there,
// which keeps a stage at O(passes * reduction / T_W) evaluations.
std::vector<Action> SolveStage(const Problem& problem, const StageModel& model,
                                const std::vector<Action>& passes,
                                const std::vector<int>& virtual_stages, double start,
                                double target, double limit_bytes,
                                double slack) {
  auto value = [&](const StageModel::Eval& e) {
    return std::max(e.end_seconds - start, target);
  };
  double reduce = 0, longest = 0;
  for (int virtual_stage : virtual_stages) {
    const VirtualStageCost& c = problem.virtual_stages[virtual_stage];
    reduce += c.reduce_seconds;
    longest = std::max({longest, c.f_seconds, c.b_seconds + c.w_seconds});
  }
  const double enough = reduce + longest;
  std::vector<Action> current = passes;
  double current_value = value(model.Evaluate(current));
  for (size_t round = 0; round < virtual_stages.size() && current_value > target + slack;
       ++round) {
    std::vector<Action> best;
    double best_value = current_value - slack;
    auto consider = [&](std::vector<Action> candidate) {
      const StageModel::Eval e = model.Evaluate(candidate);
      if (!e.no_pass_later || e.peak_bytes > limit_bytes) return;
      if (value(e) < best_value) {
        best_value = value(e);
        best = std::move(candidate);
      }
    };
    for (const int vs : virtual_stages) {
      const VirtualStage virtual_stage(vs);
      const std::vector<double> holdable = HoldableBefore(problem, current, virtual_stage);
      double held = 0;
      for (int count = 1; count <= static_cast<int>(holdable.size()) && held <= enough;
           ++count) {
        held += holdable[count - 1];
        consider(HoldBack(current, virtual_stage, count));
      }
      for (int at : PullPoints(current, virtual_stage)) consider(PullForward(current, virtual_stage, at));
    }
    if (best.empty()) break;
    current = std::move(best);
    current_value = best_value;
  }
  return current;
}

// Bucket counts the solver tries: every chunk of the GPT has at least one
// transformer block, four linear layers (stage/model/gpt.h), so four
// non-empty buckets always exist.
constexpr int kBucketChoices[] = {2, 4};

// `schedule` (reductions placed, none partial) with the last `held` W passes
// of `virtual stage` run bucket by bucket in `buckets` buckets: the virtual stage's earlier
// W passes stay whole and where they are; at the position of its last W
// come, for each bucket b, W@b of every held microbatch (in their order)
// then REDUCE_GRAD@b, and the virtual stage's whole reduction goes. Bucket b's
// reduction then overlaps the W work of buckets b+1.. (Zero Bubble paper
// §2: W has no successor but the optimizer, so holding it back delays
// nothing but memory).
Schedule Bucketed(const Schedule& schedule, VirtualStage virtual_stage, int held, int buckets) {
  Schedule out = schedule;
  const Stage s = schedule.StageOf(virtual_stage);
  const std::vector<Action>& list = schedule.ActionsOf(s);
  std::vector<int> ws;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind == PassKind::kW && list[i].virtual_stage == virtual_stage) ws.push_back(static_cast<int>(i));
  }
  const std::vector<int> tail(ws.end() - std::min<int>(held, ws.size()), ws.end());
  std::vector<Action>& result = out.ActionsOf(s);
  result.clear();
  size_t next = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    if (a.kind == PassKind::kReduce && a.virtual_stage == virtual_stage) continue;
    if (next < tail.size() && tail[next] == static_cast<int>(i)) {
      ++next;
      if (next < tail.size()) continue;
      for (int b = 0; b < buckets; ++b) {
        for (int j : tail) result.push_back({PassKind::kW, virtual_stage, list[j].microbatch, b});
        result.push_back({PassKind::kReduce, virtual_stage, 0, b});
      }
      continue;
    }
    result.push_back(a);
  }
  return out;
}

// Whether `a` is the better simulation: a shorter makespan, or the same
// and a shorter step, beyond `slack`.
bool Shorter(const SimulationResult& a, const SimulationResult& b, double slack) {
  if (a.makespan_seconds < b.makespan_seconds - slack) return true;
  return a.makespan_seconds <= b.makespan_seconds + slack &&
         a.step_seconds < b.step_seconds - slack;
}

// The bucket phase of kSolved: while the makespan is set by a stage whose
// reductions end after its passes (the one with the most exposed, when
// several), try splitting one of its virtual stages' last W passes and its
// reduction into buckets (Bucketed, over kBucketChoices and 1.. held W
// passes, while holding one more still shortens the makespan and the held
// W work is below the reduction plus one W) and keep the best change that
// shortens the simulated step within each stage's memory bound. Each virtual stage
// is tried once: a few simulations per virtual stage of the critical stages.
Schedule SolveBuckets(const Problem& problem, Schedule schedule, SimulationResult sim,
                      double slack) {
  std::vector<double> limit(problem.stages);
  for (int w = 0; w < problem.stages; ++w) {
    limit[w] = std::max(problem.limit_of(w), sim.peak_memory_bytes[w]);
  }
  std::vector<char> tried(problem.num_virtual_stages(), 0);
  while (true) {
    // The stage that sets the makespan with the most exposed reduction.
    int critical = -1;
    for (int w = 0; w < problem.stages; ++w) {
      const auto& t = sim.timings[w];
      if (t.empty() || sim.exposed_reduce_seconds_per_stage[w] <= slack) continue;
      double end = t.front().start_seconds;
      for (const ActionTiming& x : t) end = std::max(end, x.end_seconds);
      if (end - t.front().start_seconds < sim.makespan_seconds - slack) continue;
      if (critical < 0 || sim.exposed_reduce_seconds_per_stage[w] >
                              sim.exposed_reduce_seconds_per_stage[critical]) {
        critical = w;
      }
    }
    std::vector<VirtualStage> candidates;
    for (const Action& a : critical < 0 ? std::vector<Action>{} : schedule.actions[critical]) {
      if (a.kind == PassKind::kReduce && a.bucket == kAllBuckets && !tried[a.virtual_stage.value()] &&
          problem.CostOf(a.virtual_stage).reduce_seconds > 0) {
        candidates.push_back(a.virtual_stage);
      }
    }
    std::optional<std::pair<Schedule, SimulationResult>> best;
    for (const VirtualStage virtual_stage : candidates) {
      tried[virtual_stage.value()] = 1;
      const VirtualStageCost& c = problem.CostOf(virtual_stage);
      int ws = 0;
      for (const Action& a : schedule.ActionsOf(schedule.StageOf(virtual_stage))) {
        ws += a.kind == PassKind::kW && a.virtual_stage == virtual_stage;
      }
      for (int buckets : kBucketChoices) {
        // Holding back one more W helps while the tail hides more of the
        // reduction than the moved W leaves idle; once a longer tail stops
        // shortening the makespan, longer ones only add memory.
        double previous = std::numeric_limits<double>::infinity();
        for (int held = 1; held <= ws && (held - 1) * c.w_seconds <= c.reduce_seconds + c.w_seconds;
             ++held) {
          Schedule candidate = Bucketed(schedule, virtual_stage, held, buckets);
          absl::StatusOr<SimulationResult> s = Simulate(problem, candidate);
          if (!s.ok()) continue;
          if (s->makespan_seconds >= previous - slack) break;
          previous = s->makespan_seconds;
          bool fits = true;
          for (int w = 0; w < problem.stages; ++w) fits &= s->peak_memory_bytes[w] <= limit[w];
          if (fits && Shorter(*s, best ? best->second : sim, slack)) {
            best.emplace(std::move(candidate), *std::move(s));
          }
        }
      }
    }
    if (!best) return schedule;
    schedule = std::move(best->first);
    sim = std::move(best->second);
  }
}

absl::StatusOr<Schedule> Solved(const Problem& problem, const Schedule& schedule) {
  const Schedule base = AfterLastBackward(schedule);
  absl::StatusOr<SimulationResult> base_sim = Simulate(problem, base);
  if (!base_sim.ok()) return base_sim.status();
  const double target = base_sim->makespan_seconds - base_sim->exposed_reduce_seconds;
  const double slack = 1e-9 * std::max(1.0, base_sim->step_seconds);

  Schedule solved = schedule;
  for (int w = 0; w < problem.stages; ++w) {
    std::vector<int> virtual_stages;
    bool any_reduce = false;
    for (int s = 0; s < problem.num_virtual_stages(); ++s) {
      if (schedule.StageOf(VirtualStage(s)) != Stage(w)) continue;
      virtual_stages.push_back(s);
      any_reduce |= problem.virtual_stages[s].reduce_seconds > 0;
    }
    // With one virtual stage its reduction needs every W the stage holds: no order
    // of them issues it earlier.
    if (virtual_stages.size() < 2 || !any_reduce || schedule.actions[w].empty()) continue;
    const StageModel model(problem, base, *base_sim, w);
    // The input's peak when it already exceeds the limit: the solver must
    // not make it worse, but need not repair it.
    const double limit =
        std::max(problem.limit_of(w), base_sim->peak_memory_bytes[w]);
    solved.actions[w] = SolveStage(problem, model, schedule.actions[w], virtual_stages,
                                    base_sim->timings[w].front().start_seconds,
                                    target, limit, slack);
  }
  solved = AfterLastBackward(solved);
  absl::StatusOr<SimulationResult> sim = Simulate(problem, solved);
  // The estimate bounds the simulation from above, so this falls back only
  // if that reasoning is wrong somewhere; the guarantee holds regardless.
  if (!sim.ok() || sim->makespan_seconds > base_sim->makespan_seconds + slack ||
      sim->step_seconds > base_sim->step_seconds + slack) {
    return SolveBuckets(problem, base, *std::move(base_sim), slack);
  }
  return SolveBuckets(problem, std::move(solved), *std::move(sim), slack);
}

}  // namespace

double RingAllReduceSeconds(double bytes, int replicas, double bytes_per_second) {
  return 2.0 * (replicas - 1) / replicas * bytes / bytes_per_second;
}

std::string_view ReducePlacementName(ReducePlacement placement) {
  switch (placement) {
    case ReducePlacement::kAfterSchedule:
      return "after-schedule";
    case ReducePlacement::kAfterLastBackward:
      return "after-last-backward";
    case ReducePlacement::kSolved:
      return "solved";
  }
  return "?";
}

absl::StatusOr<ReducePlacement> ParseReducePlacement(std::string_view text) {
  for (ReducePlacement placement :
       {ReducePlacement::kAfterSchedule, ReducePlacement::kAfterLastBackward,
        ReducePlacement::kSolved}) {
    if (text == ReducePlacementName(placement)) return placement;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce placement \"", std::string(text),
                   "\"; expected after-schedule, after-last-backward or solved"));
}

absl::StatusOr<Schedule> PlaceReductions(const Problem& problem,
                                         const Schedule& schedule,
                                         ReducePlacement placement) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (absl::Status st = CheckSchedule(problem, schedule); !st.ok()) return st;
  for (int w = 0; w < schedule.stages; ++w) {
    for (const Action& a : schedule.actions[w]) {
      if (a.kind == PassKind::kReduce || a.bucket != kAllBuckets) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", w, " already holds ",
            a.kind == PassKind::kReduce ? "a reduction" : "a partial W", " (",
            ActionToString(a), "); place reductions in a schedule without any"));
      }
    }
  }
  if (placement == ReducePlacement::kSolved && HoldsVocabularyPasses(schedule)) {
    // The solver re-times a stage's passes alone (StageModel), which the S
    // and T passes, waiting on every stage, do not fit.
    return absl::InvalidArgumentError(
        "the solved reduce placement takes a schedule without vocabulary passes (S, T): "
        "place the reductions first, then the vocabulary passes (AddVocabularyPasses)");
  }
  switch (placement) {
    case ReducePlacement::kAfterSchedule:
      return AfterSchedule(schedule);
    case ReducePlacement::kAfterLastBackward:
      return AfterLastBackward(schedule);
    case ReducePlacement::kSolved:
      return Solved(problem, schedule);
  }
  return absl::InvalidArgumentError("unknown reduce placement");
}

}  // namespace zbpp::sched
