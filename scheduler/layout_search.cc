#include "scheduler/layout_search.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace zbpp::sched {
namespace {

// The order BalancedLayouts ranks layouts in: the largest stage's work
// first, then the sum of squares (which prefers spreading the rest).
struct Balance {
  double largest = 0;
  double squares = 0;
  bool operator<(const Balance& other) const {
    return std::tie(largest, squares) < std::tie(other.largest, other.squares);
  }
};

Balance BalanceOf(const LayoutWork& work, const std::vector<int>& layout) {
  Balance balance;
  for (double seconds : StageWork(work, layout)) {
    balance.largest = std::max(balance.largest, seconds);
    balance.squares += seconds * seconds;
  }
  return balance;
}

// Every layout one block away from `layout` that changes the stages' work:
// a block moved between virtual stages of different stages, leaving each at
// least one.
std::vector<std::vector<int>> Neighbours(const LayoutWork& work, const std::vector<int>& layout) {
  std::vector<std::vector<int>> out;
  const int n = static_cast<int>(layout.size());
  for (int from = 0; from < n; ++from) {
    if (layout[from] <= 1) continue;
    for (int to = 0; to < n; ++to) {
      if (work.stage_of[to] == work.stage_of[from]) continue;
      std::vector<int> moved = layout;
      --moved[from];
      ++moved[to];
      out.push_back(std::move(moved));
    }
  }
  return out;
}

}  // namespace

std::vector<int> MostEvenLayout(int blocks, int n) {
  std::vector<int> layout(n, blocks / n);
  for (int k = 0; k < blocks % n; ++k) ++layout[k];
  return layout;
}

std::vector<double> StageWork(const LayoutWork& work, const std::vector<int>& layout) {
  int stages = 0;
  for (int stage : work.stage_of) stages = std::max(stages, stage + 1);
  std::vector<double> out(stages, 0.0);
  for (size_t k = 0; k < layout.size(); ++k) {
    out[work.stage_of[k]] += layout[k] * work.block_seconds + work.extra_seconds[k];
  }
  return out;
}

std::vector<std::vector<int>> BalancedLayouts(int blocks, const LayoutWork& work,
                                              int max_layouts) {
  const int n = static_cast<int>(work.stage_of.size());
  std::vector<int> best = MostEvenLayout(blocks, n);
  Balance best_balance = BalanceOf(work, best);
  // Each move lowers the balance strictly, so the search ends; the cap only
  // bounds it against round-off.
  for (int move = 0; move < blocks * n; ++move) {
    std::vector<int> next;
    Balance next_balance = best_balance;
    for (std::vector<int>& candidate : Neighbours(work, best)) {
      const Balance balance = BalanceOf(work, candidate);
      if (balance < next_balance) {
        next_balance = balance;
        next = std::move(candidate);
      }
    }
    if (next.empty()) break;
    best = std::move(next);
    best_balance = next_balance;
  }
  std::vector<std::pair<Balance, std::vector<int>>> ranked;
  std::set<std::vector<int>> seen = {best};
  for (std::vector<int>& neighbour : Neighbours(work, best)) {
    if (!seen.insert(neighbour).second) continue;
    const Balance balance = BalanceOf(work, neighbour);
    ranked.emplace_back(balance, std::move(neighbour));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<int>> out = {std::move(best)};
  for (auto& [balance, layout] : ranked) {
    if (static_cast<int>(out.size()) >= max_layouts) break;
    out.push_back(std::move(layout));
  }
  return out;
}

}  // namespace zbpp::sched
