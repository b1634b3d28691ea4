#ifndef ZBPP_WORKER_RUNTIME_STAGE_PROFILE_H_
#define ZBPP_WORKER_RUNTIME_STAGE_PROFILE_H_

#include <cstdint>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "worker/model/model_chunk.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/memory_meter.h"
#include "worker/runtime/synthetic_compute.h"

namespace zbpp::worker {

class VocabularyShard;

/// One virtual stage as the calibration profile measured it before an
/// attempt's first step (worker.proto VirtualStageProfile).
struct StageProfile {
  int virtual_stage = 0;
  /// Medians over the repetitions of T_F, T_B, T_W of one microbatch,
  /// seconds (device time: PassTimer).
  double f_seconds = 0;
  double b_seconds = 0;
  double w_seconds = 0;
  /// Median T_BW: B and W back to back as one pass, seconds (device time,
  /// from B's start to W's end), which is how the executor runs a merged
  /// pair (sched::MergesWithNext); VirtualStageCost::bw_seconds.
  double bw_seconds = 0;
  /// The memory model's M_B and M_W of one microbatch (Zero Bubble paper
  /// §2), bytes, medians over the repetitions: M_B the bytes F allocated and
  /// still held when it ended (the activations autograd saved for B, the
  /// output); M_W the bytes still held after B above those held before F
  /// (W's queued inputs and output gradients), with B's input gradient and
  /// F's output dropped, as the executor drops them once sent. 0 <= M_W <= M_B
  /// (M_W is capped at M_B, the memory model's bound).
  int64_t m_b_bytes = 0;
  int64_t m_w_bytes = 0;
  /// VirtualStageCost::transient_bytes, the median over the repetitions of
  /// the largest, over F, B, W and B+W as one BW, of a pass's peak bytes
  /// above the larger of the bytes held at its start and at its end (buffers
  /// it frees before it ends: on the LM head the logits' working copies and
  /// their gradient, [microbatch_size, seq_len, vocab] each); >= 0.
  int64_t transient_bytes = 0;
};

/// What ProfileVirtualStage needs about one virtual stage and its job.
struct StageProfileOptions {
  /// The chunk and its W store (not owned); both may be null under
  /// `synthetic`.
  const ModelChunk* chunk = nullptr;
  WeightGradStore* store = nullptr;
  int virtual_stage = 0;
  /// The microbatch's shape (PipelineSpec.microbatch_size, ModelSpec.seq_len
  /// and hidden) and the vocabulary of the random tokens.
  int64_t microbatch_size = 1;
  int64_t seq_len = 1;
  int64_t hidden = 1;
  int64_t vocab = 256;
  /// PipelineSpec.microbatches: the last virtual stage's loss is divided by
  /// it, as in a step.
  int microbatches = 1;
  /// The loss scale of B on the last virtual stage (LossScaler).
  double loss_scale = 1;
  /// Timed repetitions after one warm-up; >= 1.
  int repetitions = 3;
  /// Seeds the random inputs, drawn from a generator of their own (the
  /// global one is left alone).
  uint64_t seed = 0;
  /// Where the passes run and their memory is metered (not owned; its
  /// cpu_meter() is made current on the calling thread while it runs).
  c10::Device device = c10::Device(c10::kCPU);
  DeviceMemoryMeter* memory = nullptr;
  /// Synthetic compute (not owned): when set, each pass waits its duration
  /// (SyntheticPassSeconds, the cost model's times) instead of running, and
  /// M_B, M_W are the cost model's (SyntheticCompute::stages): the profile
  /// then echoes the cost model the workers were started from.
  const SyntheticCompute* synthetic = nullptr;
};

/// Profiles one virtual stage on one microbatch of the job's shapes: random
/// tokens into the first virtual stage, a random activation [b, s, h]
/// elsewhere, the loss against random targets at the last one and a random
/// input gradient [b, s, h] into B elsewhere. One warm-up F, B, W, then
/// `repetitions` timed ones (B and W back to back, also timed as one BW), through the executor's own passes (ForwardPass,
/// BackwardPass, WeightGradStore::RunW under a microbatch index no step
/// uses).
///
/// Side effects: B and W add this microbatch's gradients into the chunk's
/// parameters' .grad (StageTrainer::Profile saves and restores them); the
/// store is left empty; on a mixed-precision chunk the compute-type weight
/// copies are made (a cache, ComputeTypeCopies). Nothing else of the model
/// changes. InvalidArgument for repetitions < 1 or a missing chunk, store or
/// meter; the W store's error otherwise. Thread-compatible: the thread that
/// runs the chunk's steps.
absl::StatusOr<StageProfile> ProfileVirtualStage(const StageProfileOptions& options);

/// Vocabulary parallelism: profiles stage `stage`'s S and T passes
/// (VocabularyShard::Forward, Backward) on one microbatch of the job's
/// shapes (`options`' b, s, h; random hidden state and targets; T combining
/// this shard's statistics as every stage's), one warm-up then
/// `options.repetitions` timed: the medians of T_S and T_T, seconds; metered
/// as ProfileVirtualStage meters (options.memory), the bytes S leaves held
/// for T as m_bytes and the larger pass's peak above its two ends (the
/// logits' exponentials, their gradient) as transient_bytes. Under
/// `options.synthetic` each pass waits the stage's synthetic vocabulary
/// cost and the bytes are the cost model's. `shard` may be null only under
/// synthetic compute. Side effect: T adds to the shard's weight gradient
/// (StageTrainer::Profile saves and restores it). InvalidArgument for
/// repetitions < 1, a missing shard or meter, or a stage without a
/// synthetic cost.
/// Thread-compatible.
absl::StatusOr<sched::VocabularyCost> ProfileVocabularyShard(const VocabularyShard* shard,
                                                             int stage, int stages,
                                                             const StageProfileOptions& options);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_STAGE_PROFILE_H_
