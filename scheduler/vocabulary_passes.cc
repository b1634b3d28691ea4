#include "scheduler/vocabulary_passes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/comm_order.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

// Refinement rounds (step 3 of AddVocabularyPasses).
constexpr int kRefineRounds = 3;

// A candidate schedule as AddVocabularyPasses weighs it: first the bytes by
// which the stages' peaks exceed their enforced limits (summed), then the
// makespan.
struct Evaluation {
  double excess_bytes = 0;
  SimulationResult sim;
};

// Equal within a relative 1e-9 (sums of costs in floating point).
bool Near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// Whether `a` is no worse than `b`; with `strictly`, better.
bool Improves(const Evaluation& a, const Evaluation& b, bool strictly) {
  if (!Near(a.excess_bytes, b.excess_bytes)) return a.excess_bytes < b.excess_bytes;
  const double x = a.sim.makespan_seconds, y = b.sim.makespan_seconds;
  return strictly ? x < y && !Near(x, y) : x <= y || Near(x, y);
}

// `schedule` evaluated on `problem` against `limits` (per stage, bytes;
// +infinity where not enforced); none when it does not simulate or its pair
// orders (DerivePairOrders) deadlock.
std::optional<Evaluation> Evaluate(const Problem& problem, const std::vector<double>& limits,
                                   const Schedule& schedule) {
  absl::StatusOr<SimulationResult> sim = Simulate(problem, schedule);
  if (!sim.ok()) return std::nullopt;
  absl::StatusOr<PairOrders> orders = DerivePairOrders(schedule);
  if (!orders.ok() || !CheckPairOrders(schedule, *orders).ok()) return std::nullopt;
  Evaluation e;
  for (size_t w = 0; w < limits.size(); ++w) {
    if (OverMemoryLimit(sim->peak_memory_bytes[w], limits[w])) {
      e.excess_bytes += sim->peak_memory_bytes[w] - limits[w];
    }
  }
  e.sim = *std::move(sim);
  return e;
}

// The index of the pass `a` stands for in `list` (kB: the B or BW of its
// virtual stage and microbatch, as ForEachInput reports it); -1 if absent.
int IndexOf(const std::vector<Action>& list, const Action& a) {
  for (size_t i = 0; i < list.size(); ++i) {
    const Action& x = list[i];
    const bool kind = a.kind == PassKind::kB ? x.kind == PassKind::kB || x.kind == PassKind::kBW
                                             : x.kind == a.kind;
    if (kind && x.virtual_stage == a.virtual_stage && x.microbatch == a.microbatch) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Step 1: S_j and T_j on every stage right before the first pass whose
// start in `base` (the schedule simulated without vocabulary) is at or
// after the end of F of the last virtual stage for microbatch j.
Schedule InitialPlacement(const Schedule& schedule, const SimulationResult& base) {
  const VirtualStage last(schedule.num_virtual_stages() - 1);
  const Stage holder = schedule.StageOf(last);
  std::vector<double> ready(static_cast<size_t>(schedule.microbatches));
  for (int j = 0; j < schedule.microbatches; ++j) {
    const int f = IndexOf(schedule.ActionsOf(holder), {PassKind::kF, last, j});
    ready[static_cast<size_t>(j)] = base.timings[holder.value()][f].end_seconds;
  }
  // F of L runs in microbatch order on its stage, so `ready` ascends.
  std::vector<int> order(static_cast<size_t>(schedule.microbatches));
  for (int j = 0; j < schedule.microbatches; ++j) order[static_cast<size_t>(j)] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return ready[a] < ready[b]; });
  Schedule out = schedule;
  for (Stage w : schedule.AllStages()) {
    const std::vector<Action>& list = schedule.ActionsOf(w);
    std::vector<Action>& placed = out.ActionsOf(w);
    placed.clear();
    size_t next = 0;
    auto place_ready = [&](double until) {
      for (; next < order.size() && ready[order[next]] <= until; ++next) {
        placed.push_back({PassKind::kS, last, order[next]});
        placed.push_back({PassKind::kT, last, order[next]});
      }
    };
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].kind != PassKind::kReduce) {
        place_ready(base.timings[w.value()][i].start_seconds);
      }
      placed.push_back(list[i]);
    }
    place_ready(std::numeric_limits<double>::infinity());
  }
  return out;
}

// Moves `list[from]` to index `to` of the list without it.
void Move(std::vector<Action>& list, int from, int to) {
  const Action a = list[static_cast<size_t>(from)];
  list.erase(list.begin() + from);
  list.insert(list.begin() + to, a);
}

// Improves a placement by moves of single vocabulary passes, each kept when
// Evaluate finds it no worse (greedy) or better (refinement).
class Placer {
 public:
  Placer(const Problem& problem, std::vector<double> limits, Schedule schedule, Evaluation current)
      : problem_(problem),
        limits_(std::move(limits)),
        schedule_(std::move(schedule)),
        current_(std::move(current)) {}

  // Step 2: each S, then each T, of each microbatch, to the earliest
  // position where its inputs are there.
  void Greedy() {
    const VirtualStage last(schedule_.num_virtual_stages() - 1);
    for (int j = 0; j < schedule_.microbatches; ++j) {
      for (PassKind kind : {PassKind::kS, PassKind::kT}) {
        for (Stage w : schedule_.AllStages()) ToReadyPosition(w, {kind, last, j});
      }
    }
  }

  // Step 3: one position earlier or later, while that helps.
  void Refine() {
    for (int round = 0; round < kRefineRounds; ++round) {
      bool moved = false;
      for (Stage w : schedule_.AllStages()) {
        std::vector<Action>& list = schedule_.ActionsOf(w);
        for (int i = 0; i < static_cast<int>(list.size()); ++i) {
          if (!IsVocabularyPass(list[static_cast<size_t>(i)].kind)) continue;
          for (int to : {i - 1, i + 1}) {
            if (to < 0 || to >= static_cast<int>(list.size())) continue;
            if (Try(w, i, to, /*strictly=*/true)) {
              moved = true;
              break;
            }
          }
        }
      }
      if (!moved) return;
    }
  }

  const Schedule& schedule() const { return schedule_; }
  const Evaluation& current() const { return current_; }

 private:
  // Moves `a` on stage `w` before the first other pass that starts at or
  // after its inputs arrive (ForEachInput; current timings).
  void ToReadyPosition(Stage w, const Action& a) {
    const SimulationResult& sim = current_.sim;
    double ready = 0;
    ForEachInput(schedule_, /*vocabulary_parallel=*/true, w, a,
                 [&](Stage from, const Action& input) {
                   const int k = IndexOf(schedule_.ActionsOf(from), input);
                   const double end = sim.timings[from.value()][k].end_seconds;
                   ready = std::max(ready, from == w ? end : end + problem_.comm_seconds);
                 });
    const std::vector<Action>& list = schedule_.ActionsOf(w);
    const int at = IndexOf(list, a);
    int target = static_cast<int>(list.size());
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      const double start = sim.timings[w.value()][i].start_seconds;
      if (i != at && list[i].kind != PassKind::kReduce && (start >= ready || Near(start, ready))) {
        target = i;
        break;
      }
    }
    if (target > at) --target;  // Index in the list without `a`.
    if (target != at) Try(w, at, target, /*strictly=*/false);
  }

  // Moves list[from] of stage `w` to `to`; keeps the move when it improves
  // (Improves with `strictly`), undoes it otherwise.
  bool Try(Stage w, int from, int to, bool strictly) {
    std::vector<Action>& list = schedule_.ActionsOf(w);
    Move(list, from, to);
    std::optional<Evaluation> e = Evaluate(problem_, limits_, schedule_);
    if (e && Improves(*e, current_, strictly)) {
      current_ = *std::move(e);
      return true;
    }
    Move(list, to, from);
    return false;
  }

  const Problem& problem_;
  const std::vector<double> limits_;
  Schedule schedule_;
  Evaluation current_;
};

}  // namespace

absl::StatusOr<Schedule> AddVocabularyPasses(const Problem& problem, const Schedule& schedule) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (problem.vocabulary.empty()) {
    return absl::InvalidArgumentError(
        "problem.vocabulary is empty: vocabulary passes need each stage's S and T costs");
  }
  for (Stage w : schedule.AllStages()) {
    const std::vector<Action>& list = schedule.ActionsOf(w);
    for (size_t i = 0; i < list.size(); ++i) {
      if (IsVocabularyPass(list[i].kind)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", w.value(), ", action #", i, " (", ActionToString(list[i]),
            "): the schedule already holds vocabulary passes"));
      }
    }
  }
  Problem unsharded = problem;
  unsharded.vocabulary.clear();
  absl::StatusOr<SimulationResult> base = Simulate(unsharded, schedule);
  if (!base.ok()) return base.status();
  // The limits `schedule` kept, enforced; the others not.
  std::vector<double> limits(static_cast<size_t>(problem.stages));
  for (Stage w : schedule.AllStages()) {
    const double limit = problem.limit_of(w);
    limits[w.value()] = OverMemoryLimit(base->peak_memory_bytes[w.value()], limit)
                            ? std::numeric_limits<double>::infinity()
                            : limit;
  }
  Schedule initial = InitialPlacement(schedule, *base);
  std::optional<Evaluation> start = Evaluate(problem, limits, initial);
  if (!start) {
    absl::Status st = Simulate(problem, initial).status();
    return absl::FailedPreconditionError(absl::StrCat(
        "the initial placement of the vocabulary passes deadlocks: ",
        st.ok() ? "its pair orders deadlock" : st.message()));
  }
  Placer placer(problem, std::move(limits), std::move(initial), *std::move(start));
  placer.Greedy();
  placer.Refine();
  for (Stage w : schedule.AllStages()) {
    const double peak = placer.current().sim.peak_memory_bytes[w.value()];
    if (!OverMemoryLimit(base->peak_memory_bytes[w.value()], problem.limit_of(w)) &&
        OverMemoryLimit(peak, problem.limit_of(w))) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "stage ", w.value(), ": with its vocabulary passes its peak is ", peak,
          " bytes, over its limit of ", problem.limit_of(w), " bytes (", 
          base->peak_memory_bytes[w.value()], " without them)"));
    }
  }
  return placer.schedule();
}

}  // namespace zbpp::sched
