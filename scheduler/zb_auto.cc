#include "scheduler/zb_auto.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/zb_greedy.h"
#include "scheduler/zb_handcrafted.h"
#include "scheduler/zb_orders.h"
#include "scheduler/zb_refine.h"
#include "scheduler/zb_vblocks.h"

namespace zbpp::sched {
namespace {

using internal::Evaluator;
using internal::GreedyChoices;
using internal::Leximax;
using internal::ListChoices;
using internal::Orders;
using internal::PassModel;

// Refinement budget: kRefineScale / N^1.5 candidate evaluations for N =
// 3·p·v·m passes. One evaluation costs about 3.5·N ns at -O2, so the
// refinement takes time shrinking like 1/sqrt(N): a few ms for small
// pipelines, where search pays off most, about 1.5 ms at p = 32, m = 128,
// and the floor of 16 evaluations for the largest ones.
constexpr double kRefineScale = 4.4e7;
constexpr int64_t kMinEvaluations = 16;
constexpr int64_t kMaxEvaluations = 20'000;
// The V building blocks tried per pace: the two smallest turn delays
// (over the comparison grid of bench/results/solver.md the third and
// fourth change no result).
constexpr int kBlockDelayOptions = 2;
// The largest pace of the V building blocks (zb_vblocks.h).
constexpr int kMaxPace = 3;
// Re-runs of the round-based V greedy with its bubbles as allowance.
constexpr int kAllowanceRounds = 4;
// From this many passes (3·p·v·m; e.g. p = 128, v = 1, m = 1024) the
// search keeps the solve under a second: fewer variants per construction
// (see Candidates). Smaller problems, the grid of bench/results/solver.md
// included, get every candidate.
constexpr int kLargeProblem = 1 << 18;
// Seed of the refinement's random kicks.
constexpr unsigned kKickSeed = 20240110;

struct Candidate {
  Orders orders;
  Leximax value = Leximax::Worst();
  // Set when the paper's greedy produced it: its choices decode warm-up
  // depths during the refinement.
  bool from_loop_greedy = false;
  GreedyChoices choices;
};

// A worker must hold at least one microbatch's activations of all of its
// virtual stages, or no schedule exists (the list scheduler keeps that much
// room so that a microbatch can always reach the loss).
absl::Status CheckLimits(const Problem& problem,
                         const std::vector<int>& owner) {
  std::vector<double> need(problem.workers, 0.0);
  for (int s = 0; s < problem.num_stages(); ++s) {
    need[owner[s]] += problem.stages[s].m_b_bytes;
  }
  for (int w = 0; w < problem.workers; ++w) {
    if (OverMemoryLimit(need[w], problem.limit_of(w))) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "worker ", w, "'s activation memory limit (", problem.limit_of(w),
          " bytes) is below one microbatch's activations on it (", need[w],
          " bytes, the M_B of its virtual stages); no schedule fits"));
    }
  }
  return absl::OkStatus();
}

// The candidates of one solve, best first once sorted.
class Pool {
 public:
  Pool(const PassModel& model, Evaluator& evaluator)
      : model_(model), evaluator_(evaluator) {}

  // A greedy's result: complete and within memory by construction, timed
  // by the greedy itself (`spans`).
  void AddTimed(Orders orders, std::vector<double> spans,
                const GreedyChoices* loop_choices = nullptr) {
    Candidate candidate;
    candidate.orders = std::move(orders);
    candidate.value = Leximax::OfSpans(std::move(spans));
    if (loop_choices != nullptr) {
      candidate.from_loop_greedy = true;
      candidate.choices = *loop_choices;
    }
    candidates_.push_back(std::move(candidate));
  }

  // A pattern built for unit pass times: kept when it fits the limit, and
  // also with its W's placed anew for the real costs (which never needs
  // more memory than the pattern). Returns whether it fits.
  bool AddPattern(Orders orders) {
    Candidate candidate;
    candidate.value = Leximax::Of(evaluator_, evaluator_.Run(orders));
    if (!candidate.value.BetterThan(Leximax::Worst())) return false;
    for (bool fill_partial : {false, true}) {
      Orders retimed;
      std::vector<double> spans;
      if (internal::RetimeW(model_, orders, fill_partial, &retimed, &spans)) {
        AddTimed(std::move(retimed), std::move(spans));
      }
    }
    candidate.orders = std::move(orders);
    candidates_.push_back(std::move(candidate));
    return true;
  }

  std::vector<Candidate> Sorted() && {
    std::stable_sort(candidates_.begin(), candidates_.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.value.BetterThan(b.value);
                     });
    return std::move(candidates_);
  }

 private:
  const PassModel& model_;
  Evaluator& evaluator_;
  std::vector<Candidate> candidates_;
};

// The round-based V greedy under its four choices, each re-run with the
// bubbles of its previous run as allowance while its largest bubble
// shrinks (at most `reruns` times).
void AddVRoundCandidates(const PassModel& model, int reruns, Pool& pool) {
  for (int bits = 0; bits < 4; ++bits) {
    const internal::VRoundChoices choices{(bits & 1) == 0, (bits & 2) == 0};
    std::vector<double> allowance;
    double largest = std::numeric_limits<double>::infinity();
    for (int round = 0; round <= reruns; ++round) {
      Orders orders;
      std::vector<double> spans, bubbles;
      if (!internal::VRoundGreedy(model, choices, allowance, &orders, &spans,
                                  &bubbles)) {
        break;
      }
      pool.AddTimed(std::move(orders), std::move(spans));
      const double top = *std::max_element(bubbles.begin(), bubbles.end());
      if (!(top < largest)) break;
      largest = top;
      allowance = std::move(bubbles);
      for (double& b : allowance) b = top - b;
    }
  }
}

std::vector<Candidate> Candidates(const Problem& problem,
                                  const AutoSolverOptions& options,
                                  const PassModel& model,
                                  Evaluator& evaluator) {
  Pool pool(model, evaluator);
  const bool one_chunk_loop =
      options.placement == Placement::kLoop && problem.chunks == 1;
  // later_stage_first only matters where a worker holds several stages.
  const bool several_stages = problem.chunks > 1;
  // Large problems: the list scheduler under its default choices only,
  // the round-based V greedy with one re-run, one building block per kind.
  const bool large = model.num_ids() >= kLargeProblem;
  // With the V placement or one chunk per worker, the list scheduler only
  // under its default choices too: the other constructions cover it (over
  // the comparison grid of bench/results/solver.md its other variants
  // change no result). It stays as the candidate that always fits (see
  // ListGreedy). Likewise the paper's greedy without fill_partial_gaps
  // (there, its four variants with it change no result either).
  const bool default_list_only =
      large || options.placement == Placement::kV || one_chunk_loop;
  for (int bits = 0; bits < 8; ++bits) {
    Orders orders;
    std::vector<double> spans;
    if (one_chunk_loop) {
      const GreedyChoices choices{
          (bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, {}};
      if (!choices.fill_partial_gaps &&
          internal::LoopGreedy(model, choices, &orders, &spans)) {
        pool.AddTimed(std::move(orders), std::move(spans), &choices);
      }
    }
    const ListChoices list{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    if ((!default_list_only || bits == 1) &&
        (several_stages || !list.later_stage_first) &&
        internal::ListGreedy(model, list, &orders, &spans)) {
      pool.AddTimed(std::move(orders), std::move(spans));
    }
  }
  if (one_chunk_loop) {
    // The handcrafted schedules are cheap seeds; with them the solver is
    // never worse than ZB-H1 (or ZB-H2) wherever they fit the limit.
    for (auto* generate : {&GenerateZbH1, &GenerateZbH2}) {
      absl::StatusOr<Schedule> seed = generate(problem);
      Orders orders;
      if (seed.ok() && internal::FromSchedule(model, *seed, &orders)) {
        pool.AddPattern(std::move(orders));
      }
    }
  }
  if (options.placement == Placement::kV) {
    AddVRoundCandidates(model, large ? 1 : kAllowanceRounds, pool);
    // The building blocks trade bubbles for memory (Qi et al.): where ZB-V's
    // own pattern fits, they are not tried. Otherwise, those of the largest
    // pace (the longest activation lifespans, hence the fewest bubbles) of
    // which one fits the limit: a smaller pace only gives memory away. Over
    // the grid of bench/results/solver.md neither skipped kind ever wins.
    const bool zb_v_fits = pool.AddPattern(internal::ZbVOrders(model));
    for (int pace = kMaxPace; pace >= 1 && !zb_v_fits; --pace) {
      std::vector<internal::VTurnDelays> delays =
          internal::VTurnDelayOptions(problem.workers, pace, 2);
      const size_t options = large ? 1 : kBlockDelayOptions;
      if (delays.size() > options) delays.resize(options);
      bool fits = false;
      for (const internal::VTurnDelays& d : delays) {
        // Squeezing keeps the block's activation peak (zb_vblocks.h): a
        // block that does not fit does not fit squeezed either.
        if (pool.AddPattern(internal::VBlockOrders(model, pace, d))) {
          fits = true;
          pool.AddPattern(internal::SqueezedVBlockOrders(model, pace, d));
        }
      }
      if (fits) break;
    }
  }
  return std::move(pool).Sorted();
}

// Number of F's each worker runs before its first B (one chunk per worker).
std::vector<int> WarmupDepths(const PassModel& model, const Orders& orders) {
  std::vector<int> depth(model.workers(), 0);
  for (int w = 0; w < model.workers(); ++w) {
    for (int32_t id : orders[w]) {
      if (model.PassOf(id) == internal::kB) break;
      if (model.PassOf(id) == internal::kF) ++depth[w];
    }
  }
  return depth;
}

// Warm-up depth vectors next to `depth`: one stage, a prefix of stages or a
// suffix of stages one F deeper or shallower. A prefix moves the whole
// upper pipe together, which the 1F-1B steady state needs to stay aligned.
std::vector<std::vector<int>> WarmupNeighbours(const std::vector<int>& depth,
                                               int m) {
  const int p = static_cast<int>(depth.size());
  std::vector<std::vector<int>> out;
  auto add = [&](int lo, int hi, int delta) {
    std::vector<int> next = depth;
    for (int s = lo; s <= hi; ++s) next[s] = std::clamp(next[s] + delta, 1, m);
    if (next != depth && std::find(out.begin(), out.end(), next) == out.end()) {
      out.push_back(std::move(next));
    }
  };
  for (int delta : {+1, -1}) {
    for (int s = 0; s < p; ++s) add(0, s, delta);
    for (int s = 0; s < p; ++s) add(s, s, delta);
    for (int s = 1; s < p; ++s) add(s, p - 1, delta);
  }
  return out;
}

// Seconds of passes of the busiest worker: a lower bound on the makespan.
double BusiestWorkerSeconds(const PassModel& model) {
  double busiest = 0;
  for (int w = 0; w < model.workers(); ++w) {
    double busy = 0;
    for (int s : model.StagesOf(w)) {
      busy += model.Duration(internal::kF, s) + model.Duration(internal::kB, s) +
              model.Duration(internal::kW, s);
    }
    busiest = std::max(busiest, busy * model.microbatches());
  }
  return busiest;
}

// The refinement: polish the best candidate, then (one chunk per worker)
// search warm-up depths, each decoded by the paper's greedy and polished.
Orders Refine(const PassModel& model, Evaluator& evaluator,
              std::vector<Candidate>& candidates, int64_t budget) {
  Candidate& start = candidates.front();
  Orders best = start.orders;
  Leximax best_value = internal::Polish(model, evaluator, &best, &budget);

  const Candidate* decoder = nullptr;
  for (const Candidate& c : candidates) {
    if (c.from_loop_greedy) {
      decoder = &c;
      break;
    }
  }
  const int m = model.microbatches();
  // Each warm-up candidate may spend at most this much on its polish, so
  // that one deep polish does not starve the rest of the neighbourhood.
  const int64_t polish_cap = std::max<int64_t>(budget / 8, 32);
  bool improved = decoder != nullptr;
  while (improved && budget > 0) {
    improved = false;
    for (const std::vector<int>& depth :
         WarmupNeighbours(WarmupDepths(model, best), m)) {
      if (budget <= 0) break;
      GreedyChoices choices = decoder->choices;
      choices.warmup = depth;
      Orders orders;
      budget -= 3;  // a greedy run costs about as much as 3 evaluations
      if (!internal::LoopGreedy(model, choices, &orders)) continue;
      int64_t share = std::min(budget, polish_cap);
      const int64_t granted = share;
      const Leximax value = internal::Polish(model, evaluator, &orders, &share);
      budget -= granted - share;
      if (value.BetterThan(best_value)) {
        best = std::move(orders);
        best_value = value;
        improved = true;
        break;
      }
    }
  }
  // Budget left (small problems): polish the runners-up too; a different
  // start often ends in a different local optimum.
  for (size_t i = 1; i < candidates.size() && i < 4 && budget > 0; ++i) {
    Orders orders = candidates[i].orders;
    const Leximax value = internal::Polish(model, evaluator, &orders, &budget);
    if (value.BetterThan(best_value)) {
      best = std::move(orders);
      best_value = value;
    }
  }
  // Budget still left (small problems): iterated local search from the
  // best, kicked by a few random moves each time (fixed seed: the result
  // does not depend on the machine), until the makespan reaches the
  // largest worker's busy time, below which no schedule goes.
  const double busiest = BusiestWorkerSeconds(model);
  std::mt19937 random(kKickSeed);
  for (int kick = 0;
       budget > 0 && best_value.makespan() > busiest * (1 + 1e-9); ++kick) {
    Orders orders = best;
    int64_t share = std::min(budget, polish_cap);
    const int64_t granted = share;
    const Leximax value = internal::Kick(model, evaluator, &orders,
                                         2 + kick % 3, random, &share);
    budget -= std::max<int64_t>(granted - share, 1);
    if (value.BetterThan(best_value)) {
      best = std::move(orders);
      best_value = value;
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<Schedule> SolveZeroBubble(const Problem& problem,
                                         const AutoSolverOptions& options) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (options.placement == Placement::kV && problem.chunks != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("the V placement needs chunks = 2, got ", problem.chunks));
  }
  std::vector<int> owner =
      PlaceStages(options.placement, problem.workers, problem.chunks);
  if (absl::Status st = CheckLimits(problem, owner); !st.ok()) return st;

  const PassModel model(problem, std::move(owner));
  Evaluator evaluator(model);
  std::vector<Candidate> candidates =
      Candidates(problem, options, model, evaluator);
  if (candidates.empty()) {
    // CheckLimits guarantees the list scheduler a feasible move; reaching
    // here is a bug, reported rather than hidden.
    return absl::InternalError(
        "zero-bubble solver: no candidate schedule fits the memory limit");
  }
  Orders orders = candidates.front().orders;
  if (options.refine) {
    const double size = std::max(model.num_ids(), 1);
    const int64_t budget =
        options.refine_evaluations > 0
            ? options.refine_evaluations
            : std::clamp(
                  static_cast<int64_t>(kRefineScale / (size * std::sqrt(size))),
                  kMinEvaluations, kMaxEvaluations);
    orders = Refine(model, evaluator, candidates, budget);
  }
  return internal::ToSchedule(model, orders, "zb-auto", problem.chunks);
}

}  // namespace zbpp::sched
