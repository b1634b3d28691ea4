#include "coordinator/core/data_parallel.h"

#include "coordinator/core/model_costs.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "scheduler/vocabulary_passes.h"

namespace zbpp::coordinator {

double StageParameterCount(const zbpp::v1::ModelSpec& model, int blocks, int stage,
                           int num_virtual_stages, bool vocab_parallel) {
  return blocks * BlockCostsOf(model, 1).parameters +
         EndParameters(model, stage, num_virtual_stages, vocab_parallel);
}

absl::StatusOr<sched::Schedule> GenerateSchedule(std::string_view name,
                                                 const sched::Problem& problem,
                                                 int data_parallel) {
  // The generators and the reductions' placement plan the pipeline's own
  // passes, within the limit less room for two microbatches between their
  // S and T; the vocabulary passes go in last (sched::AddVocabularyPasses).
  sched::Problem pipeline = problem;
  for (size_t w = 0; w < pipeline.memory_limit_bytes.size() && w < problem.vocabulary.size();
       ++w) {
    const double reserved = 2 * problem.vocabulary[w].m_bytes;
    if (pipeline.memory_limit_bytes[w] > 2 * reserved) pipeline.memory_limit_bytes[w] -= reserved;
  }
  pipeline.vocabulary.clear();
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, pipeline);
  if (schedule.ok() && data_parallel > 1) {
    schedule = sched::PlaceReductions(pipeline, *schedule, sched::ReducePlacement::kSolved);
  }
  if (!schedule.ok() || problem.vocabulary.empty()) return schedule;
  return sched::AddVocabularyPasses(problem, *schedule);
}

}  // namespace zbpp::coordinator
