#include "scheduler/zb_auto.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/refusal.h"
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

// Refinement budget (RefineBudget): kRefineScale / N^1.5 candidate
// evaluations for N = 3·p·v·m passes up to kRefineKnee passes, then
// shrinking like N^-3, between kMinEvaluations and kMaxEvaluations. One
// evaluation costs about 3.5·N ns at -O2, so the refinement takes a few ms
// for small pipelines, where search pays off most, and less beyond the
// knee, where its few evaluations hardly ever shorten the best candidate
// and the constructions dominate the solve time (p = 32, m = 128, one
// chunk: 6 evaluations instead of 32; over the grids of bench/results/
// solver.md, 3 of 2,920 cases lose up to 0.0002 of bubble rate by it).
constexpr double kRefineScale = 4.4e7;
constexpr double kRefineKnee = 4096;
constexpr int64_t kMinEvaluations = 4;
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
// Relative margin by which a candidate counts as shorter (Leximax's).
constexpr double kShorter = 1e-9;
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

// A stage must hold at least one microbatch's activations of all of its
// virtual stages, or no schedule exists (the list scheduler keeps that much
// room so that a microbatch can always reach the loss).
absl::Status CheckLimits(const Problem& problem,
                         const std::vector<int>& owner) {
  std::vector<double> need(problem.stages, 0.0);
  for (int s = 0; s < problem.num_virtual_stages(); ++s) {
    need[owner[s]] += problem.virtual_stages[s].m_b_bytes;
  }
  for (int w = 0; w < problem.stages; ++w) {
    if (OverMemoryLimit(need[w], problem.limit_of(w))) {
      return Refuse(absl::StatusCode::kResourceExhausted, RefusedInput::kMemoryLimit,
                    absl::StrCat("stage ", w, "'s activation memory limit (",
                                 problem.limit_of(w),
                                 " bytes) is below one microbatch's activations on it (",
                                 need[w], " bytes, the M_B of its virtual stages); no "
                                 "schedule fits"));
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
  // more memory than the pattern): by the §3.1 rules with partial gaps
  // filled and, when `retime_whole_gaps_only`, also without. Returns
  // whether it fits.
  bool AddPattern(Orders orders, bool retime_whole_gaps_only) {
    Candidate candidate;
    candidate.value = Leximax::Of(evaluator_, evaluator_.Run(orders));
    if (!candidate.value.BetterThan(Leximax::Worst())) return false;
    for (bool fill_partial : {false, true}) {
      if (!fill_partial && !retime_whole_gaps_only) continue;
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

  // The shortest makespan among the candidates so far (infinity: none).
  double BestMakespan() const {
    double best = std::numeric_limits<double>::infinity();
    for (const Candidate& c : candidates_) {
      if (c.value.BetterThan(Leximax::Worst())) {
        best = std::min(best, c.value.makespan());
      }
    }
    return best;
  }

  // Best first, each order once: the refinement polishes the best few
  // as different starts, and the constructions often build the same
  // orders (the round-based V greedy under choices that change nothing,
  // its re-runs with an allowance that changes nothing), which would take
  // the places of different ones. A copy dropped hands its greedy choices
  // to the copy kept when that has none (Refine decodes warm-ups with them).
  std::vector<Candidate> Sorted() && {
    std::stable_sort(candidates_.begin(), candidates_.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.value.BetterThan(b.value);
                     });
    std::vector<Candidate> distinct;
    for (Candidate& c : candidates_) {
      auto same = std::find_if(
          distinct.begin(), distinct.end(),
          [&](const Candidate& kept) { return kept.orders == c.orders; });
      if (same == distinct.end()) {
        distinct.push_back(std::move(c));
      } else if (!same->from_loop_greedy && c.from_loop_greedy) {
        same->from_loop_greedy = true;
        same->choices = std::move(c.choices);
      }
    }
    return distinct;
  }

 private:
  const PassModel& model_;
  Evaluator& evaluator_;
  std::vector<Candidate> candidates_;
};

// The paper's greedy (LoopGreedy) without fill_partial_gaps under its four
// other choices, each made once: choices that build the same orders as
// another (LoopGreedyTrace, LoopGreedyWarmup) share its run.
class LoopGreedyRuns {
 public:
  // No default member initialisers: clang cannot default-construct a nested
  // class that has them inside its enclosing class (std::optional::emplace).
  struct Run {
    bool ok;  // Set with the orders, by Get.
    Orders orders;
    std::vector<double> spans;
    internal::LoopGreedyTrace trace;
  };

  explicit LoopGreedyRuns(const PassModel& model) : model_(model) {}

  const Run& Get(bool bubble_before_first_b, bool favour_b) {
    if (bubble_before_first_b && SameWarmup()) return Get(false, favour_b);
    if (!favour_b) {
      // favour_b only ever makes a virtual stage skip an F: if it never did, the
      // run without it is the same.
      const Run& with = Get(bubble_before_first_b, true);
      if (!with.trace.favour_b_decided) return with;
    }
    std::optional<Run>& run = runs_[2 * bubble_before_first_b + favour_b];
    if (!run.has_value()) {
      GreedyChoices choices;
      choices.bubble_before_first_b = bubble_before_first_b;
      choices.favour_b = favour_b;
      run.emplace();
      run->ok = internal::LoopGreedy(model_, choices, &run->orders, &run->spans,
                                     &run->trace);
    }
    return *run;
  }

  // Whether the run with fill_partial_gaps under these choices may build
  // orders that neither its twin without it (Get) nor the one with the
  // other bubble_before_first_b (when the warm-ups are equal) builds.
  bool FillMayDiffer(bool bubble_before_first_b, bool favour_b) {
    if (bubble_before_first_b && SameWarmup()) return false;
    return Get(bubble_before_first_b, favour_b).trace.partial_gap_left;
  }

 private:
  bool SameWarmup() {
    if (!same_warmup_.has_value()) {
      GreedyChoices before;
      before.bubble_before_first_b = true;
      same_warmup_ = internal::LoopGreedyWarmup(model_, GreedyChoices{}) ==
                     internal::LoopGreedyWarmup(model_, before);
    }
    return *same_warmup_;
  }

  const PassModel& model_;
  std::optional<bool> same_warmup_;
  std::optional<Run> runs_[4];
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
  // later_virtual_stage_first only matters where a stage holds several virtual stages.
  const bool several_virtual_stages = problem.chunks > 1;
  // Large problems: the list scheduler under its default choices only,
  // the round-based V greedy with one re-run, one building block per kind.
  const bool large = model.num_ids() >= kLargeProblem;
  // With the V placement or one chunk per stage, the list scheduler only
  // under its default choices too: the other constructions cover it (over
  // the comparison grid of bench/results/solver.md its other variants
  // change no result). It stays as the candidate that always fits (see
  // ListGreedy).
  const bool default_list_only =
      large || options.placement == Placement::kV || one_chunk_loop;
  LoopGreedyRuns loop_greedy(model);
  for (int bits = 0; bits < 8; ++bits) {
    Orders orders;
    std::vector<double> spans;
    if (one_chunk_loop && bits < 4) {
      const LoopGreedyRuns::Run& run =
          loop_greedy.Get((bits & 1) != 0, (bits & 2) != 0);
      if (run.ok) {
        GreedyChoices choices;
        choices.bubble_before_first_b = (bits & 1) != 0;
        choices.favour_b = (bits & 2) != 0;
        pool.AddTimed(run.orders, run.spans, &choices);
      }
    }
    const ListChoices list{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    if ((!default_list_only || bits == 1) &&
        (several_virtual_stages || !list.later_virtual_stage_first) &&
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
        // Re-placing their W's into whole gaps only never gives a shorter
        // schedule over the grids of bench/results/solver.md.
        pool.AddPattern(std::move(orders), /*retime_whole_gaps_only=*/false);
      }
    }
    // The paper's greedy with fill_partial_gaps, kept only where it is
    // shorter than every candidate above: with these four choices the
    // solver is never worse than the Zero Bubble authors' greedy (the
    // same eight choices; e.g. uniform costs with T_comm = 0.1 T_F, ZB-2p
    // p = 16 m = 48, bubble 0.0150 -> 0.0137). Where they are not
    // shorter, they would only lead the refinement elsewhere (over the
    // grids of bench/results/solver.md, as often to a worse end as to a
    // better one), so a run gives up once it cannot be shorter, and a run
    // that would build the orders of one above is not made.
    for (int bits = 0; bits < 4; ++bits) {
      if (!loop_greedy.FillMayDiffer((bits & 1) != 0, (bits & 2) != 0)) {
        continue;
      }
      GreedyChoices choices;
      choices.bubble_before_first_b = (bits & 1) != 0;
      choices.favour_b = (bits & 2) != 0;
      choices.fill_partial_gaps = true;
      choices.abandon_above = pool.BestMakespan() * (1 - kShorter);
      Orders orders;
      std::vector<double> spans;
      if (internal::LoopGreedy(model, choices, &orders, &spans)) {
        choices.abandon_above = std::numeric_limits<double>::infinity();
        pool.AddTimed(std::move(orders), std::move(spans), &choices);
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
    const bool zb_v_fits = pool.AddPattern(internal::ZbVOrders(model),
                                           /*retime_whole_gaps_only=*/true);
    for (int pace = kMaxPace; pace >= 1 && !zb_v_fits; --pace) {
      std::vector<internal::VTurnDelays> delays =
          internal::VTurnDelayOptions(problem.stages, pace, 2);
      const size_t options = large ? 1 : kBlockDelayOptions;
      if (delays.size() > options) delays.resize(options);
      bool fits = false;
      for (const internal::VTurnDelays& d : delays) {
        // Squeezing keeps the block's activation peak (zb_vblocks.h): a
        // block that does not fit does not fit squeezed either.
        if (pool.AddPattern(internal::VBlockOrders(model, pace, d),
                            /*retime_whole_gaps_only=*/true)) {
          fits = true;
          pool.AddPattern(internal::SqueezedVBlockOrders(model, pace, d),
                          /*retime_whole_gaps_only=*/true);
        }
      }
      if (fits) break;
    }
  }
  return std::move(pool).Sorted();
}

// Evaluations the refinement may spend on a problem of `passes` passes.
int64_t RefineBudget(int passes) {
  const double n = std::max(passes, 1);
  double budget = kRefineScale / (n * std::sqrt(n));
  if (n > kRefineKnee) {
    const double shrink = kRefineKnee / n;
    budget = kRefineScale / (kRefineKnee * std::sqrt(kRefineKnee)) * shrink *
             shrink * shrink;
  }
  return std::clamp(static_cast<int64_t>(budget), kMinEvaluations,
                    kMaxEvaluations);
}

// Number of F's each stage runs before its first B (one chunk per stage).
std::vector<int> WarmupDepths(const PassModel& model, const Orders& orders) {
  std::vector<int> depth(model.stages(), 0);
  for (int w = 0; w < model.stages(); ++w) {
    for (int32_t id : orders[w]) {
      if (model.PassOf(id) == internal::kB) break;
      if (model.PassOf(id) == internal::kF) ++depth[w];
    }
  }
  return depth;
}

// Warm-up depth vectors next to `depth`: one virtual stage, a prefix of virtual stages or a
// suffix of virtual stages one F deeper or shallower. A prefix moves the whole
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

// Seconds of passes of the busiest stage: a lower bound on the makespan.
double BusiestStageSeconds(const PassModel& model) {
  double busiest = 0;
  for (int w = 0; w < model.stages(); ++w) {
    double busy = 0;
    for (int s : model.VirtualStagesOf(w)) {
      busy += model.Duration(internal::kF, s) + model.Duration(internal::kB, s) +
              model.Duration(internal::kW, s);
    }
    busiest = std::max(busiest, busy * model.microbatches());
  }
  return busiest;
}

// The refinement: polish the best candidate, then (one chunk per stage)
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
  // start often ends in a different local optimum (Pool::Sorted keeps
  // each order once, so these are different starts: for ZB-V with T_comm
  // = 0.1 T_F at p = 4, m = 8, the best candidate's 25.6 s stays 25.6 s,
  // two runners-up of 25.9 s polish to 25.4 s; bench/results/solver.md).
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
  // largest stage's busy time, below which no schedule goes.
  const double busiest = BusiestStageSeconds(model);
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
    return Refuse(absl::StatusCode::kInvalidArgument, RefusedInput::kChunks,
                  absl::StrCat("the V placement needs chunks = 2, got ", problem.chunks));
  }
  std::vector<int> owner =
      PlaceVirtualStages(options.placement, problem.stages, problem.chunks);
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
    const int64_t budget = options.refine_evaluations > 0
                               ? options.refine_evaluations
                               : RefineBudget(model.num_ids());
    orders = Refine(model, evaluator, candidates, budget);
  }
  return internal::ToSchedule(model, orders, "zb-auto", problem.chunks);
}

}  // namespace zbpp::sched
