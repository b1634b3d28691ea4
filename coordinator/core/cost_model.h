#ifndef ZBPP_COORDINATOR_CORE_COST_MODEL_H_
#define ZBPP_COORDINATOR_CORE_COST_MODEL_H_

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

/// Measured pass times of one virtual stage in one step, each averaged over
/// that step's microbatches (see `AverageStepPasses`).
struct VirtualStageTiming {
  int virtual_stage = 0;  ///< In model order.
  double f_seconds = 0;  ///< Mean F pass, seconds.
  double b_seconds = 0;  ///< Mean B (input-gradient) pass, seconds.
  double w_seconds = 0;  ///< Mean W (weight-gradient) pass, seconds.
  /// Data parallelism: the stage's REDUCE_GRAD (all-reduce of its weight
  /// gradients over its replicas), seconds; unset when none was measured.
  std::optional<double> reduce_seconds = std::nullopt;
  /// Mean fused backward (an explicit BW or a merged pair, one pass doing
  /// B's and W's work: sched::MergesWithNext), seconds; 0 when none was
  /// measured (the cost model then keeps T_BW = T_B + T_W).
  double bw_seconds = 0;
};

/// Measured latency of one hop in one step: hop h carries activations from
/// virtual stage h to h+1 (and gradients back), h in [0, stages - 1). Only
/// hops that cross workers are reported: a hand-off between two chunks on
/// one worker is free and has no latency to measure.
struct HopTiming {
  int hop = 0;
  double seconds = 0;  ///< Mean one-way transfer, seconds.
};

/// One pass as a worker measured it (from ReportStep's per-action start and
/// end).
struct MeasuredPass {
  sched::PassKind kind = sched::PassKind::kF;
  int virtual_stage = 0;
  /// end - start; for a partial W or reduction (one of its stage's K
  /// gradient buckets, scheduler/schedule.h) K times that: the whole pass.
  double seconds = 0;
};

/// Averages one step's passes into one VirtualStageTiming per virtual stage that
/// has an F, a B and a W (or a BW) measured, sorted by stage. BW passes (a
/// merged pair counts as one, timed as a whole) give bw_seconds; where a
/// stage has no B and W apart, a BW (1F1B, GPipe) is also split between B
/// and W in the proportion
/// `base.virtual_stages[s].b_seconds : w_seconds` (the only information there is
/// about the split). A kReduce sets the stage's reduce_seconds (the mean
/// when there are several). InvalidArgument for a stage outside `base`, a
/// negative or non-finite time.
absl::StatusOr<std::vector<VirtualStageTiming>> AverageStepPasses(
    absl::Span<const MeasuredPass> passes, const sched::Problem& base);

/// The executor's own time per pass of `stage` in one step: the overhead
/// of its step breakdown (job.proto StepBreakdown.overhead_seconds, seconds:
/// the span less its passes and waits) divided by the passes `schedule`
/// gives the stage, each counted in units of the F/B/W it stands for (a
/// fused BW two, one of K gradient buckets' W 1/K, a reduction none), so
/// that the overhead added to every F, B and W of a virtual stage
/// (CostModel::ToProblem) sums over the stage's actions to the measured
/// `overhead_seconds`. 0 for a stage with no pass or a stage outside the
/// schedule. Pure; thread-safe.
double PassOverheadSeconds(const sched::Schedule& schedule, int stage, double overhead_seconds);

/// Counts the per-pass overhead inside `sim`'s passes as idle time, as a
/// worker's measured bubble does (its busy time is its passes alone): for
/// every stage, busy_seconds less the overhead of its passes,
/// idle_seconds = makespan - busy, and bubble_rate recomputed as the
/// simulator defines it. `sim` is Simulate's result for `schedule` under a
/// problem whose F/B/W include `overhead_per_virtual_stage` (seconds per
/// pass, by virtual stage; CostModel::PassOverheads); the timings,
/// makespan and step are left as they are. An empty span changes nothing.
/// Pure; thread-compatible.
void CountOverheadAsIdle(const sched::Schedule& schedule,
                         absl::Span<const double> overhead_per_virtual_stage,
                         sched::SimulationResult& sim);

/// Measured cost model of one job: for every virtual stage the last
/// `window_steps` samples of F/B/W seconds and of its data-parallel
/// reduction's seconds, and for every hop the last `window_steps`
/// latencies, summarised by their medians so that one slow step (a GC
/// pause, a page fault) does not move the schedule (the re-solve policy of
/// coordinator/core/resolve_policy.h).
///
/// Thread-safe.
class CostModel {
 public:
  struct Options {
    /// Virtual stages of the job, workers * chunks. Must be >= 1.
    int num_virtual_stages = 1;
    /// Samples kept per stage and per hop (a sliding window over the most
    /// recent steps). Must be >= 1.
    int window_steps = 8;
  };

  /// InvalidArgument for num_virtual_stages < 1 or window_steps < 1.
  static absl::StatusOr<std::unique_ptr<CostModel>> Create(Options options);

  /// Adds one step's sample of one stage, dropping the stage's oldest
  /// sample beyond the window; a set `reduce_seconds` goes to the stage's
  /// reduction window likewise. InvalidArgument for a stage outside
  /// [0, num_virtual_stages) or a time that is negative or not finite (nothing is
  /// added then).
  absl::Status AddVirtualStageTiming(const VirtualStageTiming& timing)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// Vocabulary parallelism: one step's (or the profile's) mean S and T of
  /// stage `stage` (`timing.s_seconds`, `t_seconds`; its bytes are ignored),
  /// into the stage's window as AddVirtualStageTiming. InvalidArgument for a
  /// negative stage or a time that is negative or not finite.
  absl::Status AddVocabularyTiming(int stage, const sched::VocabularyCost& timing)
      ABSL_LOCKS_EXCLUDED(mu_);
  /// The bytes of stage `stage`'s vocabulary passes as profiled
  /// (VocabularyCost::m_bytes, transient_bytes), replacing an earlier value.
  /// InvalidArgument for a negative stage or a value negative or not finite.
  absl::Status SetVocabularyMemory(int stage, double m_bytes, double transient_bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  /// As AddVirtualStageTiming for one hop, h in [0, num_virtual_stages - 1).
  absl::Status AddHopTiming(const HopTiming& timing) ABSL_LOCKS_EXCLUDED(mu_);

  /// Adds one step's per-pass executor overhead of `virtual_stage`
  /// (seconds per pass, PassOverheadSeconds of the stage that holds it) to
  /// its window, as AddVirtualStageTiming does for its passes.
  /// InvalidArgument for a stage outside [0, num_virtual_stages) or a time
  /// that is negative or not finite (nothing is added then).
  absl::Status AddPassOverhead(int virtual_stage, double seconds) ABSL_LOCKS_EXCLUDED(mu_);

  /// Per virtual stage, the median of its overhead window, seconds per pass;
  /// 0 for a stage with no sample. Size num_virtual_stages.
  std::vector<double> PassOverheads() const ABSL_LOCKS_EXCLUDED(mu_);

  /// The activation memory of one microbatch of `virtual_stage` as its
  /// workers profiled it (worker.proto VirtualStageProfile: the Zero Bubble
  /// paper's M_B and M_W, §2, and the passes' working memory,
  /// sched::VirtualStageCost::transient_bytes), bytes; replaces the stage's
  /// earlier value (memory does not drift like time: the latest profile
  /// stands). InvalidArgument for a stage outside [0, num_virtual_stages), a
  /// value negative or not finite, or m_w_bytes > m_b_bytes (nothing set then).
  absl::Status SetMeasuredMemory(int virtual_stage, double m_b_bytes, double m_w_bytes,
                                 double transient_bytes) ABSL_LOCKS_EXCLUDED(mu_);

  /// Samples currently in `stage`'s window (0 for a stage out of range).
  int SampleCount(int stage) const ABSL_LOCKS_EXCLUDED(mu_);

  /// How far the costs moved within the window, as a fraction: for every
  /// stage, the median of F+B+W over the newest half of its samples against
  /// the median over the oldest half, as max/min - 1; the largest over the
  /// stages. 0 while a stage has fewer than 2 samples. A straggler that
  /// appeared (or recovered) inside the window shows here as long as both
  /// halves do not yet agree: the medians then describe neither regime.
  double Drift() const ABSL_LOCKS_EXCLUDED(mu_);

  /// `base` with every stage's f/b/w_seconds replaced by the medians of its
  /// window (the mean of the two middle samples for an even count), each
  /// plus the median per-pass overhead of the stage when one was measured
  /// (AddPassOverhead: what the runtime pays per pass is part of the pass's
  /// cost to the solver and the simulator), its
  /// reduce_seconds by the median of its reduction window when that holds
  /// a sample (else base's estimate stays), and
  /// comm_seconds by the mean of the per-hop medians when any hop has been
  /// measured (the simulator has one T_comm; the mean keeps the sum over
  /// the pipeline's hops, which is what the critical path pays); a stage's
  /// m_b_bytes, m_w_bytes and transient_bytes by its measured memory once one was set
  /// (SetMeasuredMemory), else base's; with vocabulary costs
  /// (Problem::vocabulary) each stage's T_S and T_T by the medians of its
  /// vocabulary window and its bytes by SetVocabularyMemory's, where set,
  /// else base's. Limits are kept (a limit relative to
  /// M_B is re-expressed by the caller, JobModel). InvalidArgument when `base` does not have
  /// num_virtual_stages stages; FailedPrecondition naming the first stage without a
  /// sample.
  absl::StatusOr<sched::Problem> ToProblem(const sched::Problem& base) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit CostModel(Options options);

  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<std::deque<VirtualStageTiming>> virtual_stage_samples_ ABSL_GUARDED_BY(mu_);
  // By stage: S and T samples (times only) and the profiled bytes.
  std::map<int, std::deque<sched::VocabularyCost>> vocabulary_samples_ ABSL_GUARDED_BY(mu_);
  std::map<int, sched::VocabularyCost> vocabulary_memory_ ABSL_GUARDED_BY(mu_);
  std::vector<std::deque<double>> reduce_samples_ ABSL_GUARDED_BY(mu_);
  std::vector<std::deque<double>> hop_samples_ ABSL_GUARDED_BY(mu_);
  std::vector<std::deque<double>> overhead_samples_ ABSL_GUARDED_BY(mu_);
  /// By virtual stage: the latest profiled memory, bytes (the cost's
  /// m_b_bytes, m_w_bytes and transient_bytes; the rest unused).
  std::vector<std::optional<sched::VirtualStageCost>> memory_ ABSL_GUARDED_BY(mu_);
};

/// Median of `values` (mean of the two middle ones for an even count); 0
/// for none. Exposed for tests and metrics.
double Median(std::vector<double> values);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_COST_MODEL_H_
