#include "scheduler/simulator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zbpp::sched {
namespace {

constexpr double kNotDone = -1.0;

// Flat index of (virtual stage, microbatch).
struct FlatIndex {
  int m;
  int operator()(int virtual_stage, int microbatch) const {
    return virtual_stage * m + microbatch;
  }
  int operator()(VirtualStage virtual_stage, int microbatch) const {
    return virtual_stage.value() * m + microbatch;
  }
};

// End times of the passes that other passes consume (ForEachInput): F and
// the backward (B or BW) per (virtual stage, microbatch), S and T per (stage,
// microbatch); kNotDone until they run.
class PassEnds {
 public:
  PassEnds(int virtual_stages, int stages, int microbatches)
      : m_(microbatches),
        f_(static_cast<size_t>(virtual_stages) * m_, kNotDone),
        b_(f_.size(), kNotDone),
        s_(static_cast<size_t>(stages) * m_, kNotDone),
        t_(s_.size(), kNotDone) {}

  // The slot of `a` run on `stage`; nullptr for W and REDUCE_GRAD, whose
  // ends no pass waits for.
  double* Of(Stage stage, const Action& a) {
    const size_t by_virtual_stage = static_cast<size_t>(a.virtual_stage.value()) * m_ + a.microbatch;
    const size_t by_stage = static_cast<size_t>(stage.value()) * m_ + a.microbatch;
    switch (a.kind) {
      case PassKind::kF:
        return &f_[by_virtual_stage];
      case PassKind::kB:
      case PassKind::kBW:
        return &b_[by_virtual_stage];
      case PassKind::kS:
        return &s_[by_stage];
      case PassKind::kT:
        return &t_[by_stage];
      case PassKind::kW:
      case PassKind::kReduce:
        break;
    }
    return nullptr;
  }

 private:
  size_t m_;
  std::vector<double> f_, b_, s_, t_;
};

// Seconds the pass `a` (not a reduction) lasts on `stage`: its virtual
// stage's cost, or for a vocabulary pass the stage's VocabularyCost.
double SecondsOf(const Problem& problem, Stage stage, const Action& a,
                 const std::vector<int>& buckets) {
  if (IsVocabularyPass(a.kind)) {
    return PassSeconds(problem.vocabulary[static_cast<size_t>(stage.value())], a);
  }
  return PassSeconds(problem.CostOf(a.virtual_stage), a, buckets[a.virtual_stage.value()]);
}

std::string Where(int stage, size_t position, const Action& action) {
  return absl::StrCat("stage ", stage, ", action #", position, " (",
                      ActionToString(action), ")");
}

// CheckSchedule's rules for the vocabulary passes of a schedule holding
// some, from the positions it found: f_pos and b_pos per (virtual stage,
// microbatch), s_pos and t_pos per (stage, microbatch), -1 when absent.
absl::Status CheckVocabularyPasses(const Schedule& schedule, const std::vector<int>& f_pos,
                                   const std::vector<int>& b_pos, const std::vector<int>& s_pos,
                                   const std::vector<int>& t_pos) {
  const int m = schedule.microbatches;
  const VirtualStage last(schedule.num_virtual_stages() - 1);
  const int holder = schedule.StageOf(last).value();
  for (int w = 0; w < schedule.stages; ++w) {
    const std::vector<Action>& list = schedule.actions[w];
    for (int mb = 0; mb < m; ++mb) {
      const int s = s_pos[w * m + mb], t = t_pos[w * m + mb];
      for (auto [pos, kind] : {std::pair{s, PassKind::kS}, std::pair{t, PassKind::kT}}) {
        if (pos < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stage ", w, ": missing ", ActionToString({kind, last, mb}),
              "; a schedule with vocabulary passes needs one S and one T per stage and "
              "microbatch"));
        }
      }
      if (t < s) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, t, list[t]), ": T before its S (", ActionToString(list[s]), ")"));
      }
      if (w != holder) continue;
      const int f = f_pos[last.value() * m + mb], b = b_pos[last.value() * m + mb];
      if (s < f) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, s, list[s]), ": S before its F (", ActionToString(list[f]), ")"));
      }
      if (b < t) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, b, list[b]), ": backward of the last virtual stage before its stage's T (",
            ActionToString(list[t]), ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int> BucketsPerVirtualStage(const Schedule& schedule) {
  std::vector<int> buckets(std::max(0, schedule.num_virtual_stages()), 1);
  for (const auto& list : schedule.actions) {
    for (const Action& a : list) {
      if (a.virtual_stage.value() >= 0 && a.virtual_stage.value() < static_cast<int>(buckets.size()) && a.bucket >= 0 &&
          a.bucket < kMaxBuckets) {
        buckets[a.virtual_stage.value()] = std::max(buckets[a.virtual_stage.value()], a.bucket + 1);
      }
    }
  }
  return buckets;
}

double PassSeconds(const VirtualStageCost& c, const Action& a, int buckets) {
  const double share = a.bucket == kAllBuckets ? 1.0 : 1.0 / buckets;
  switch (a.kind) {
    case PassKind::kF:
      return c.f_seconds;
    case PassKind::kB:
      return c.b_seconds;
    case PassKind::kW:
      return c.w_seconds * share;
    case PassKind::kBW:
      return FusedBackwardSeconds(c);
    case PassKind::kReduce:
      return c.reduce_seconds * share;
    case PassKind::kS:
    case PassKind::kT:
      break;
  }
  return 0;
}

double PassSeconds(const VocabularyCost& c, const Action& a) {
  return a.kind == PassKind::kS ? c.s_seconds : a.kind == PassKind::kT ? c.t_seconds : 0;
}

double PassMemoryBytes(const VirtualStageCost& c, const Action& a, int buckets) {
  switch (a.kind) {
    case PassKind::kF:
      return c.m_b_bytes;
    case PassKind::kB:
      return -(c.m_b_bytes - c.m_w_bytes);
    case PassKind::kW:
      return -c.m_w_bytes * (a.bucket == kAllBuckets ? 1.0 : 1.0 / buckets);
    case PassKind::kBW:
      return -c.m_b_bytes;
    case PassKind::kReduce:
    case PassKind::kS:
    case PassKind::kT:
      break;
  }
  return 0;
}

double PassMemoryBytes(const VocabularyCost& c, const Action& a) {
  return a.kind == PassKind::kS ? c.m_bytes : a.kind == PassKind::kT ? -c.m_bytes : 0;
}

bool HoldsVocabularyPasses(const Schedule& schedule) {
  for (const std::vector<Action>& list : schedule.actions) {
    for (const Action& a : list) {
      if (IsVocabularyPass(a.kind)) return true;
    }
  }
  return false;
}

absl::Status CheckSchedule(const Problem& problem, const Schedule& schedule) {
  if (schedule.stages != problem.stages ||
      schedule.chunks != problem.chunks ||
      schedule.microbatches != problem.microbatches) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule is for p=", schedule.stages, " v=", schedule.chunks,
        " m=", schedule.microbatches, " but the problem has p=",
        problem.stages, " v=", problem.chunks, " m=", problem.microbatches));
  }
  const int num_virtual_stages = problem.num_virtual_stages();
  const int m = problem.microbatches;
  if (static_cast<int>(schedule.stage_of.size()) != num_virtual_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage_of must have ", num_virtual_stages,
                     " entries, got ", schedule.stage_of.size()));
  }
  for (int s = 0; s < num_virtual_stages; ++s) {
    const int w = schedule.stage_of[s];
    if (w < 0 || w >= problem.stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage_of[", s, "] = ", w, " is not a stage in [0, ",
          problem.stages, ")"));
    }
  }
  if (static_cast<int>(schedule.actions.size()) != problem.stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("actions must have one list per stage (",
                     problem.stages, "), got ", schedule.actions.size()));
  }
  // Every (virtual stage, microbatch) needs an F and a B or BW, so a schedule with
  // fewer actions than pairs is incomplete. Checked before the tables of
  // num_virtual_stages * m entries below, so that one huge microbatch number (an
  // imported "0F399999992") is refused instead of allocating gigabytes
  // (found by tests/fuzz/schedule_io_fuzz).
  size_t total_actions = 0;
  for (const auto& list : schedule.actions) total_actions += list.size();
  const int64_t pairs = int64_t{num_virtual_stages} * m;
  if (pairs > static_cast<int64_t>(total_actions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule has ", total_actions, " actions, too few for its ", pairs,
        " (virtual stage, microbatch) pairs"));
  }
  // Position of each pass in its stage's list, -1 when absent; w_pos is a
  // whole W's, w_bucket_pos a partial W's, at bucket_base[s] + mb * K_s + b.
  const FlatIndex at{m};
  const std::vector<int> buckets = BucketsPerVirtualStage(schedule);
  std::vector<int> bucket_base(num_virtual_stages + 1, 0);
  for (int s = 0; s < num_virtual_stages; ++s) bucket_base[s + 1] = bucket_base[s] + buckets[s];
  auto w_bucket_at = [&](int s, int mb, int b) {
    return static_cast<size_t>(bucket_base[s]) * m + static_cast<size_t>(mb) * buckets[s] + b;
  };
  std::vector<int> f_pos(num_virtual_stages * m, -1), b_pos(num_virtual_stages * m, -1),
      w_pos(num_virtual_stages * m, -1);
  std::vector<int> w_bucket_pos(static_cast<size_t>(bucket_base[num_virtual_stages]) * m, -1);
  std::vector<int> w_buckets_seen(num_virtual_stages * m, 0);
  std::vector<char> fused(num_virtual_stages * m, 0);
  // Position of each virtual stage's whole reduction and of its partial ones
  // (reduce_bucket_pos[bucket_base[s] + b]), -1 when absent.
  std::vector<int> reduce_pos(num_virtual_stages, -1);
  std::vector<int> reduce_bucket_pos(bucket_base[num_virtual_stages], -1);
  bool any_reduce = false;
  // Position of each stage's S and T of each microbatch (w * m + microbatch),
  // -1 when absent.
  std::vector<int> s_pos(static_cast<size_t>(problem.stages) * m, -1);
  std::vector<int> t_pos(static_cast<size_t>(problem.stages) * m, -1);
  bool any_vocabulary = false;
  for (int w = 0; w < problem.stages; ++w) {
    const auto& list = schedule.actions[w];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.virtual_stage.value() < 0 || a.virtual_stage.value() >= num_virtual_stages) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(w, i, a), ": virtual stage out of range [0, ",
                         num_virtual_stages, ")"));
      }
      if (a.microbatch < 0 || a.microbatch >= m) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, i, a), ": microbatch out of range [0, ", m, ")"));
      }
      if (IsVocabularyPass(a.kind) && a.virtual_stage.value() != num_virtual_stages - 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, i, a), ": a vocabulary pass belongs to the last virtual stage (",
            num_virtual_stages - 1, "), got ", a.virtual_stage.value()));
      }
      if (!IsVocabularyPass(a.kind) && schedule.StageOf(a.virtual_stage).value() != w) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, i, a), ": virtual stage ", a.virtual_stage.value(), " is held by stage ",
            schedule.StageOf(a.virtual_stage).value()));
      }
      const bool partial = a.bucket != kAllBuckets;
      if (partial && ((a.kind != PassKind::kW && a.kind != PassKind::kReduce) ||
                      a.bucket < 0 || a.bucket >= kMaxBuckets)) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, i, a), ": only W and REDUCE_GRAD take a bucket, in [0, ", kMaxBuckets,
            ")"));
      }
      if (a.kind == PassKind::kReduce) {
        if (a.microbatch != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(w, i, a), ": a reduction covers every microbatch; its "
                              "microbatch must be 0, got ", a.microbatch));
        }
        int& slot = partial ? reduce_bucket_pos[bucket_base[a.virtual_stage.value()] + a.bucket]
                            : reduce_pos[a.virtual_stage.value()];
        if (slot >= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(w, i, a), ": duplicate reduction of virtual stage ",
                           a.virtual_stage.value()));
        }
        slot = static_cast<int>(i);
        any_reduce = true;
        continue;
      }
      if (IsVocabularyPass(a.kind)) {
        int& slot = (a.kind == PassKind::kS ? s_pos : t_pos)[w * m + a.microbatch];
        if (slot >= 0) {
          return absl::InvalidArgumentError(absl::StrCat(Where(w, i, a), ": duplicate pass"));
        }
        slot = static_cast<int>(i);
        any_vocabulary = true;
        continue;
      }
      const int k = at(a.virtual_stage, a.microbatch);
      if (a.kind == PassKind::kW && partial) {
        int& slot = w_bucket_pos[w_bucket_at(a.virtual_stage.value(), a.microbatch, a.bucket)];
        if (slot >= 0 || w_pos[k] >= 0 || fused[k]) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(w, i, a), ": duplicate pass"));
        }
        slot = static_cast<int>(i);
        ++w_buckets_seen[k];
        continue;
      }
      int* slot = a.kind == PassKind::kF   ? &f_pos[k]
                  : a.kind == PassKind::kW ? &w_pos[k]
                                           : &b_pos[k];
      if (*slot >= 0 || (a.kind == PassKind::kW && (fused[k] || w_buckets_seen[k] > 0)) ||
          (a.kind == PassKind::kBW && (w_pos[k] >= 0 || w_buckets_seen[k] > 0))) {
        return absl::InvalidArgumentError(
            absl::StrCat(Where(w, i, a), ": duplicate pass"));
      }
      *slot = static_cast<int>(i);
      if (a.kind == PassKind::kBW) fused[k] = 1;
    }
  }
  for (int s = 0; s < num_virtual_stages; ++s) {
    const int w = schedule.stage_of[s];
    for (int mb = 0; mb < m; ++mb) {
      const int k = at(s, mb);
      if (f_pos[k] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", w, ": missing F of virtual stage ", s, " microbatch ", mb));
      }
      if (b_pos[k] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", w, ": missing B of virtual stage ", s,
                         " microbatch ", mb));
      }
      if (!fused[k] && w_pos[k] < 0) {
        for (int b = 0; b < buckets[s]; ++b) {
          if (w_bucket_pos[w_bucket_at(s, mb, b)] < 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "stage ", w, ": missing W of virtual stage ", s, " microbatch ", mb,
                w_buckets_seen[k] > 0 ? absl::StrCat(" bucket ", b) : ""));
          }
        }
      }
      const auto& list = schedule.actions[w];
      if (b_pos[k] < f_pos[k]) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, b_pos[k], list[b_pos[k]]), ": B before its F (",
            ActionToString(list[f_pos[k]]), ")"));
      }
      for (int b = -1; b < (fused[k] || w_pos[k] >= 0 ? 0 : buckets[s]); ++b) {
        const int pos = b < 0 ? w_pos[k] : w_bucket_pos[w_bucket_at(s, mb, b)];
        if (pos >= 0 && pos < b_pos[k]) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(w, pos, list[pos]), ": W before its B (",
                           ActionToString(list[b_pos[k]]), ")"));
        }
      }
    }
  }
  if (any_vocabulary) {
    if (absl::Status st = CheckVocabularyPasses(schedule, f_pos, b_pos, s_pos, t_pos); !st.ok()) {
      return st;
    }
  }
  if (!any_reduce) return absl::OkStatus();
  for (int s = 0; s < num_virtual_stages; ++s) {
    const int w = schedule.stage_of[s];
    const int K = buckets[s];
    int partial_reductions = 0;
    for (int b = 0; b < K; ++b) partial_reductions += reduce_bucket_pos[bucket_base[s] + b] >= 0;
    if (reduce_pos[s] >= 0 && partial_reductions > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", w, ": virtual stage ", s,
          " has a whole reduction and partial ones; it needs one or the other"));
    }
    if (reduce_pos[s] < 0 && partial_reductions < K) {
      Action missing{PassKind::kReduce, VirtualStage(s), 0};
      for (int b = 0; partial_reductions > 0 && b < K; ++b) {
        if (reduce_bucket_pos[bucket_base[s] + b] < 0) {
          missing.bucket = b;
          break;
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", w, ": missing reduction of virtual stage ", s, " (", ActionToString(missing),
          "); a schedule with reductions needs one per virtual stage (or one per bucket)"));
    }
    // Each reduction against the virtual stage's last weight-gradient pass covering
    // its buckets: a W (whole or of the bucket), or BW where fused.
    const auto& list = schedule.actions[w];
    for (int b = reduce_pos[s] >= 0 ? -1 : 0; b < (reduce_pos[s] >= 0 ? 0 : K); ++b) {
      int last = -1;
      for (int mb = 0; mb < m; ++mb) {
        const int k = at(s, mb);
        if (fused[k]) {
          last = std::max(last, b_pos[k]);
        } else if (w_pos[k] >= 0) {
          last = std::max(last, w_pos[k]);
        } else {
          for (int c = b < 0 ? 0 : b; c < (b < 0 ? K : b + 1); ++c) {
            last = std::max(last, w_bucket_pos[w_bucket_at(s, mb, c)]);
          }
        }
      }
      const int pos = b < 0 ? reduce_pos[s] : reduce_bucket_pos[bucket_base[s] + b];
      if (pos < last) {
        return absl::InvalidArgumentError(absl::StrCat(
            Where(w, pos, list[pos]), ": reduction before the virtual stage's last W or BW (",
            ActionToString(list[last]), ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SimulationResult> Simulate(const Problem& problem,
                                          const Schedule& schedule) {
  if (absl::Status st = problem.Validate(); !st.ok()) return st;
  if (absl::Status st = CheckSchedule(problem, schedule); !st.ok()) return st;
  const bool vocabulary_parallel = HoldsVocabularyPasses(schedule);
  if (vocabulary_parallel && problem.vocabulary.empty()) {
    return absl::InvalidArgumentError(
        "the schedule holds vocabulary passes (S, T) but the problem has no vocabulary costs "
        "(Problem::vocabulary is empty)");
  }
  if (!vocabulary_parallel && !problem.vocabulary.empty()) {
    return absl::InvalidArgumentError(
        "the problem has vocabulary costs (Problem::vocabulary) but the schedule holds no "
        "vocabulary passes (S, T): the LM head's cost would be lost (AddVocabularyPasses "
        "places them)");
  }

  const int p = problem.stages;
  const int num_virtual_stages = problem.num_virtual_stages();
  const auto& owner = schedule.stage_of;
  const std::vector<int> buckets = BucketsPerVirtualStage(schedule);
  PassEnds ends(num_virtual_stages, p, problem.microbatches);

  SimulationResult result;
  result.timings.resize(p);
  for (int w = 0; w < p; ++w) result.timings[w].resize(schedule.actions[w].size());
  std::vector<size_t> next(p, 0);
  // Each stage's compute timeline, and its communication timeline where
  // reductions run one at a time.
  std::vector<double> free_at(p, 0.0);
  std::vector<double> comm_free_at(p, 0.0);
  std::vector<char> queued(p, 1);
  std::deque<int> ready;
  for (int w = 0; w < p; ++w) ready.push_back(w);

  auto wake = [&](int w) {
    if (!queued[w]) {
      queued[w] = 1;
      ready.push_back(w);
    }
  };
  // Wakes the stages whose passes may consume `a`, just run (ForEachInput).
  auto wake_consumers = [&](const Action& a) {
    const int v = a.virtual_stage.value();
    const bool last = v == num_virtual_stages - 1;
    if ((a.kind == PassKind::kF && last && vocabulary_parallel) || a.kind == PassKind::kS) {
      for (int w = 0; w < p; ++w) wake(w);
    } else if (a.kind == PassKind::kF && !last) {
      wake(owner[v + 1]);
    } else if ((a.kind == PassKind::kB || a.kind == PassKind::kBW) && v > 0) {
      wake(owner[v - 1]);
    } else if (a.kind == PassKind::kT) {
      wake(owner[num_virtual_stages - 1]);
    }
  };

  while (!ready.empty()) {
    const int w = ready.front();
    ready.pop_front();
    queued[w] = 0;
    const auto& list = schedule.actions[w];
    while (next[w] < list.size()) {
      const Action& a = list[next[w]];
      if (a.kind == PassKind::kReduce) {
        // Issued now (every W of the virtual stage is done: CheckSchedule), it
        // waits only for the reductions before it; the passes after it
        // do not wait for it.
        const double comm_start = std::max(free_at[w], comm_free_at[w]);
        const double comm_end =
            comm_start + PassSeconds(problem.CostOf(a.virtual_stage), a, buckets[a.virtual_stage.value()]);
        result.timings[w][next[w]] = {comm_start, comm_end};
        comm_free_at[w] = comm_end;
        ++next[w];
        continue;
      }
      // An input produced on another stage arrives one hop after it ends;
      // one produced on this stage is handed over at once.
      double start = free_at[w];
      bool blocked = false;
      ForEachInput(schedule, vocabulary_parallel, Stage(w), a,
                   [&](Stage from, const Action& input) {
                     const double end = *ends.Of(from, input);
                     if (end == kNotDone) {
                       blocked = true;
                     } else {
                       start = std::max(
                           start, from.value() == w ? end : end + problem.comm_seconds);
                     }
                   });
      if (blocked) break;
      if (MergesWithNext(list, next[w])) {
        // One merged pass of T_BW: its B part, whose input gradient goes out
        // at its end (the runtime sends it before the W part), then the W
        // part, timed as the pair's two actions.
        const VirtualStageCost& cost = problem.CostOf(a.virtual_stage);
        const double fused = FusedBackwardSeconds(cost);
        const double b_part = start + std::min(cost.b_seconds, fused);
        result.timings[w][next[w]] = {start, b_part};
        result.timings[w][next[w] + 1] = {b_part, start + fused};
        free_at[w] = start + fused;
        next[w] += 2;
        *ends.Of(Stage(w), a) = b_part;
        wake_consumers(a);
        continue;
      }
      const double end = start + SecondsOf(problem, Stage(w), a, buckets);
      result.timings[w][next[w]] = {start, end};
      free_at[w] = end;
      ++next[w];
      if (double* slot = ends.Of(Stage(w), a)) *slot = end;
      wake_consumers(a);
    }
  }

  std::vector<std::string> stuck;
  for (int w = 0; w < p; ++w) {
    const auto& list = schedule.actions[w];
    if (next[w] == list.size()) continue;
    const Action& a = list[next[w]];
    std::string needs;
    ForEachInput(schedule, vocabulary_parallel, Stage(w), a,
                 [&](Stage from, const Action& input) {
                   if (needs.empty() && *ends.Of(from, input) == kNotDone) {
                     needs = absl::StrCat(ActionToString(input), " on stage ", from.value());
                   }
                 });
    stuck.push_back(absl::StrCat(Where(w, next[w], a), " waits for ", needs));
  }
  if (!stuck.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("deadlock: ", absl::StrJoin(stuck, "; ")));
  }

  result.busy_seconds.assign(p, 0.0);
  result.idle_seconds.assign(p, 0.0);
  result.exposed_reduce_seconds_per_stage.assign(p, 0.0);
  result.peak_memory_bytes.assign(p, 0.0);
  result.peak_running_memory_bytes.assign(p, 0.0);
  result.peak_memory_m_b.assign(p, 0.0);
  double first_start = 0, last_end = 0, busy_total = 0;
  // The makespan the passes alone set, against which reductions are exposed.
  double compute_makespan = 0;
  bool any = false;
  for (int w = 0; w < p; ++w) {
    const auto& list = schedule.actions[w];
    if (list.empty()) continue;
    const auto& t = result.timings[w];
    double memory = 0;
    // Span of the passes alone, and of everything; a reduction never
    // starts before the pass it follows, so the first action starts both.
    const double stage_start = t.front().start_seconds;
    double compute_end = stage_start, reduce_end = stage_start;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.kind == PassKind::kReduce) {
        reduce_end = std::max(reduce_end, t[i].end_seconds);
        continue;
      }
      compute_end = std::max(compute_end, t[i].end_seconds);
      result.busy_seconds[w] += t[i].end_seconds - t[i].start_seconds;
      const bool vocabulary_pass = IsVocabularyPass(a.kind);
      const double before = memory;
      memory += vocabulary_pass ? PassMemoryBytes(problem.vocabulary[w], a)
                                : PassMemoryBytes(problem.CostOf(a.virtual_stage), a,
                                                  buckets[a.virtual_stage.value()]);
      result.peak_memory_bytes[w] = std::max(result.peak_memory_bytes[w], memory);
      // While the pass runs, it holds the larger of its two ends plus its
      // working memory (VirtualStageCost::transient_bytes, or the vocabulary
      // pass's VocabularyCost::transient_bytes).
      const double transient = vocabulary_pass ? problem.vocabulary[w].transient_bytes
                                               : problem.CostOf(a.virtual_stage).transient_bytes;
      result.peak_running_memory_bytes[w] =
          std::max(result.peak_running_memory_bytes[w], std::max(before, memory) + transient);
    }
    const double stage_end = std::max(compute_end, reduce_end);
    result.exposed_reduce_seconds_per_stage[w] = stage_end - compute_end;
    result.makespan_seconds =
        std::max(result.makespan_seconds, stage_end - stage_start);
    compute_makespan = std::max(compute_makespan, compute_end - stage_start);
    first_start = any ? std::min(first_start, stage_start) : stage_start;
    last_end = std::max(last_end, stage_end);
    any = true;
    busy_total += result.busy_seconds[w];
  }
  result.step_seconds = last_end - first_start;
  result.exposed_reduce_seconds = result.makespan_seconds - compute_makespan;
  std::vector<double> unit(p, 0.0);
  for (int s = 0; s < num_virtual_stages; ++s) unit[owner[s]] += problem.virtual_stages[s].m_b_bytes;
  for (int w = 0; w < p; ++w) {
    result.idle_seconds[w] = result.makespan_seconds - result.busy_seconds[w];
    result.peak_memory_m_b[w] =
        unit[w] > 0 ? result.peak_memory_bytes[w] / unit[w] : 0.0;
    result.max_peak_memory_m_b =
        std::max(result.max_peak_memory_m_b, result.peak_memory_m_b[w]);
  }
  result.bubble_rate =
      result.makespan_seconds > 0
          ? std::max(0.0, 1.0 - busy_total / (p * result.makespan_seconds))
          : 0.0;
  return result;
}

}  // namespace zbpp::sched
