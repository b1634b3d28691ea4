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
    bool exhaustive = false;
    while (evaluations_ > 0) {
      // The evaluator holds the timing of the current orders here: after
      // the initial Run or after the accepted candidate's Run.
      if (TryMoves(exhaustive)) {
        exhaustive = false;
      } else if (!exhaustive) {
        exhaustive = true;
        // The exhaustive sweep needs the current timing again only to
        // order stages; re-run once (cheap next to the sweep itself).
        evaluator_.Run(orders_);
        --evaluations_;
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

  // Tries the moves worth trying from the current timing, most promising
  // first (the gaps of the stages with the longest spans), until one
  // improves (true) or the budget is spent. The gaps are read from the
  // timing before the first try (a rejected try leaves the evaluator with
  // its own timing); each gap's moves are made only when its turn comes,
  // since a small budget tries only the first few.
  bool TryMoves(bool exhaustive) {
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
      if (exhaustive) {
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
    for (const Gap& gap : gaps_) {
      MovesInto(gap, exhaustive);
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
