#ifndef ZBPP_API_PIPELINE_SHAPE_H_
#define ZBPP_API_PIPELINE_SHAPE_H_

// The shape of a job's pipeline with the spec's defaults applied, for every
// module that reads a PipelineSpec (coordinator, zbppctl, worker).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/indices.h"
#include "scheduler/layout_search.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp {

/// d: PipelineSpec.data_parallel, 1 when unset (0). Negative values are the
/// coordinator's spec check to refuse; they read as 1 here. Pure.
inline int DataParallelOf(const v1::PipelineSpec& pipeline) {
  return pipeline.data_parallel() > 1 ? pipeline.data_parallel() : 1;
}

/// The job's workers: stages * DataParallelOf (at most 4096 for an accepted
/// spec). Pure.
inline int WorkersOf(const v1::PipelineSpec& pipeline) {
  return pipeline.stages() * DataParallelOf(pipeline);
}

/// StageOfWorker and ReplicaOfWorker (common/indices.h) of a worker index
/// held as an int, for the coordinator's job and attempt until they hold
/// their workers' indices as WorkerIndex. Pure.
inline int StageOfWorker(int index, int stages) {
  return StageOfWorker(WorkerIndex(index), stages).value();
}
inline int ReplicaOfWorker(int index, int stages) {
  return ReplicaOfWorker(WorkerIndex(index), stages).value();
}

/// The blocks of each of `num_virtual_stages` virtual stages, in the
/// model's order: PipelineSpec.layout when set, else the most even split
/// of `layers` (sched::MostEvenLayout: an even
/// split when n divides layers, which is what a job's workers get, since
/// the coordinator writes any other layout it plans into the spec,
/// PipelineSpec.layout_policy). Assumes a spec the coordinator accepted
/// (CheckLayout, coordinator/core/job_spec_check.h). Pure.
inline std::vector<int> BlocksPerVirtualStage(const v1::PipelineSpec& pipeline, int layers,
                                              int num_virtual_stages) {
  if (pipeline.layout_size() > 0) {
    return std::vector<int>(pipeline.layout().begin(), pipeline.layout().end());
  }
  if (num_virtual_stages <= 0) return {};
  return sched::MostEvenLayout(layers, num_virtual_stages);
}

/// Vocabulary parallelism (PipelineSpec.vocab_parallel): the rows
/// [begin, end) of the vocabulary, and of the LM head, that stage `stage` of
/// `stages` holds: contiguous, in stage order, sizes differing by at most
/// one (the first vocab % stages shards one row longer). Pure.
struct VocabularyRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
inline VocabularyRange VocabularyRangeOf(int64_t vocab, int stages, int stage) {
  const int64_t base = vocab / stages;
  const int64_t longer = vocab % stages;
  VocabularyRange range;
  range.begin = stage * base + std::min<int64_t>(stage, longer);
  range.end = range.begin + base + (stage < longer ? 1 : 0);
  return range;
}

/// A layout as users write it: "[5, 3]". Pure.
inline std::string LayoutText(const std::vector<int>& layout) {
  return absl::StrCat("[", absl::StrJoin(layout, ", "), "]");
}

}  // namespace zbpp

#endif  // ZBPP_API_PIPELINE_SHAPE_H_
