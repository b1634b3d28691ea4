#ifndef ZBPP_SCHEDULER_SCHEDULE_H_
#define ZBPP_SCHEDULER_SCHEDULE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/indices.h"

namespace zbpp::sched {

/// The passes of the Zero Bubble paper (§2): F, B (input gradient only),
/// W (weight gradient only), and BW (B and W fused, as 1F1B and GPipe run);
/// plus kReduce, the data-parallel gradient reduction of one virtual stage
/// (an all-reduce of its weight gradients over the virtual stage's d replicas, once
/// per step, after the virtual stage's last W or BW). A reduction runs on the
/// stage's communication timeline: it is issued where it stands in the
/// order, overlaps the passes that follow it, and is waited for only before
/// the optimizer step.
///
/// Gradient buckets. A virtual stage's weights may be split into K buckets
/// (contiguous groups of its linear layers of about equal size; the
/// parameters whose gradients B computes belong to bucket 0): a W pass may
/// then run as K partial passes `W@b`, one per bucket, each computing that
/// bucket's weight gradients (T_W/K, freeing M_W/K), and the virtual stage's
/// reduction as K partial reductions `REDUCE_GRAD@b` (each R/K), bucket b's
/// issued once every W of the virtual stage covering b has run. Reducing bucket by
/// bucket lets the first buckets' reductions overlap the W work of the last
/// ones — the one way to hide a virtual stage's reduction behind its own W passes.
/// K is the number of buckets the schedule names for the virtual stage (1 + the
/// largest bucket index); 1, the whole virtual stage, when it names none.
///
/// Vocabulary parallelism (Yeung et al., "Balancing Pipeline Parallelism with
/// Vocabulary Parallelism", MLSys 2025; docs/schedules.md, "Vocabulary
/// passes"): the LM head and the loss are split by vocabulary over all p
/// stages, and each stage runs two passes of its own shard per microbatch,
/// kS and kT. Their `virtual_stage` is the last one (the head's: its F's
/// output, the final norm's, is their input) whatever stage runs them, and
/// every stage runs exactly one S and one T per microbatch.
///  * kS (S pass): the shard's logits for the hidden state of the last
///    virtual stage's F of the microbatch, and their softmax statistics
///    (largest logit, sum of exponentials, the target's logit). Needs that F
///    (a message from its stage to every other one).
///  * kT (T pass): the loss and the shard's gradients (the logits' gradient,
///    the head shard's weight gradient, the shard's part of the hidden
///    state's gradient). Needs the S of the microbatch on every stage (the
///    statistics, one message from each other stage).
/// The last virtual stage's B (or BW) of the microbatch then needs the T of
/// every stage (it sums their parts of the gradient), not the loss of its
/// own F: in a schedule holding S and T passes, the last virtual stage ends
/// at the final norm.
enum class PassKind { kF, kB, kW, kBW, kReduce, kS, kT };

/// Whether `kind` is a vocabulary pass (kS or kT). Pure.
inline bool IsVocabularyPass(PassKind kind) { return kind == PassKind::kS || kind == PassKind::kT; }

/// Bucket index of an action that covers every bucket of its virtual stage.
inline constexpr int kAllBuckets = -1;
/// Bucket indices are below this bound (CheckSchedule).
inline constexpr int kMaxBuckets = 64;

/// One pass of one virtual stage on one microbatch (kReduce: on all of them;
/// its microbatch is 0).
struct Action {
  PassKind kind = PassKind::kF;
  VirtualStage virtual_stage;  ///< Virtual stage, in model order.
  int microbatch = 0;  ///< Microbatch index in [0, m); 0 for kReduce.
  /// kW and kReduce: the gradient bucket covered, in [0, K), or
  /// kAllBuckets; kAllBuckets for the other kinds.
  int bucket = kAllBuckets;

  friend bool operator==(const Action& a, const Action& b) {
    return a.kind == b.kind && a.virtual_stage == b.virtual_stage &&
           a.microbatch == b.microbatch && a.bucket == b.bucket;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

/// Whether `a` stands for its virtual stage's reduction, counted once: a
/// whole REDUCE_GRAD, or the partial one of bucket 0 (a complete schedule
/// with reductions has exactly one such action per virtual stage).
inline bool IsVirtualStageReduction(const Action& a) {
  return a.kind == PassKind::kReduce && a.bucket <= 0;
}

/// Whether `actions[i]` is a B whose whole W (same virtual stage and
/// microbatch, every bucket) is `actions[i + 1]`: a merged pair. The runtime
/// runs such a pair as one backward pass (the B part, its input gradient
/// sent, then the W part), the simulator charges it T_BW
/// (FusedBackwardSeconds) with the input gradient out after T_B, and the
/// timelines draw it as one BW unit from the B's start to the W's end (the
/// timings keep an interval per action: B's part, then W's). A partial W
/// (`W@b`) never merges. PyTorch pipelining's runtime has the same pass
/// (`_merge_bw`). Pure.
inline bool MergesWithNext(const std::vector<Action>& actions, size_t i) {
  return i + 1 < actions.size() && actions[i].kind == PassKind::kB &&
         actions[i + 1] == Action{PassKind::kW, actions[i].virtual_stage, actions[i].microbatch,
                                  kAllBuckets};
}

/// Whether `actions[i]` is the W of a merged pair (MergesWithNext(actions,
/// i - 1)). Pure.
inline bool MergedIntoPrevious(const std::vector<Action>& actions, size_t i) {
  return i > 0 && MergesWithNext(actions, i - 1);
}

/// How many merged pairs (MergesWithNext) `schedule` holds over all stages.
/// Pure.
inline int CountMergedPairs(const std::vector<std::vector<Action>>& actions_per_stage) {
  int pairs = 0;
  for (const std::vector<Action>& actions : actions_per_stage) {
    for (size_t i = 0; i < actions.size(); ++i) pairs += MergesWithNext(actions, i);
  }
  return pairs;
}

/// What a timeline draws for `actions[i]`: the action itself, or for the B
/// of a merged pair (MergesWithNext) one BW unit of its virtual stage and
/// microbatch, from the B's start to the W's end (its W,
/// MergedIntoPrevious, is not drawn apart). Pure.
inline Action TimelineUnit(const std::vector<Action>& actions, size_t i) {
  if (!MergesWithNext(actions, i)) return actions[i];
  return {PassKind::kBW, actions[i].virtual_stage, actions[i].microbatch, kAllBuckets};
}

/// Text form of one action, as PyTorch pipelining writes it:
/// `{virtual stage}{F|I|W|B}{microbatch}` where I is the input-gradient pass (our B)
/// and B the fused backward (our BW); a reduction is `{virtual stage}REDUCE_GRAD`.
/// The vocabulary passes are `{virtual stage}S{microbatch}` and
/// `{virtual stage}T{microbatch}` (zbpp's own; PyTorch pipelining has none).
/// A bucket is a suffix `@{bucket}` on W and REDUCE_GRAD (zbpp's own
/// extension: PyTorch pipelining has no partial W).
/// Examples: `2F0`, `1I3`, `1W3`, `0B1`, `3S0`, `3T5`, `3REDUCE_GRAD`,
/// `1W3@0`, `1REDUCE_GRAD@2`.
std::string ActionToString(const Action& action);

/// Parses the text form. Returns InvalidArgument quoting the text and saying
/// what is wrong, e.g.
/// `bad action "3X1": pass must be one of F, I, W, B, S, T, REDUCE_GRAD`.
absl::StatusOr<Action> ParseAction(std::string_view text);

/// Reads `digits` as a plain non-negative decimal int (digits only, no sign
/// or space, fitting in an int) into `*out`; false otherwise. The numbers of
/// ParseAction and of the PyTorch CSV reader (schedule_io.h). Pure.
bool ParseDecimalInt(std::string_view digits, int* out);

/// How virtual stages map to stages.
enum class Placement {
  /// Virtual stage s on stage s mod p (1F1B, interleaved 1F1B, ZB-H1/H2).
  kLoop,
  /// Two chunks in a "V" (ZB-V paper §6): stage d holds virtual stages d
  /// and 2p-1-d, so the forward and the backward both start and end on
  /// stage 0.
  kV,
};

/// `stage_of` for `placement` with p stages and v chunks. kV requires
/// v == 2 (checked by callers; returns an empty vector otherwise).
std::vector<int> PlaceVirtualStages(Placement placement, int stages, int chunks);

/// A pipeline schedule: per stage, the ordered list of actions it runs in
/// one optimizer step. Communication is not part of the IR: it follows from
/// the dependencies between actions on different stages.
///
/// Plain value type; thread-compatible.
struct Schedule {
  std::string name;      ///< Generator name, e.g. "zb-h1".
  int stages = 0;       ///< p.
  int chunks = 1;        ///< v.
  int microbatches = 0;  ///< m.
  /// Size p*v: the stage that holds each virtual stage, as ints (the
  /// proto's `stage_of`, PlaceVirtualStages); read it through StageOf.
  std::vector<int> stage_of;
  /// Size p: each stage's actions in execution order.
  std::vector<std::vector<Action>> actions;

  int num_virtual_stages() const { return stages * chunks; }

  /// The stage that holds virtual stage `v` (`stage_of[v]`), v in
  /// [0, num_virtual_stages()). The one conversion from a virtual stage to a
  /// stage (PyTorch pipelining's `stage_index_to_group_rank`).
  Stage StageOf(VirtualStage v) const { return Stage(stage_of[static_cast<size_t>(v.value())]); }
  /// Stage `s`'s actions in execution order (`actions[s]`).
  const std::vector<Action>& ActionsOf(Stage s) const {
    return actions[static_cast<size_t>(s.value())];
  }
  std::vector<Action>& ActionsOf(Stage s) { return actions[static_cast<size_t>(s.value())]; }
  /// The stages, Stage(0) to Stage(stages - 1).
  IndicesOf<Stage> AllStages() const { return IndicesOf<Stage>(stages); }
  /// The virtual stages, VirtualStage(0) to VirtualStage(p·v - 1).
  IndicesOf<VirtualStage> AllVirtualStages() const {
    return IndicesOf<VirtualStage>(num_virtual_stages());
  }

  friend bool operator==(const Schedule& a, const Schedule& b) {
    return a.name == b.name && a.stages == b.stages && a.chunks == b.chunks &&
           a.microbatches == b.microbatches && a.stage_of == b.stage_of &&
           a.actions == b.actions;
  }
  friend bool operator!=(const Schedule& a, const Schedule& b) { return !(a == b); }
};

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_SCHEDULE_H_
