#ifndef ZBPP_WORKER_RUNTIME_SYNTHETIC_PIPELINE_H_
#define ZBPP_WORKER_RUNTIME_SYNTHETIC_PIPELINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/schedule.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/synthetic_compute.h"

namespace zbpp::worker {

/// The shape of the messages a synthetic pipeline exchanges, [b, s, h].
struct SyntheticShape {
  int64_t microbatch_size = 1;
  int64_t seq_len = 1;
  int64_t hidden = 1;
};

/// Runs `steps` steps of `schedule` under synthetic compute in this process,
/// one thread per stage (a PipelineExecutor each, with model-less chunks),
/// over `communicators` (element s is stage s's, whose group rank is s; not
/// owned; size schedule.stages): the executor and the transport are real,
/// the passes wait. For tests and benches of the runtime at scale on a few
/// cores. Returns timelines[step][stage]. Errors: Validate's for the
/// schedule, then the first failing stage's, prefixed with its stage.
absl::StatusOr<std::vector<std::vector<StepTimeline>>> RunSyntheticPipeline(
    const sched::Schedule& schedule, const SyntheticCompute& synthetic,
    const std::vector<Communicator*>& communicators, int steps, const SyntheticShape& shape,
    absl::Duration recv_timeout = absl::Seconds(30));

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_SYNTHETIC_PIPELINE_H_
