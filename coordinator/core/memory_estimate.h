#ifndef ZBPP_COORDINATOR_CORE_MEMORY_ESTIMATE_H_
#define ZBPP_COORDINATOR_CORE_MEMORY_ESTIMATE_H_

#include <string>
#include <vector>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/job_spec.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator {

/// What one stage of a job is expected to hold in memory, bytes: the
/// coordinator's check, before it assigns a job, that every stage fits the
/// memory its worker reported (WorkerDescription.memory_bytes). An
/// estimate of the training state, not of the allocator's overhead.
struct StageMemoryEstimate {
  /// Parameters of the virtual stages the stage holds (data_parallel.h's
  /// StageParameterCount, embeddings and LM head included).
  double parameters = 0;
  /// Training state: 16 bytes per parameter (float32 master weight, float32
  /// gradient, AdamW's two float32 moments), plus 12 bytes per parameter for
  /// the copy that exact rollback keeps (adamw.h's Snapshot: 3 float32
  /// copies) unless validation is SYNCHRONOUS or the rollback is
  /// IN_PLACE_INVERSE.
  double state_bytes = 0;
  /// Activations: the schedule's predicted peak for the stage
  /// (SchedulePrediction.peak_memory_bytes, from the paper's §2 per-layer
  /// M_B / M_W, which count 16-bit activations), doubled for fp32 passes.
  double activation_bytes = 0;
  /// On the stage holding the last virtual stage: the LM head's logits and
  /// the loss's float32 copies for one microbatch (model_costs.h's
  /// LogitsBytes), which the paper's per-layer M_B does not count and which
  /// dominate for large vocabularies; 0 on the other stages.
  double logits_bytes = 0;
  /// Under vocabulary parallelism, on the stage holding virtual stage 0:
  /// the step's token embedding gathered over the stages' shards and its
  /// gradient, 2 · m · b · s · h float32 (EmbeddingExchange,
  /// worker/runtime/embedding_exchange.h), held from before the step's
  /// first F to its end; 0 otherwise. The other stages' exchange buffers
  /// live only between steps, when no activation is held.
  double embedding_bytes = 0;

  double total_bytes() const {
    return state_bytes + activation_bytes + logits_bytes + embedding_bytes;
  }
};

/// The estimate of every stage (size schedule.stages) of a job with
/// `spec` running `version`. Requires a spec that passed ValidateJobSpec and
/// a version built for it (stage_of and predicted.peak_memory_bytes
/// of size stages*chunks and stages); stages missing from the prediction get
/// no activation bytes. Thread-safe (pure).
std::vector<StageMemoryEstimate> EstimateStageMemory(
    const zbpp::v1::JobSpec& spec, const zbpp::v1::ScheduleVersion& version);

/// The same for a schedule not yet published (planning.h's JobPlan):
/// `schedule`'s stage_of with `simulation`'s peak_running_memory_bytes, which the
/// version built from them holds. Thread-safe (pure).
std::vector<StageMemoryEstimate> EstimateStageMemory(
    const zbpp::v1::JobSpec& spec, const sched::Schedule& schedule,
    const sched::SimulationResult& simulation);

/// One line for a job's state message: "stage 2 needs about 1.10 TiB
/// (4.30 GiB of weights and optimizer state for 2.9e+08 parameters,
/// 1.10 TiB of activations)", with ", 6.00 GiB of logits" before the
/// parenthesis closes where logits_bytes > 0 and ", 256.00 MiB of gathered
/// token embedding" where embedding_bytes > 0. Thread-safe (pure).
std::string DescribeStageMemory(int stage, const StageMemoryEstimate& estimate);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_MEMORY_ESTIMATE_H_
