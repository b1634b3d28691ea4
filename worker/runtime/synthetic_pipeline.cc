#include "worker/runtime/synthetic_pipeline.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {

absl::StatusOr<std::vector<std::vector<StepTimeline>>> RunSyntheticPipeline(
    const sched::Schedule& schedule, const SyntheticCompute& synthetic,
    const std::vector<Communicator*>& communicators, int steps, const SyntheticShape& shape,
    absl::Duration recv_timeout) {
  const int p = schedule.stages;
  if (static_cast<int>(communicators.size()) != p) {
    return absl::InvalidArgumentError(
        absl::StrCat(communicators.size(), " communicators for a schedule of ", p, " workers"));
  }
  std::vector<std::unique_ptr<PipelineExecutor>> executors;
  for (const Stage s : schedule.AllStages()) {
    ExecutorOptions o;
    o.stage = s.value();
    o.communicator = communicators[s.value()];
    for (const VirtualStage vs : schedule.AllVirtualStages()) {
      if (schedule.StageOf(vs) == s) o.chunks[vs.value()] = LocalChunk{};
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
    for (int s = 0; s < p; ++s) {
      threads.emplace_back([&, s] { results[s] = executors[s]->RunStep(step, schedule); });
    }
    for (std::thread& t : threads) t.join();
    std::vector<StepTimeline>& timelines = out.emplace_back();
    for (int s = 0; s < p; ++s) {
      if (!results[s].ok()) {
        return absl::Status(results[s].status().code(),
                            absl::StrCat("stage ", s, ": ",
                                         std::string(results[s].status().message())));
      }
      timelines.push_back(*std::move(results[s]));
    }
  }
  return out;
}

}  // namespace zbpp::worker
