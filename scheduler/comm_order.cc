#include "scheduler/comm_order.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/problem.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {
namespace {

// Whether `a` ends a stage's speculative prefix (SpeculativePrefixLengths):
// a pass that accumulates gradients, B, BW or T.
bool EndsPrefix(const Action& a) {
  return a.kind == PassKind::kB || a.kind == PassKind::kBW || a.kind == PassKind::kT;
}

// Where each stage runs the passes that produce messages (ForEachInput's
// inputs: F, B or BW, S, T) of each (virtual stage, microbatch).
class PassIndex {
 public:
  explicit PassIndex(const Schedule& schedule) : of_(schedule.stages) {
    for (int w = 0; w < schedule.stages; ++w) {
      for (int j = 0; j < static_cast<int>(schedule.actions[w].size()); ++j) {
        const Action& a = schedule.actions[w][j];
        if (a.kind != PassKind::kW && a.kind != PassKind::kReduce) of_[w][Key(a)] = j;
      }
    }
  }
  // The index of `a` in stage `w`'s list; the B of a pair stands for its B
  // or BW. Requires the pass to be there (Simulate checked it).
  int At(int w, const Action& a) const { return of_[w].at(Key(a)); }

 private:
  // (F, backward, S or T, virtual stage, microbatch).
  static std::tuple<int, int, int> Key(const Action& a) {
    const int kind = a.kind == PassKind::kBW ? static_cast<int>(PassKind::kB)
                                             : static_cast<int>(a.kind);
    return {kind, a.virtual_stage.value(), a.microbatch};
  }
  std::vector<std::map<std::tuple<int, int, int>, int>> of_;
};

// Graph nodes: passes (stage, action index) first, then messages.
class Graph {
 public:
  explicit Graph(int nodes) : succ_(nodes), pred_(nodes) {}
  void Edge(int from, int to) {
    succ_[from].push_back(to);
    pred_[to].push_back(from);
  }
  // The nodes of one cycle in edge order, or none when the graph has none.
  std::vector<int> FindCycle() const {
    const int n = static_cast<int>(succ_.size());
    std::vector<int> missing(n);
    std::vector<int> ready;
    for (int v = 0; v < n; ++v) {
      missing[v] = static_cast<int>(pred_[v].size());
      if (missing[v] == 0) ready.push_back(v);
    }
    std::vector<bool> done(n, false);
    while (!ready.empty()) {
      const int v = ready.back();
      ready.pop_back();
      done[v] = true;
      for (int s : succ_[v]) {
        if (--missing[s] == 0) ready.push_back(s);
      }
    }
    const auto left = std::find(done.begin(), done.end(), false);
    if (left == done.end()) return {};
    // Every node left has a predecessor left: walk back until one repeats.
    std::vector<int> seen_at(n, -1);
    std::vector<int> walk;
    int v = static_cast<int>(left - done.begin());
    while (seen_at[v] < 0) {
      seen_at[v] = static_cast<int>(walk.size());
      walk.push_back(v);
      v = *std::find_if(pred_[v].begin(), pred_[v].end(), [&](int p) { return !done[p]; });
    }
    std::vector<int> cycle(walk.begin() + seen_at[v], walk.end());
    std::reverse(cycle.begin(), cycle.end());
    return cycle;
  }

 private:
  std::vector<std::vector<int>> succ_, pred_;
};

// InvalidArgument when message #k of `pair` names a stage or a pass that
// `schedule` does not have.
absl::Status CheckInSchedule(const Schedule& schedule, const std::pair<int, int>& pair, size_t k,
                             const Message& m) {
  auto in_schedule = [&](int stage, int action) {
    return stage >= 0 && stage < schedule.stages &&
           stage < static_cast<int>(schedule.actions.size()) && action >= 0 &&
           action < static_cast<int>(schedule.actions[stage].size());
  };
  if (in_schedule(m.from, m.producer) && in_schedule(m.to, m.consumer)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "pair (", pair.first, ", ", pair.second, "), message #", k,
      ": its passes are not in the schedule (stage ", m.from, " action #", m.producer,
      ", stage ", m.to, " action #", m.consumer, ")"));
}

}  // namespace

absl::StatusOr<PairOrders> DerivePairOrders(const Schedule& schedule) {
  Problem unit = Problem::Uniform(schedule.stages, schedule.chunks, schedule.microbatches,
                                  VirtualStageCost{}, /*comm_seconds=*/0);
  const bool vocabulary_parallel = HoldsVocabularyPasses(schedule);
  if (vocabulary_parallel) {
    unit.vocabulary.assign(static_cast<size_t>(std::max(0, schedule.stages)),
                           VocabularyCost{/*s_seconds=*/1, /*t_seconds=*/1});
  }
  absl::StatusOr<SimulationResult> sim = Simulate(unit, schedule);
  if (!sim.ok()) return sim.status();
  const PassIndex index(schedule);
  const std::vector<int> prefix = SpeculativePrefixLengths(schedule);
  // (outside the sender's speculative prefix, end of producer, sender,
  // producer index, receiver, consumer index) per message, for the order:
  // the prefix messages lead (CheckSpeculativePrefixes' rule (b)); one
  // producer's messages to several stages (F of the last virtual stage and
  // S, with vocabulary passes) go by receiver.
  std::map<std::pair<int, int>,
           std::vector<std::pair<std::tuple<bool, double, int, int, int, int>, Message>>>
      keyed;
  for (Stage to : schedule.AllStages()) {
    const std::vector<Action>& list = schedule.ActionsOf(to);
    for (int consumer = 0; consumer < static_cast<int>(list.size()); ++consumer) {
      ForEachInput(schedule, vocabulary_parallel, to, list[consumer],
                   [&](Stage from_stage, const Action& input) {
                     if (from_stage == to) return;
                     const int from = from_stage.value(), w = to.value();
                     const int producer = index.At(from, input);
                     keyed[{std::min(from, w), std::max(from, w)}].push_back(
                         {{producer >= prefix[from], sim->timings[from][producer].end_seconds,
                           from, producer, w, consumer},
                          Message{from, w, producer, consumer}});
                   });
    }
  }
  PairOrders orders;
  for (auto& [pair, messages] : keyed) {
    std::sort(messages.begin(), messages.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (auto& [key, message] : messages) orders[pair].push_back(message);
  }
  return orders;
}

PairOrders ForwardOnlyPairOrders(const Schedule& forward) {
  std::map<std::pair<int, int>, int> index;  // (microbatch, virtual stage) -> action index.
  // (stage, kind, microbatch) -> index of that stage's S or T.
  std::map<std::tuple<int, PassKind, int>, int> vocabulary_index;
  for (int w = 0; w < forward.stages; ++w) {
    for (int i = 0; i < static_cast<int>(forward.actions[w].size()); ++i) {
      const Action& a = forward.actions[w][i];
      if (IsVocabularyPass(a.kind)) {
        vocabulary_index[{w, a.kind, a.microbatch}] = i;
      } else {
        index[{a.microbatch, a.virtual_stage.value()}] = i;
      }
    }
  }
  PairOrders orders;
  auto add = [&](int from, int to, int producer, int consumer) {
    orders[{std::min(from, to), std::max(from, to)}].push_back(
        Message{from, to, producer, consumer});
  };
  const int last = forward.num_virtual_stages() - 1;
  const int last_stage = forward.StageOf(VirtualStage(last)).value();
  for (int mb = 0; mb < forward.microbatches; ++mb) {
    for (int s = 0; s + 1 < forward.num_virtual_stages(); ++s) {
      const int from = forward.StageOf(VirtualStage(s)).value();
      const int to = forward.StageOf(VirtualStage(s + 1)).value();
      if (from == to) continue;
      add(from, to, index[{mb, s}], index[{mb, s + 1}]);
    }
    if (vocabulary_index.empty()) continue;
    // The last virtual stage's output to every other stage's S, then every
    // S's statistics to every other stage's T.
    for (int to = 0; to < forward.stages; ++to) {
      if (to == last_stage) continue;
      add(last_stage, to, index[{mb, last}], vocabulary_index[{to, PassKind::kS, mb}]);
    }
    for (int from = 0; from < forward.stages; ++from) {
      for (int to = 0; to < forward.stages; ++to) {
        if (from == to) continue;
        add(from, to, vocabulary_index[{from, PassKind::kS, mb}],
            vocabulary_index[{to, PassKind::kT, mb}]);
      }
    }
  }
  return orders;
}

absl::Status CheckPairOrders(const Schedule& schedule, const PairOrders& orders) {
  // Pass nodes: an offset per stage.
  std::vector<int> first_node(schedule.stages + 1, 0);
  for (int w = 0; w < schedule.stages; ++w) {
    first_node[w + 1] = first_node[w] + static_cast<int>(schedule.actions[w].size());
  }
  std::vector<const Message*> messages;
  for (const auto& [pair, list] : orders) {
    for (const Message& m : list) messages.push_back(&m);
  }
  const int passes = first_node.back();
  Graph graph(passes + static_cast<int>(messages.size()));
  for (int w = 0; w < schedule.stages; ++w) {
    int previous = -1;
    for (int j = 0; j < static_cast<int>(schedule.actions[w].size()); ++j) {
      if (schedule.actions[w][j].kind == PassKind::kReduce) continue;
      if (previous >= 0) graph.Edge(first_node[w] + previous, first_node[w] + j);
      previous = j;
    }
  }
  int id = passes;
  for (const auto& [pair, list] : orders) {
    for (size_t k = 0; k < list.size(); ++k, ++id) {
      const Message& m = list[k];
      if (absl::Status st = CheckInSchedule(schedule, pair, k, m); !st.ok()) return st;
      graph.Edge(first_node[m.from] + m.producer, id);
      graph.Edge(id, first_node[m.to] + m.consumer);
      if (k > 0) graph.Edge(id - 1, id);
    }
  }
  const std::vector<int> cycle = graph.FindCycle();
  if (cycle.empty()) return absl::OkStatus();
  auto name = [&](int node) {
    if (node >= passes) {
      const Message& m = *messages[node - passes];
      return absl::StrCat("message ", ActionToString(schedule.actions[m.from][m.producer]),
                          " => ", ActionToString(schedule.actions[m.to][m.consumer]));
    }
    const int w = static_cast<int>(std::upper_bound(first_node.begin(), first_node.end(), node) -
                                   first_node.begin()) - 1;
    return absl::StrCat("stage ", w, ": ",
                        ActionToString(schedule.actions[w][node - first_node[w]]));
  };
  std::vector<std::string> names;
  for (int node : cycle) names.push_back(name(node));
  return absl::FailedPreconditionError(absl::StrCat(
      "a transport that runs each pair's messages in this order deadlocks: ",
      absl::StrJoin(names, " -> "), " -> back to the first"));
}

std::vector<int> SpeculativePrefixLengths(const Schedule& schedule) {
  std::vector<int> lengths;
  lengths.reserve(schedule.actions.size());
  for (const std::vector<Action>& list : schedule.actions) {
    lengths.push_back(static_cast<int>(std::find_if(list.begin(), list.end(), EndsPrefix) -
                                       list.begin()));
  }
  return lengths;
}

absl::Status CheckSpeculativePrefixes(const Schedule& schedule, const PairOrders& orders) {
  const std::vector<int> prefix = SpeculativePrefixLengths(schedule);
  auto text = [&](int stage, int action) {
    return ActionToString(schedule.actions[stage][action]);
  };
  auto message_text = [&](const Message& m) {
    return absl::StrCat("message ", text(m.from, m.producer), " => ", text(m.to, m.consumer));
  };
  // Each rule's first offence, and how many messages break it. Every
  // message is checked against the schedule before any offence is reported.
  std::string not_closed, not_leading;
  int not_closed_count = 0, not_leading_count = 0;
  for (const auto& [pair, list] : orders) {
    // The pair's first message produced after its sender's prefix.
    const Message* first_outside = nullptr;
    for (size_t k = 0; k < list.size(); ++k) {
      const Message& m = list[k];
      if (absl::Status st = CheckInSchedule(schedule, pair, k, m); !st.ok()) return st;
      const bool produced_in_prefix = m.producer < prefix[m.from];
      const bool consumed_in_prefix = m.consumer < prefix[m.to];
      if (consumed_in_prefix && !produced_in_prefix && not_closed_count++ == 0) {
        // The producer is not in the prefix, so the sender has a first B
        // (or T).
        not_closed = absl::StrCat(
            "stage ", m.to, " runs ", text(m.to, m.consumer),
            " in its speculative prefix, but its input comes from stage ", m.from, "'s ",
            text(m.from, m.producer), ", which follows that stage's first B (",
            text(m.from, prefix[m.from]), "): prefix not closed");
      }
      if (!produced_in_prefix) {
        if (first_outside == nullptr) first_outside = &m;
      } else if (first_outside != nullptr && not_leading_count++ == 0) {
        const Message& late = *first_outside;
        not_leading = absl::StrCat(
            "stages ", pair.first, " and ", pair.second, ": ", message_text(m),
            " comes from stage ", m.from, "'s speculative prefix, but in the pair's order it "
            "follows ", message_text(late), ", which stage ", late.from,
            " sends at or after its first B (", text(late.from, prefix[late.from]),
            "): prefix messages not leading");
      }
    }
  }
  std::vector<std::string> failures;
  auto add = [&](std::string first, int count) {
    if (count == 0) return;
    if (count > 1) absl::StrAppend(&first, " (", count, " messages break this rule)");
    failures.push_back(std::move(first));
  };
  add(std::move(not_closed), not_closed_count);
  add(std::move(not_leading), not_leading_count);
  if (failures.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrJoin(failures, "; "));
}

}  // namespace zbpp::sched
