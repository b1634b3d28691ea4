#include "scheduler/zb_refine.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

namespace zbpp::sched::internal {
namespace {

constexpr double kRelativeSlack = 1e-9;
// How far a pass may travel in one move. Gaps in good schedules are short
// and local; a longer reach mostly adds candidates that deadlock or break
// the memory limit.
constexpr int kReach = 8;

// A move: the pass at `from` in stage `stage`'s order goes to `to`.
struct Move {
  int stage;
  int from;
  int to;
};

// Passes of one (virtual stage, microbatch) keep F < B < W; passes of one kind and
// virtual stage keep first-in first-out order.
bool MustKeepOrder(const PassModel& model, int32_t a, int32_t b) {
  if (model.VirtualStageOf(a) != model.VirtualStageOf(b)) return false;
  return model.MicrobatchOf(a) == model.MicrobatchOf(b) ||
         model.PassOf(a) == model.PassOf(b);
}

// Whether moving the pass at `from` of `order` to `to` keeps every order
// MustKeepOrder asks for.
bool LegalMove(const PassModel& model, const std::vector<int32_t>& order,
               int from, int to) {
  const int32_t moving = order[from];
  for (int k = std::min(from, to); k <= std::max(from, to); ++k) {
    if (k != from && MustKeepOrder(model, moving, order[k])) return false;
  }
  return true;
}

// Moves the pass at `from` to `to`, shifting the ones between by one.
void MovePass(std::vector<int32_t>& order, int from, int to) {
  if (from > to) {
    std::rotate(order.begin() + to, order.begin() + from,
                order.begin() + from + 1);
  } else {
    std::rotate(order.begin() + from, order.begin() + from + 1,
                order.begin() + to + 1);
  }
}

// The W's of one virtual stage cost the same and free the same memory, so
// what matters is where their slots are. Moves the slot of the W at `from`
// later, to `to`, the W's of its virtual stage in between taking the slots
// in first-in first-out order (a move MustKeepOrder forbids a single W).
// False (order unchanged) when a W would then come before its own B.
bool DeferWSlot(const PassModel& model, std::vector<int32_t>& order,
                int from, int to) {
  const int32_t moving = order[from];
  const int virtual_stage = model.VirtualStageOf(moving);
  int b_seen = 0, w_seen = 0;
  for (int k = 0; k < from; ++k) {
    if (model.VirtualStageOf(order[k]) != virtual_stage) continue;
    b_seen += model.PassOf(order[k]) == kB;
    w_seen += model.PassOf(order[k]) == kW;
  }
  MovePass(order, from, to);
  // Relabel: the k-th W of the virtual stage from `from` on is microbatch
  // (w_seen + k)'s, first-in first-out; each must follow its B.
  std::vector<int32_t> relabelled = order;
  int next = w_seen;
  for (int k = from; k <= to; ++k) {
    const int32_t id = order[k];
    if (model.VirtualStageOf(id) != virtual_stage) continue;
    if (model.PassOf(id) == kB) ++b_seen;
    if (model.PassOf(id) != kW) continue;
    if (next >= b_seen) {
      MovePass(order, to, from);
      return false;
    }
    relabelled[k] = model.Id(kW, virtual_stage, next++);
  }
  order = std::move(relabelled);
  return true;
}

class Search {
 public:
  Search(const PassModel& model, Evaluator& evaluator, Orders* orders,
         int64_t* evaluations)
      : model_(model),
        evaluator_(evaluator),
        orders_(*orders),
        evaluations_(*evaluations),
        position_(model.num_ids()) {}

  Leximax Run() {
    best_ = Leximax::Of(evaluator_, evaluator_.Run(orders_));
    if (!best_.BetterThan(Leximax::Worst())) return best_;
    // The kinds of move, in the order they are tried: a kind is tried
    // only when the ones before it improve nothing, and after any
    // improvement the search starts again from the first.
    Kind kind = Kind::kGap;
    while (evaluations_ > 0) {
      // The evaluator holds the timing of the current orders here: after
      // the initial Run, after the accepted candidate's Run or after the
      // re-run below.
      if (TryMoves(kind)) {
        kind = Kind::kGap;
      } else if (kind != Kind::kSwap) {
        kind = kind == Kind::kGap ? Kind::kChain : Kind::kSwap;
        // The next kind reads the current timing: re-run once if a
        // rejected try left the evaluator with its own.
        if (tried_) {
          evaluator_.Run(orders_);
          --evaluations_;
        }
      } else {
        break;
      }
    }
    return best_;
  }

 private:
  bool Legal(const Move& move) const {
    return LegalMove(model_, orders_[move.stage], move.from, move.to);
  }

  // Applies `move`, evaluates, keeps it if better. One evaluation.
  bool Try(const Move& move) {
    if (!Legal(move)) return false;
    tried_ = true;
    std::vector<int32_t>& order = orders_[move.stage];
    MovePass(order, move.from, move.to);
    --evaluations_;
    const OrderCost cost = evaluator_.Run(orders_);
    const Leximax value = Leximax::Of(evaluator_, cost);
    if (value.BetterThan(best_)) {
      best_ = value;
      return true;
    }
    MovePass(order, move.to, move.from);
    return false;
  }

  // The kinds of move (see Polish): into a gap; deferring the W's that
  // hold back a gap's chain of inputs (DeferChain); the exhaustive sweep of
  // adjacent swaps.
  enum class Kind { kGap, kChain, kSwap };

  // Tries the moves of `kind` worth trying from the current timing, most
  // promising first (the gaps of the stages with the longest spans), until
  // one improves (true) or the budget is spent. The gaps and chains are
  // read from the timing before the first try (a rejected try leaves the
  // evaluator with its own timing); each gap's moves are made only when its
  // turn comes, since a small budget tries only the first few.
  bool TryMoves(Kind kind) {
    tried_ = false;
    const int p = model_.stages();
    for (int w = 0; w < p; ++w) {
      for (size_t i = 0; i < orders_[w].size(); ++i) {
        position_[orders_[w][i]] = static_cast<int>(i);
      }
    }
    std::vector<int> stages(p);
    std::iota(stages.begin(), stages.end(), 0);
    std::stable_sort(stages.begin(), stages.end(), [&](int a, int b) {
      return evaluator_.Span()[a] > evaluator_.Span()[b];
    });
    gaps_.clear();
    for (int w : stages) {
      const std::vector<int32_t>& order = orders_[w];
      const int n = static_cast<int>(order.size());
      if (kind == Kind::kSwap) {
        for (int i = 0; i + 1 < n; ++i) gaps_.push_back({w, i + 1});
        continue;
      }
      const double slack = kRelativeSlack * (1 + evaluator_.Span()[w]);
      for (int i = 1; i < n; ++i) {
        const double gap =
            evaluator_.Start(order[i]) - evaluator_.End(order[i - 1]);
        if (gap > slack) gaps_.push_back({w, i});
      }
    }
    if (kind == Kind::kChain) {
      chains_.resize(gaps_.size());
      for (size_t g = 0; g < gaps_.size(); ++g) {
        DeferChain(gaps_[g], &chains_[g]);
      }
      for (const std::vector<Move>& chain : chains_) {
        if (evaluations_ <= 0) return false;
        if (!chain.empty() && TryChain(chain)) return true;
      }
      return false;
    }
    for (const Gap& gap : gaps_) {
      MovesInto(gap, kind == Kind::kSwap);
      for (const Move& move : moves_) {
        if (evaluations_ <= 0) return false;
        if (Try(move)) return true;
      }
    }
    return false;
  }

  // A stage and a position in its order: an idle gap before that pass
  // or, in the exhaustive sweep, the pass to swap with the one before it.
  struct Gap {
    int stage;
    int at;
  };

  // The pass after `gap` waits for its input; that input, on its own
  // stage, may have been held back by a W just before it, whose own
  // input may have been held back the same way, and so on up the chain
  // of inputs. `chain` receives, for every such W, a move of its slot
  // past the pass it held back, to be tried all at once (TryChain): a W
  // deferred on one stage alone shortens nothing when W's delay the same
  // chain on the stages before it. Reads the evaluator's current timing.
  void DeferChain(const Gap& gap, std::vector<Move>* chain) const {
    chain->clear();
    int32_t waiting = orders_[gap.stage][gap.at];
    for (int hops = 0; hops < 2 * model_.virtual_stages(); ++hops) {
      const int32_t input = model_.CrossDependency(waiting);
      if (input < 0) return;
      const int producer = model_.StageOf(input);
      const int at = position_[input];
      if (at > 0) {
        const int32_t before = orders_[producer][at - 1];
        const double slack =
            kRelativeSlack * (1 + evaluator_.Span()[producer]);
        if (evaluator_.Start(input) <= evaluator_.End(before) + slack) {
          // Held back by the pass before it: only a W may step aside. A
          // stage's order changes once per chain, so that the positions
          // read here stay right.
          if (model_.PassOf(before) != kW) return;
          for (const Move& move : *chain) {
            if (move.stage == producer) return;
          }
          // Its slot goes to where the stage's rhythm next breaks: an
          // idle gap, or two B's back to back (where the 1F-1B steady state
          // left no W between them), else to the end.
          const std::vector<int32_t>& order = orders_[producer];
          const int n = static_cast<int>(order.size());
          int to = n - 1;
          for (int k = at + 1; k < n; ++k) {
            if (evaluator_.Start(order[k]) > evaluator_.End(order[k - 1]) + slack ||
                (model_.PassOf(order[k]) == kB && model_.PassOf(order[k - 1]) == kB)) {
              to = k - 1;
              break;
            }
          }
          chain->push_back({producer, at - 1, to});
        }
      }
      waiting = input;
    }
  }

  // Applies every move of `chain`, each a W's slot going later in its
  // stage's order (DeferWSlot), evaluates once, keeps them if better.
  // One evaluation.
  bool TryChain(const std::vector<Move>& chain) {
    saved_.clear();
    bool legal = true;
    for (const Move& move : chain) {
      saved_.push_back({move.stage, orders_[move.stage]});
      legal = legal && DeferWSlot(model_, orders_[move.stage], move.from, move.to);
    }
    if (legal) {
      tried_ = true;
      --evaluations_;
      const Leximax value = Leximax::Of(evaluator_, evaluator_.Run(orders_));
      if (value.BetterThan(best_)) {
        best_ = value;
        return true;
      }
    }
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      orders_[it->first] = std::move(it->second);
    }
    return false;
  }

  // The moves for `gap`, in moves_: fill the gap with one of the next
  // passes of its stage, or make the input of the waiting pass arrive
  // sooner by moving it earlier on its producer. Exhaustive: the swap.
  void MovesInto(const Gap& gap, bool exhaustive) {
    moves_.clear();
    const int w = gap.stage, i = gap.at;
    if (exhaustive) {
      moves_.push_back({w, i, i - 1});
      return;
    }
    const std::vector<int32_t>& order = orders_[w];
    const int n = static_cast<int>(order.size());
    for (int j = i + 1; j < std::min(n, i + 1 + kReach); ++j) {
      moves_.push_back({w, j, i});
    }
    const int32_t input = model_.CrossDependency(order[i]);
    if (input < 0) return;
    const int producer = model_.StageOf(input);
    const int at = position_[input];
    for (int d = 1; d <= kReach && at - d >= 0; ++d) {
      moves_.push_back({producer, at, at - d});
    }
  }

  const PassModel& model_;
  Evaluator& evaluator_;
  Orders& orders_;
  int64_t& evaluations_;
  std::vector<int> position_;
  std::vector<Gap> gaps_;
  std::vector<Move> moves_;
  std::vector<std::vector<Move>> chains_;
  bool tried_ = false;  // TryMoves evaluated a candidate (see Run)
  std::vector<std::pair<int, std::vector<int32_t>>> saved_;
  Leximax best_ = Leximax::Worst();
};

}  // namespace

Leximax Kick(const PassModel& model, Evaluator& evaluator, Orders* orders,
             int moves, std::mt19937& random, int64_t* evaluations) {
  Orders& o = *orders;
  const int p = model.stages();
  for (int done = 0, tries = 0; done < moves && tries < 64 * moves; ++tries) {
    const int w = static_cast<int>(random() % p);
    const int n = static_cast<int>(o[w].size());
    if (n < 2) continue;
    const int from = static_cast<int>(random() % n);
    const int shift = static_cast<int>(random() % (2 * kReach)) - kReach;
    const int to = std::clamp(from + (shift >= 0 ? shift + 1 : shift), 0, n - 1);
    if (to == from) continue;
    if (!LegalMove(model, o[w], from, to)) continue;
    MovePass(o[w], from, to);
    ++done;
  }
  return Polish(model, evaluator, orders, evaluations);
}

Leximax Leximax::Worst() { return Leximax(); }

Leximax Leximax::Of(const Evaluator& evaluator, const OrderCost& cost) {
  if (!cost.complete || !cost.fits_memory) return Leximax();
  return OfSpans(evaluator.Span());
}

Leximax Leximax::OfSpans(std::vector<double> spans) {
  Leximax value;
  value.spans_ = std::move(spans);
  std::sort(value.spans_.begin(), value.spans_.end(), std::greater<>());
  return value;
}

bool Leximax::BetterThan(const Leximax& other) const {
  if (spans_.empty()) return false;
  if (other.spans_.empty()) return true;
  for (size_t i = 0; i < spans_.size(); ++i) {
    const double slack = kRelativeSlack * (1 + other.spans_[i]);
    if (spans_[i] < other.spans_[i] - slack) return true;
    if (spans_[i] > other.spans_[i] + slack) return false;
  }
  return false;
}

Leximax Polish(const PassModel& model, Evaluator& evaluator, Orders* orders,
               int64_t* evaluations) {
  return Search(model, evaluator, orders, evaluations).Run();
}

}  // namespace zbpp::sched::internal
