#include "coordinator/core/memory_estimate.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "api/pipeline_shape.h"
#include "common/indices.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/model_costs.h"

namespace zbpp::coordinator {
namespace {

// float32 weight, gradient and AdamW's two moments.
constexpr double kStateBytesPerParameter = 16;
// Exact rollback's copy of weight and moments (adamw.h, Snapshot).
constexpr double kRollbackBytesPerParameter = 12;

bool KeepsRollbackCopy(const zbpp::v1::JobSpec& spec) {
  return spec.validation() != zbpp::v1::VALIDATION_MODE_SYNCHRONOUS &&
         spec.optimizer().rollback() != zbpp::v1::ROLLBACK_MODE_IN_PLACE_INVERSE;
}

bool PassesInFp32(const zbpp::v1::JobSpec& spec) {
  return spec.precision() != zbpp::v1::PRECISION_BF16 &&
         spec.precision() != zbpp::v1::PRECISION_FP16;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", bytes, units[unit]);
}

// Each stage's estimate from the stage of each virtual stage and each
// stage's predicted activation peak (bytes, 16-bit activations).
std::vector<StageMemoryEstimate> Estimate(const zbpp::v1::JobSpec& spec, int stages,
                                          absl::Span<const int> stage_of,
                                          absl::Span<const double> peak_bytes) {
  IndexedVector<Stage, StageMemoryEstimate> estimates(stages);
  const int num_virtual_stages = static_cast<int>(stage_of.size());
  const std::vector<int> blocks =
      BlocksPerVirtualStage(spec.pipeline(), spec.model().layers(), num_virtual_stages);
  auto known = [stages](Stage s) { return s.value() >= 0 && s.value() < stages; };
  for (const VirtualStage vs : IndicesOf<VirtualStage>(num_virtual_stages)) {
    const Stage s(stage_of[vs.value()]);
    if (!known(s)) continue;
    estimates[s].parameters += StageParameterCount(spec.model(), blocks[vs.value()], vs.value(),
                                                   num_virtual_stages,
                                                   spec.pipeline().vocab_parallel());
  }
  const bool vocab_parallel = spec.pipeline().vocab_parallel();
  if (vocab_parallel) {
    // Every stage holds its rows of the token embedding and of the LM head
    // (one matrix with tied embeddings), and its share of the logits.
    const double matrices = spec.model().tie_embeddings() ? 1 : 2;
    for (const Stage s : estimates.indices()) {
      const double rows = VocabularyRangeOf(spec.model().vocab(), stages, s.value()).size();
      estimates[s].parameters += matrices * rows * spec.model().hidden();
      estimates[s].logits_bytes = LogitsBytes(spec) * rows / spec.model().vocab();
    }
    const Stage first(num_virtual_stages > 0 ? stage_of[0] : -1);
    if (known(first)) {
      estimates[first].embedding_bytes = 2.0 * 4 * spec.pipeline().microbatches() *
                                         spec.pipeline().microbatch_size() *
                                         spec.model().seq_len() * spec.model().hidden();
    }
  }
  const double per_parameter =
      kStateBytesPerParameter +
      (KeepsRollbackCopy(spec) ? kRollbackBytesPerParameter : 0);
  const double activation_factor = PassesInFp32(spec) ? 2 : 1;
  for (const Stage s : estimates.indices()) {
    estimates[s].state_bytes = estimates[s].parameters * per_parameter;
    if (s.value() < static_cast<int>(peak_bytes.size())) {
      estimates[s].activation_bytes = activation_factor * peak_bytes[s.value()];
    }
  }
  if (num_virtual_stages > 0 && !vocab_parallel) {
    const Stage last(stage_of[num_virtual_stages - 1]);
    if (known(last)) estimates[last].logits_bytes = LogitsBytes(spec);
  }
  return estimates.vector();
}

}  // namespace

std::vector<StageMemoryEstimate> EstimateStageMemory(
    const zbpp::v1::JobSpec& spec, const zbpp::v1::ScheduleVersion& version) {
  const zbpp::v1::Schedule& schedule = version.schedule();
  return Estimate(spec, schedule.stages(), schedule.stage_of(),
                  version.predicted().peak_memory_bytes());
}

std::vector<StageMemoryEstimate> EstimateStageMemory(
    const zbpp::v1::JobSpec& spec, const sched::Schedule& schedule,
    const sched::SimulationResult& simulation) {
  return Estimate(spec, schedule.stages, schedule.stage_of,
                  simulation.peak_running_memory_bytes);
}

std::string DescribeStageMemory(int stage, const StageMemoryEstimate& estimate) {
  return absl::StrFormat(
      "stage %d needs about %s (%s of weights and optimizer state for "
      "%.4g parameters, %s of activations%s%s)",
      stage, HumanBytes(estimate.total_bytes()),
      HumanBytes(estimate.state_bytes), estimate.parameters,
      HumanBytes(estimate.activation_bytes),
      estimate.logits_bytes > 0
          ? absl::StrCat(", ", HumanBytes(estimate.logits_bytes), " of logits")
          : "",
      estimate.embedding_bytes > 0
          ? absl::StrCat(", ", HumanBytes(estimate.embedding_bytes),
                         " of gathered token embedding")
          : "");
}

}  // namespace zbpp::coordinator
