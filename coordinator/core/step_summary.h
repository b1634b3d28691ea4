#ifndef ZBPP_COORDINATOR_CORE_STEP_SUMMARY_H_
#define ZBPP_COORDINATOR_CORE_STEP_SUMMARY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/core/cost_model.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// One worker's report of one step (ReportStepRequest after its checks),
/// as the coordinator keeps it until every (stage, replica) has reported.
struct StageReport {
  std::string worker_id;
  /// The step's passes averaged per virtual stage (AverageStepPasses); the
  /// cost model gets them once the step is complete, combined over the
  /// replicas.
  std::vector<VirtualStageTiming> timings;
  double step_seconds = 0;
  double idle_seconds = 0;
  double comm_seconds = 0;
  /// Passes only (a reduction overlaps them on the communication timeline).
  double busy_seconds = 0;
  /// From the stage's first action start to its last action end (reductions
  /// included), seconds.
  double span_seconds = 0;
  double f_seconds = 0;
  double b_seconds = 0;
  double w_seconds = 0;
  /// Mean REDUCE_GRAD duration; 0 without reductions.
  double reduce_seconds = 0;
  /// Vocabulary parallelism: the stage's mean S and T passes, seconds
  /// (s_seconds, t_seconds; the bytes unset); unset without S and T.
  std::optional<sched::VocabularyCost> vocabulary;
  /// max(0, last reduction end - last pass end); 0 without reductions.
  double exposed_reduce_seconds = 0;
  std::optional<double> loss;
  std::optional<double> eval_loss;
  bool checkpoint_written = false;
  std::optional<double> parameter_sum;
  /// Its actions' times and its breakdown (ReportStepRequest.breakdown).
  zbpp::v1::StageTimeline timeline;
  /// Peak activation memory of the step (ReportStepRequest
  /// .peak_activation_bytes), bytes; 0 when the worker did not measure it.
  double peak_activation_bytes = 0;
};

/// Everything a complete step's summary is computed from.
struct StepReports {
  int64_t step = 0;
  int64_t version = 0;   ///< The schedule version the step ran.
  int stages = 1;        ///< p, stages.
  int replicas = 1;      ///< d, pipeline.data_parallel.
  /// Tokens one replica trains on per step: microbatches * microbatch_size
  /// * seq_len.
  double tokens_per_replica = 0;
  /// By worker index replica * stages + stage; every index in
  /// [0, stages * replicas) present.
  std::map<int, StageReport> reports;
  /// The version's bubble rate, overall and per stage (size
  /// `stages`), as predicted under the costs known when the step completed.
  double predicted_bubble_rate = 0;
  std::vector<double> predicted_stage_bubble_rate;
  /// The same simulation's step time, seconds (StepSummary.predicted_step_seconds).
  double predicted_step_seconds = 0;
  /// The same simulation's peak activation memory per stage
  /// (SchedulePrediction.peak_memory_bytes, size `stages`), bytes.
  std::vector<double> predicted_peak_activation_bytes;
};

/// A complete step, summarised.
struct StepOutcome {
  zbpp::v1::StepSummary summary;
  /// Σ of replica 0's parameter sums over its stages, when every worker sent
  /// one (Job.param_checksum).
  std::optional<double> param_checksum;
  /// Replica 0's stages that wrote their checkpoint shard in the
  /// step, ascending (only replica 0 writes: the others hold copies).
  std::vector<int32_t> checkpointed_stages;
};

/// The step summary (job.proto StepSummary) of `step`, a pure function of
/// the workers' reports:
/// * step_seconds: the slowest worker's; tokens_per_second:
///   replicas * tokens_per_replica / step_seconds;
/// * measured_bubble_rate: 1 - Σ busy / (p * d * cost), where the cost is
///   the largest per-stage span (the paper's §5.3 makespan, as the simulator
///   defines it), clamped to [0, 1]; per stage, 1 - mean busy over
///   its replicas / cost;
/// * loss / eval_loss: the mean over the replicas' last stages (each reports
///   its microbatches' mean; they train on equally many tokens); loss is NaN
///   when no finite mean was reported;
/// * per stage: idle, comm, F/B/W, reduce and exposed reduce seconds and
///   the breakdown (every field of StepBreakdown) as the mean over the
///   stage's replicas, worker_id of replica 0's worker;
/// * per stage: peak_activation_bytes, the largest over its replicas (the
///   memory a stage must fit is its fullest replica's), and
///   predicted_peak_activation_bytes from `predicted_peak_activation_bytes`
///   (0 where it has no entry).
/// complete_time is left for the caller (it is the clock's, not the
/// reports'). Thread-safe (pure).
StepOutcome SummarizeStep(const StepReports& step);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_STEP_SUMMARY_H_
