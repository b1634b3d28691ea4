#ifndef ZBPP_WORKER_RUNTIME_EXECUTOR_H_
#define ZBPP_WORKER_RUNTIME_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/comm_order.h"
#include "scheduler/schedule.h"
#include "worker/comm/communicator.h"
#include "worker/model/gpt.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/gradient_reducer.h"
#include "worker/runtime/step_timeline.h"
#include "worker/runtime/synthetic_compute.h"

namespace zbpp::worker {

/// The tokens of one microbatch: inputs (needed by virtual stage 0) and
/// next-token targets (needed by the last virtual stage); int64 [b, s].
struct MicrobatchData {
  at::Tensor inputs;
  at::Tensor targets;
};

/// Data of (step, microbatch); must return the same tokens on every worker
/// for the same arguments (see worker/data/sampler.h).
using BatchFn = std::function<MicrobatchData(int64_t step, int microbatch)>;

class VocabularyShard;

/// A model chunk this worker holds and the W work its B passes leave. Under
/// synthetic compute both may be null (no pass touches them), except for a
/// chunk whose gradients a REDUCE_GRAD action reduces.
struct LocalChunk {
  GptChunk* model = nullptr;         ///< Not owned.
  WeightGradStore* store = nullptr;  ///< Not owned.
};

/// What the executor needs about its worker.
struct ExecutorOptions {
  /// This worker's stage (the index of its list in Schedule::actions). The
  /// pipeline group holds one worker per stage in stage order, so its rank
  /// in `communicator`'s group, and each peer's, is the stage's number
  /// (docs/architecture.md, Vocabulary).
  int stage = 0;
  /// Transport to the other stages; not owned; size() == schedule.stages.
  Communicator* communicator = nullptr;
  /// Data parallelism (d > 1): runs the schedule's REDUCE_GRAD actions over
  /// the replicas of this stage; not owned. Null when d = 1, and
  /// then the schedule must hold no reduction (and with one, one per
  /// virtual stage: Validate checks both).
  GradientReducer* reducer = nullptr;
  /// The chunks this stage holds, by virtual stage.
  std::map<int, LocalChunk> chunks;
  /// Vocabulary parallelism: this stage's shard of the LM head, which its S
  /// and T passes run (worker/model/vocabulary_shard.h); not owned. Required
  /// by a schedule holding S and T (sched::HoldsVocabularyPasses), except
  /// under synthetic compute; null otherwise.
  VocabularyShard* vocabulary = nullptr;
  /// Where the passes run: parameters, activations, gradients and received
  /// tensors live there; batches are copied there. Pass times are device
  /// times (PassTimer: CUDA events on a GPU, resolved once at the step's
  /// end, so no pass waits for the one before it to be timed).
  c10::Device device = c10::Device(c10::kCPU);
  /// Shape of the tensors between virtual stages: [b, s, h], float32.
  int64_t microbatch_size = 1;
  int64_t seq_len = 1;
  int64_t hidden = 1;
  BatchFn batches;
  /// Longest wait for one message; a peer that stays silent longer fails
  /// the step with DeadlineExceeded.
  absl::Duration recv_timeout = absl::Seconds(60);
  /// Fault injection (demo, end-to-end tests): every pass is stretched to
  /// this multiple of its compute time by sleeping after it, as a slower
  /// device would; >= 1, 1 for none.
  double pass_slowdown = 1;
  /// Mixed precision's loss scale (LossScaler): the B pass of the last
  /// virtual stage differentiates loss·loss_scale, so every gradient of the
  /// step comes out multiplied by it; > 0, 1 for none.
  double loss_scale = 1;
  /// Benchmarking, not training (worker/runtime/synthetic_compute.h): when
  /// set, every F, B, W and BW pass waits its cost-model duration (from the
  /// pass's start, once its input arrived, so the executor's own overhead
  /// inside the pass is not added) instead of computing, sends zeros of the
  /// real shape, leaves the gradients untouched and reports the constant
  /// loss. Validate checks one cost per virtual stage.
  std::optional<SyntheticCompute> synthetic;
  /// Runs each merged pair (sched::MergesWithNext) as one backward pass
  /// (PipelineExecutor). False runs its B and W as two passes (each waiting
  /// its own synthetic time, T_B + T_W), with the same arithmetic and
  /// messages: the comparison of tests and benchmarks.
  bool merge_backward_passes = true;
};

/// Called once per step, just before this stage's first B (or BW) pass, when
/// only forward passes have run: the point where post-update validation
/// (paper §4) must know whether the previous optimizer step stands. Returns
/// true when the forwards run so far used parameters that were rolled back
/// (they are discarded and the step must be replayed), false to go on; an
/// error fails the step.
using BeforeFirstBackward = std::function<absl::StatusOr<bool>()>;

/// Runs one stage's share of one optimizer step of a pipeline schedule: F, B,
/// W and fused BW passes in the schedule's order (Zero Bubble paper §2–3),
/// moving activations forward and input gradients backward.
///
/// Merged pairs: a B whose whole W comes right after it in this stage's list
/// (sched::MergesWithNext) runs with it as one backward pass — the B part,
/// the send of its input gradient, then at once the W part's queued
/// weight-gradient GEMMs — what T_BW (VirtualStageCost::bw_seconds)
/// measures and the simulator charges. The timeline keeps the two parts'
/// intervals (the simulator's timings of the pair), which the trace, the SVG
/// and the coordinator read as one BW unit (sched::TimelineUnit). The
/// arithmetic is that of B then W, so the parameters are bit-identical to an
/// unmerged run's, and the messages are the same, in the same order and as
/// early. Under `pass_slowdown` each part is stretched (the send leaves as
/// a slower device's would); under synthetic compute the pass waits T_BW in
/// all.
///
/// Messages go in one order per pair of stages, derived from the schedule
/// alone (sched::DerivePairOrders), on every transport: transports that
/// match messages by order rather than tag (NCCL) need it, and one mechanism
/// serves all (docs/transport.md). Each pair's next messages are issued as
/// soon as they can be: a send once its producing pass ran, a receive at
/// once. Sends are never waited for until the step's end, so an action
/// blocks only on its own inputs, and every schedule that passes
/// sched::CheckPairOrders runs without deadlock.
/// Chunks on the same stage hand tensors over without the network (V
/// schedules). Gradients are accumulated into the parameters' `.grad`
/// (the caller zeroes them); the loss of each microbatch is scaled by 1/m
/// (and, in B, by ExecutorOptions::loss_scale). With data parallelism each
/// REDUCE_GRAD action hands its virtual stage's gradients to the
/// GradientReducer, and the step ends when every reduction completed: the
/// gradients are then the average over the d replicas (the global batch's
/// mean loss, as each replica's loss is already scaled by 1/m).
///
/// Vocabulary parallelism (a schedule holding S and T passes,
/// scheduler/schedule.h; docs/training.md, "Vocabulary parallelism"): the
/// last virtual stage's F sends its output (the final norm's) to every
/// stage; each stage's S runs its VocabularyShard on it and sends the
/// softmax statistics to every stage; each T combines them, records the
/// loss (on the stage holding the last virtual stage), adds its shard's
/// weight gradient and sends its part of the output gradient to the last
/// virtual stage's B, which sums the parts in stage order. These are
/// messages like the others, in the same pair orders.
///
/// Thread-compatible: one thread per stage.
class PipelineExecutor {
 public:
  explicit PipelineExecutor(ExecutorOptions options) : options_(std::move(options)) {}

  /// Checks that `schedule` can run on this stage before any pass does:
  /// well-formed (CheckSchedule), deadlock-free (a simulation, and its
  /// pair orders under sched::CheckPairOrders), as many
  /// workers as the communicator has ranks, and this stage's virtual stages
  /// equal to the chunks it holds. FailedPrecondition / InvalidArgument with
  /// the reason, e.g. the deadlock's stuck actions.
  absl::Status Validate(const sched::Schedule& schedule) const;

  /// Runs this stage's actions of `schedule` for `step`. Messages carry
  /// `generation` in their tags (MakeTag): a step replayed after a discarded
  /// speculative run uses the next generation. `check`, when set, runs
  /// before the first B (see BeforeFirstBackward; the schedule must pass
  /// sched::CheckSpeculativePrefixes: before the check only the speculative
  /// prefixes' messages are issued, and a discard completes exactly those).
  /// Errors: those of the communicator
  /// (DeadlineExceeded when a peer is silent), FailedPrecondition for an
  /// inconsistent schedule, the check's. After an error the step's partial
  /// state is dropped and the gradients are unspecified.
  absl::StatusOr<StepTimeline> RunStep(int64_t step, const sched::Schedule& schedule,
                                       int generation = 0,
                                       const BeforeFirstBackward& check = nullptr);

  /// Evaluation: forward passes only (no graph, no gradients) of
  /// `microbatches` microbatches drawn from `batches`, each stage running its
  /// chunks in model order for microbatch 0, 1, ... (acyclic for every
  /// placement). Message tags use `tag_step`: call it between steps, when no
  /// step's messages are in flight. The timeline's loss fields hold the
  /// summed losses on the last stage.
  absl::StatusOr<StepTimeline> RunForwardOnly(int64_t tag_step, const sched::Schedule& schedule,
                                              int microbatches, const BatchFn& batches);

  /// Whether post-update validation may run `schedule`'s speculative
  /// prefixes before the previous step is settled
  /// (sched::CheckSpeculativePrefixes over its pair orders). Derived once
  /// per schedule, like the orders RunStep issues messages in.
  bool SpeculationAllowed(const sched::Schedule& schedule);

  /// ExecutorOptions::pass_slowdown for the following steps; >= 1.
  void set_pass_slowdown(double factor) { options_.pass_slowdown = factor; }
  /// ExecutorOptions::loss_scale for the B passes from now on, including
  /// those of a step whose BeforeFirstBackward check calls this.
  void set_loss_scale(double scale) { options_.loss_scale = scale; }

 private:
  // What the executor derives from a schedule, once for the many steps it
  // runs of it: each pair's message order, the speculative prefixes
  // (sched::SpeculativePrefixLengths) and whether they may run ahead.
  struct SchedulePlan {
    sched::Schedule schedule;
    sched::PairOrders orders;
    std::vector<int> prefix;
    bool speculation_allowed = false;
  };
  // The plan of `schedule`, derived anew when it differs from the last one.
  // The simulator's error for a malformed or deadlocked schedule.
  absl::StatusOr<const SchedulePlan*> PlanFor(const sched::Schedule& schedule);

  ExecutorOptions options_;
  std::unique_ptr<SchedulePlan> plan_;  // Null until the first PlanFor.
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_EXECUTOR_H_
