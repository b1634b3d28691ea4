#ifndef ZBPP_SCHEDULER_PROBLEM_H_
#define ZBPP_SCHEDULER_PROBLEM_H_

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "common/indices.h"

namespace zbpp::sched {

/// Cost of one virtual stage (one model chunk) for one microbatch.
///
/// Times are wall-clock seconds of one pass on the stage that holds the
/// virtual stage; memories are activation bytes (Zero Bubble paper §2, "memory"):
/// an F pass allocates `m_b_bytes` that stay alive until the virtual stage's B pass,
/// which frees all but `m_w_bytes`, freed by the W pass. While a pass runs it
/// also holds `transient_bytes` of working memory that it frees before it ends
/// (see the field).
struct VirtualStageCost {
  double f_seconds = 1.0;  ///< T_F: forward pass.
  double b_seconds = 1.0;  ///< T_B: gradient w.r.t. the virtual stage input.
  double w_seconds = 1.0;  ///< T_W: gradient w.r.t. the virtual stage weights.
  double m_b_bytes = 1.0;  ///< M_B: held from the end of F until B.
  double m_w_bytes = 0.5;  ///< M_W: part of M_B still held from B until W.
  /// Data parallelism: the all-reduce of this virtual stage's weight gradients over
  /// its d replicas (a kReduce action), in seconds; 0 when d = 1.
  double reduce_seconds = 0.0;
  /// T_BW: one fused backward computing both gradients (an explicit BW pass,
  /// or a B immediately followed by its W on one stage, which the runtime
  /// runs as one merged pass: MergesWithNext in scheduler/schedule.h), in
  /// seconds. 0 means not measured: T_B + T_W (FusedBackwardSeconds).
  /// (After the fields above, so that their positional initializers stay valid.)
  double bw_seconds = 0.0;
  /// Working memory of a pass above what it holds before and after it, bytes
  /// (the largest over F, B and W, and over B and W run as one BW): buffers a
  /// pass allocates and frees before it ends, e.g. the logits of the LM head
  /// and their gradient, [b, s, vocab] each, which neither M_B nor M_W count.
  /// A stage's memory while a pass of this virtual stage runs is the larger of
  /// its held bytes before and after the pass, plus this (Simulate's peak).
  /// >= 0; 0 (the default) is the Zero Bubble paper's model (§2), where a pass
  /// needs no more than it holds at its ends. (Last, as bw_seconds.)
  double transient_bytes = 0.0;
};

/// Cost of one stage's vocabulary passes (PassKind::kS, kT) for one
/// microbatch: its shard of the LM head and the loss (Yeung et al., MLSys
/// 2025). The virtual stage cost of the last virtual stage then counts its
/// blocks and the final norm only.
struct VocabularyCost {
  double s_seconds = 0.0;  ///< T_S: the shard's logits and softmax statistics; > 0.
  double t_seconds = 0.0;  ///< T_T: the loss and the shard's gradients; > 0.
  /// Held from the end of S until the end of T (the hidden state and the
  /// shard's logits), bytes; >= 0.
  double m_bytes = 0.0;
  /// Working memory of S or T above what is held at their ends, bytes (as
  /// VirtualStageCost::transient_bytes); >= 0.
  double transient_bytes = 0.0;
};

/// T_BW of `cost`: VirtualStageCost::bw_seconds when set (> 0), else
/// T_B + T_W. Pure.
inline double FusedBackwardSeconds(const VirtualStageCost& cost) {
  return cost.bw_seconds > 0 ? cost.bw_seconds : cost.b_seconds + cost.w_seconds;
}

/// A pipeline scheduling problem: the input of every generator and of the
/// simulator.
///
/// The model is cut into `stages * chunks` virtual stages, indexed in model
/// order (virtual stage 0 holds the embedding, the last one the loss). Which
/// stage holds which virtual stage is decided by the schedule (see
/// `Schedule::stage_of`), not by the problem. Costs are per virtual
/// stage and never assumed uniform.
///
/// Plain value type; thread-compatible.
struct Problem {
  int stages = 1;        ///< p: stages (one per device).
  int chunks = 1;        ///< v: virtual stages per stage.
  int microbatches = 1;  ///< m: microbatches per optimizer step.
  /// Per virtual stage, size `stages * chunks`, in model order.
  std::vector<VirtualStageCost> virtual_stages;
  /// Latency of one point-to-point hop between two different stages, in
  /// seconds (T_comm). A hand-off between two chunks on one stage is free.
  double comm_seconds = 0.0;
  /// Activation memory limit of each stage, in bytes. Empty means no
  /// limit; otherwise size `stages`.
  std::vector<double> memory_limit_bytes;
  /// Vocabulary parallelism: per stage (size `stages`), the cost of its
  /// vocabulary passes (PassKind::kS, kT). Empty: the LM head is part of the
  /// last virtual stage, and a schedule holding S or T passes is refused.
  std::vector<VocabularyCost> vocabulary;

  /// Number of virtual stages, `stages * chunks`.
  int num_virtual_stages() const { return stages * chunks; }

  /// Limit of stage `s` in bytes; +infinity when there is none.
  double limit_of(Stage s) const {
    return memory_limit_bytes.empty() ? std::numeric_limits<double>::infinity()
                                      : memory_limit_bytes[static_cast<size_t>(s.value())];
  }
  /// limit_of(Stage(stage)), for the loops that still count stages as ints
  /// (the solvers', the coordinator's resolver).
  double limit_of(int stage) const { return limit_of(Stage(stage)); }

  /// The cost of virtual stage `v` (`virtual_stages[v]`).
  const VirtualStageCost& CostOf(VirtualStage v) const {
    return virtual_stages[static_cast<size_t>(v.value())];
  }

  /// Checks sizes and signs (`vocabulary`: empty or one entry per stage,
  /// s_seconds and t_seconds finite and > 0, the bytes finite and >= 0).
  /// Returns InvalidArgument naming the field and the reason, e.g.
  /// "virtual_stages[3].f_seconds must be a finite number >= 0, got -1" or
  /// "vocabulary[2].t_seconds must be > 0, got 0".
  absl::Status Validate() const;

  /// A problem whose virtual stages all cost `cost`, with every stage
  /// limited to `limit_bytes` (+infinity for none).
  static Problem Uniform(int stages, int chunks, int microbatches,
                         const VirtualStageCost& cost, double comm_seconds,
                         double limit_bytes =
                             std::numeric_limits<double>::infinity());
};

/// True when a memory `peak` is over `limit` (both bytes, or both M_B) by
/// more than a relative 1e-9: peaks are sums of activation sizes in floating
/// point, so a schedule that fills its limit exactly can read a rounding
/// error above it. An infinite limit holds every peak. Pure.
inline bool OverMemoryLimit(double peak, double limit) {
  return peak > limit * (1 + 1e-9);
}

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_PROBLEM_H_
