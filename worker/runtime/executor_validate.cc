// PipelineExecutor::Validate (executor.h): whether this worker can run a
// schedule, checked before its first step.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/comm_order.h"
#include "scheduler/simulator.h"
#include "worker/model/model_chunk.h"
#include "worker/runtime/executor.h"

namespace zbpp::worker {

absl::Status PipelineExecutor::Validate(const sched::Schedule& schedule) const {
  const int p = options_.communicator->size();
  if (schedule.stages != p) {
    return absl::InvalidArgumentError(absl::StrCat("schedule has ", schedule.stages,
                                                   " stages, the job has ", p));
  }
  // DerivePairOrders simulates the schedule, which checks its form
  // (CheckSchedule) and finds deadlocks. Every transport issues each pair's
  // messages in that order; one that runs them one at a time (NCCL) must
  // not deadlock on it.
  absl::StatusOr<sched::PairOrders> orders = sched::DerivePairOrders(schedule);
  if (!orders.ok()) {
    return absl::Status(orders.status().code(), absl::StrCat("schedule refused: ",
                                                             std::string(orders.status().message())));
  }
  if (absl::Status st = sched::CheckPairOrders(schedule, *orders); !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrCat("schedule refused: ", std::string(st.message())));
  }
  int reductions = 0;
  for (const sched::Action& a : schedule.actions[options_.stage]) {
    // The simulation above checked that a set of partial ones is complete.
    reductions += sched::IsVirtualStageReduction(a);
  }
  if (reductions > 0 && options_.reducer == nullptr) {
    return absl::FailedPreconditionError(
        "schedule reduces gradients over data-parallel replicas (REDUCE_GRAD), but the job has "
        "one replica");
  }
  if (options_.reducer != nullptr && reductions != static_cast<int>(options_.chunks.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job has ", options_.reducer->replicas(), " data-parallel replicas: stage ",
                     options_.stage,
                     " needs one REDUCE_GRAD (whole, or one per bucket) per virtual stage it "
                     "holds (",
                     options_.chunks.size(), "), the schedule has ", reductions));
  }
  const bool vocabulary_parallel = sched::HoldsVocabularyPasses(schedule);
  if (options_.synthetic.has_value()) {
    if (absl::Status st = CheckSyntheticCompute(*options_.synthetic, schedule.num_virtual_stages());
        !st.ok()) {
      return st;
    }
    if (vocabulary_parallel &&
        static_cast<int>(options_.synthetic->vocabulary.size()) != schedule.stages) {
      return absl::FailedPreconditionError(absl::StrCat(
          "schedule holds vocabulary passes (S, T), but synthetic compute has vocabulary costs "
          "for ", options_.synthetic->vocabulary.size(), " stages of ", schedule.stages));
    }
  } else if (vocabulary_parallel != (options_.vocabulary != nullptr)) {
    return absl::FailedPreconditionError(
        vocabulary_parallel
            ? absl::StrCat("schedule holds vocabulary passes (S, T), but stage ", options_.stage,
                           " holds no vocabulary shard")
            : absl::StrCat("stage ", options_.stage,
                           " holds a vocabulary shard, but the schedule has no S and T passes "
                           "to run it"));
  }
  const std::vector<int> buckets = sched::BucketsPerVirtualStage(schedule);
  for (const auto& [stage, chunk] : options_.chunks) {
    if (buckets[stage] == 1 || chunk.model == nullptr) continue;
    if (absl::StatusOr<std::vector<std::vector<at::Tensor>>> split =
            GradientBuckets(*chunk.model, buckets[stage]);
        !split.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("schedule refused: ", std::string(split.status().message())));
    }
  }
  for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
    const bool mine = schedule.StageOf(VirtualStage(s)) == Stage(options_.stage);
    if (mine != (options_.chunks.count(s) == 1)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "schedule places virtual stage ", s, mine ? " on" : " off", " stage ", options_.stage,
          ", but this worker ", mine ? "does not hold" : "holds", " that chunk"));
    }
  }
  return absl::OkStatus();
}

}  // namespace zbpp::worker
