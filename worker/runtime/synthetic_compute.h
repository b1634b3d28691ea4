#ifndef ZBPP_WORKER_RUNTIME_SYNTHETIC_COMPUTE_H_
#define ZBPP_WORKER_RUNTIME_SYNTHETIC_COMPUTE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::worker {

/// Synthetic compute: a benchmarking mode of the executor, not training.
/// Every F, B and W pass takes the duration a cost model gives
/// it by waiting instead of computing, while everything else is real: the
/// executor's order, messages of the real shape ([b, s, h] float32 zeros)
/// over the real transport in the pair orders, the BeforeFirstBackward check
/// and what the caller does around a step (validation, optimizer, reports).
/// With it, p = 8 to 64 stages run on a few cores because they mostly wait,
/// so the runtime's own overhead and ordering are measured at scale.
///
/// What a synthetic step computes: nothing. F sends zeros, B sends zeros and
/// leaves every `.grad` as the caller left it (in StageTrainer never defined,
/// so the validation protocol exchanges a zero gradient norm and AdamW's step
/// skips every parameter), W does nothing, and each microbatch's loss on the
/// last virtual stage is the constant `loss`: the loss curve is flat and the
/// parameters stay at their initial values.
struct SyntheticCompute {
  /// Per virtual stage, in model order: T_F, T_B, T_W of one microbatch, in
  /// seconds. A fused BW, and a merged pair (sched::MergesWithNext) in all,
  /// waits T_BW (sched::FusedBackwardSeconds); a partial W of one of k gradient
  /// buckets waits T_W / k. The memory fields (M_B, M_W, bytes) are only
  /// echoed by the calibration profile (stage_profile.h): no pass holds
  /// them.
  std::vector<sched::VirtualStageCost> stages;
  /// Vocabulary parallelism: per stage, T_S and T_T of its S and T passes
  /// (sched::VocabularyCost); empty without it.
  std::vector<sched::VocabularyCost> vocabulary;
  /// Multiplicative noise: a pass waits its duration times (1 + noise * u),
  /// u uniform in [-1, 1] drawn from (seed, step, pass, virtual stage,
  /// microbatch), so two runs with one seed wait the same; in [0, 1).
  double noise = 0;
  uint64_t seed = 0;
  /// The loss (nats) each microbatch reports on the last virtual stage.
  double loss = 0;
};

/// How a worker in synthetic mode (zbpp-worker --synthetic-compute
/// SCALE[:NOISE]) derives its pass times from the job's cost model.
struct SyntheticComputeSource {
  /// Multiplies every T_F, T_B, T_W of the cost model; > 0. The analytic
  /// model of a small CPU job gives sub-millisecond passes: a scale makes
  /// them long enough that p stages on a few cores mostly wait.
  double scale = 1;
  /// SyntheticCompute::noise and ::seed.
  double noise = 0;
  uint64_t seed = 0;
};

/// The synthetic compute of a job from `cost_model`: the cost model of the
/// schedule version in the worker's Assignment (for version 1, the
/// coordinator's analytic model from the JobSpec; the one the schedule was
/// planned with), its times multiplied by `source.scale`, its memories as
/// they are. The times stay
/// those for the whole attempt: re-solves, planned from measured costs,
/// then see the same workload. InvalidArgument from CheckSyntheticCompute
/// (`num_stages` virtual stages) or for a scale that is not > 0.
absl::StatusOr<SyntheticCompute> SyntheticFromCostModel(const v1::CostModel& cost_model,
                                                         int num_stages,
                                                         const SyntheticComputeSource& source);

/// The seconds action `a` of `step`, run on stage `stage`, waits under
/// `synthetic`: its virtual stage's cost for the pass (an S or T: `stage`'s
/// vocabulary cost), with noise; `buckets` is the number of gradient
/// buckets of a's virtual stage (sched::BucketsPerVirtualStage), used by a partial
/// W. 0 for a reduction (the reducer runs it for real). `a.virtual_stage` must be a
/// valid index of `synthetic.stages`, and `stage` of `synthetic.vocabulary`
/// for an S or T (CheckSyntheticCompute).
double SyntheticPassSeconds(const SyntheticCompute& synthetic, const sched::Action& a,
                            int64_t step, int buckets, int stage);

/// InvalidArgument unless `synthetic` has one cost per virtual stage
/// (`num_stages`), finite non-negative times, and noise in [0, 1).
absl::Status CheckSyntheticCompute(const SyntheticCompute& synthetic, int num_stages);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_SYNTHETIC_COMPUTE_H_
