#ifndef ZBPP_COORDINATOR_CORE_DATA_PARALLEL_H_
#define ZBPP_COORDINATOR_CORE_DATA_PARALLEL_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "api/pipeline_shape.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// Data × pipeline parallelism as the coordinator plans it: d replicas of a
/// p-stage pipeline, each virtual stage's weight gradients all-reduced over
/// its d replicas once per step by a REDUCE_GRAD action (PassKind::kReduce)
/// that the solver places in the schedule (scheduler/reduce_placement.h).
/// What a reduction is assumed to cost before one is measured is
/// planning's (RingAllReduceSeconds, planning.h).

/// Parameters of virtual stage `stage` of `num_virtual_stages` of the decoder
/// `model` (the worker's ModelChunk) holding `blocks` blocks (its entry of
/// BlocksPerVirtualStage, api/pipeline_shape.h) of its family's
/// BlockCostsOf(model).parameters each, plus EndParameters (embeddings on
/// the first stage, final norm and LM head on the last, the head unless
/// `vocab_parallel`; coordinator/core/model_costs.h). Requires a model that passed the spec
/// check. Thread-safe (pure).
double StageParameterCount(const zbpp::v1::ModelSpec& model, int blocks, int stage,
                           int num_virtual_stages, bool vocab_parallel);

/// The registry schedule `name` generated for `problem`, with, when
/// `data_parallel` > 1, one reduction per virtual stage placed by the
/// solver (`sched::PlaceReductions(..., ReducePlacement::kSolved)`, timed by
/// the problem's VirtualStageCost::reduce_seconds), and when the problem
/// has vocabulary costs (Problem::vocabulary: pipeline.vocab_parallel) the
/// S and T passes placed last (sched::AddVocabularyPasses), the pipeline's
/// own passes planned within each limit less two microbatches' VocabularyCost::m_bytes
/// (unless that would leave less than half of it). Every schedule
/// the coordinator publishes comes from here, so with d > 1 none lacks its
/// reductions and with d = 1 none has any, and a vocabulary-parallel job's
/// every schedule holds its vocabulary passes.
///
/// Errors: those of sched::Generate, sched::PlaceReductions and
/// sched::AddVocabularyPasses.
/// Thread-safe (pure).
absl::StatusOr<sched::Schedule> GenerateSchedule(std::string_view name,
                                                 const sched::Problem& problem,
                                                 int data_parallel);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_DATA_PARALLEL_H_
