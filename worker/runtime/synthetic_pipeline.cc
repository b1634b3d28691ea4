#include "worker/runtime/synthetic_pipeline.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {

absl::StatusOr<std::vector<std::vector<StepTimeline>>> RunSyntheticPipeline(
    const sched::Schedule& schedule, const SyntheticCompute& synthetic,
    const std::vector<Communicator*>& ranks, int steps, const SyntheticShape& shape,
    absl::Duration recv_timeout) {
  const int p = schedule.stages;
  if (static_cast<int>(ranks.size()) != p) {
    return absl::InvalidArgumentError(
        absl::StrCat(ranks.size(), " communicators for a schedule of ", p, " workers"));
  }
  std::vector<std::unique_ptr<PipelineExecutor>> executors;
  for (int r = 0; r < p; ++r) {
    ExecutorOptions o;
    o.rank = r;
    o.communicator = ranks[r];
    for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
      if (schedule.stage_of[s] == r) o.chunks[s] = LocalChunk{};
    }
    o.microbatch_size = shape.microbatch_size;
    o.seq_len = shape.seq_len;
    o.hidden = shape.hidden;
    o.recv_timeout = recv_timeout;
    o.synthetic = synthetic;
    executors.push_back(std::make_unique<PipelineExecutor>(std::move(o)));
    if (absl::Status st = executors.back()->Validate(schedule); !st.ok()) return st;
  }
  std::vector<std::vector<StepTimeline>> out;
  for (int step = 0; step < steps; ++step) {
    std::vector<absl::StatusOr<StepTimeline>> results(p, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r) {
      threads.emplace_back([&, r] { results[r] = executors[r]->RunStep(step, schedule); });
    }
    for (std::thread& t : threads) t.join();
    std::vector<StepTimeline>& timelines = out.emplace_back();
    for (int r = 0; r < p; ++r) {
      if (!results[r].ok()) {
        return absl::Status(results[r].status().code(),
                            absl::StrCat("rank ", r, ": ",
                                         std::string(results[r].status().message())));
      }
      timelines.push_back(*std::move(results[r]));
    }
  }
  return out;
}

}  // namespace zbpp::worker
