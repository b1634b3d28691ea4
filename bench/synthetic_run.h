// What the synthetic-compute benches (pipeline_scale_bench, balance_bench)
// share: running a schedule's steps with its stages as threads of this
// process (worker/runtime/synthetic_pipeline.h), and reading each step's
// timelines as the simulator reads its own (scheduler/simulator.h:
// cost = the largest per-stage span, bubble = 1 - Σ busy / (p · cost)).

#ifndef ZBPP_BENCH_SYNTHETIC_RUN_H_
#define ZBPP_BENCH_SYNTHETIC_RUN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "worker/comm/communicator.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/order_strict_communicator.h"
#include "worker/runtime/step_timeline.h"
#include "worker/runtime/synthetic_compute.h"
#include "worker/runtime/synthetic_pipeline.h"

namespace zbpp::bench {

/// One stage's step: its span, from its first action's start to its last
/// one's end, and the time its actions ran within it, seconds.
struct StageSpan {
  double span_seconds = 0;
  double busy_seconds = 0;
};

/// Element s: stage s's span and busy time in `stages` (0 and 0 for a stage
/// that ran nothing). Pure.
inline std::vector<StageSpan> StageSpans(const std::vector<worker::StepTimeline>& stages) {
  std::vector<StageSpan> spans(stages.size());
  for (size_t r = 0; r < stages.size(); ++r) {
    const worker::StepTimeline& t = stages[r];
    if (t.action_start_seconds.empty()) continue;
    const double first =
        *std::min_element(t.action_start_seconds.begin(), t.action_start_seconds.end());
    const double last = *std::max_element(t.action_end_seconds.begin(), t.action_end_seconds.end());
    spans[r].span_seconds = last - first;
    for (size_t j = 0; j < t.action_start_seconds.size(); ++j) {
      spans[r].busy_seconds += t.action_end_seconds[j] - t.action_start_seconds[j];
    }
  }
  return spans;
}

/// The largest per-stage bubble of one step, two ways.
struct StageBubbles {
  /// max over stages of 1 - busy / that stage's own span (StageSpans): a
  /// stage with less work than the slowest one waits between its passes.
  double own_span = 0;
  /// max over stages of 1 - busy / cost, the cost being the largest stage
  /// span: job.proto's StageSummary.measured_bubble_rate, what the
  /// coordinator reports per stage; it also counts the time a stage starts
  /// after, or ends before, the slowest one.
  double of_cost = 0;
};

/// `stages`' largest per-stage bubbles (0 for a stage with a zero span, and
/// for no stages). Pure.
inline StageBubbles LargestStageBubbles(const std::vector<worker::StepTimeline>& stages) {
  const std::vector<StageSpan> spans = StageSpans(stages);
  double cost = 0;
  for (const StageSpan& s : spans) cost = std::max(cost, s.span_seconds);
  StageBubbles largest;
  for (const StageSpan& s : spans) {
    if (s.span_seconds <= 0) continue;
    largest.own_span = std::max(largest.own_span, 1 - s.busy_seconds / s.span_seconds);
    largest.of_cost = std::max(largest.of_cost, 1 - s.busy_seconds / cost);
  }
  return largest;
}

/// One step of a synthetic run, read from its stages' timelines.
struct Measured {
  /// The longest stage's StepTimeline::step_seconds, seconds.
  double step_seconds = 0;
  /// As the simulator's bubble rate: 1 - Σ busy / (p · the largest stage span).
  double bubble = 0;
  /// The largest per-stage bubbles (LargestStageBubbles).
  StageBubbles stage_bubbles;
  /// Mean over passes of (measured - requested) pass time, seconds: the
  /// sleeps' lateness, which the runtime does not cause.
  double overshoot_seconds = 0;
  /// Mean over stages of the time blocked on inputs, seconds.
  double input_wait_seconds = 0;
};

/// Step `step` of `schedule` as its stages measured it (`stages`, element s
/// stage s's timeline), run under `synthetic`. Pure.
inline Measured Measure(const std::vector<worker::StepTimeline>& stages,
                        const sched::Schedule& schedule, const worker::SyntheticCompute& synthetic,
                        int64_t step) {
  Measured m;
  double cost = 0, busy = 0, asked = 0;
  int passes = 0;
  for (size_t r = 0; r < stages.size(); ++r) {
    m.input_wait_seconds += stages[r].input_wait_seconds / stages.size();
    m.step_seconds = std::max(m.step_seconds, stages[r].step_seconds);
    for (const sched::Action& a : schedule.actions[r]) {
      asked += worker::SyntheticPassSeconds(synthetic, a, step, 1, static_cast<int>(r));
      ++passes;
    }
  }
  for (const StageSpan& s : StageSpans(stages)) {
    cost = std::max(cost, s.span_seconds);
    busy += s.busy_seconds;
  }
  m.bubble = cost > 0 ? 1 - busy / (stages.size() * cost) : 0;
  m.stage_bubbles = LargestStageBubbles(stages);
  m.overshoot_seconds = passes > 0 ? (busy - asked) / passes : 0;
  return m;
}

/// The simulator's timings of one step (`sim.timings`) as the stages'
/// timelines, so that what is predicted is read as what is measured (a
/// reduction's timing, on its communication timeline, counts as an action
/// like the runtime's REDUCE_GRAD). Pure.
inline std::vector<worker::StepTimeline> TimelinesOf(const sched::SimulationResult& sim) {
  std::vector<worker::StepTimeline> stages(sim.timings.size());
  for (size_t r = 0; r < sim.timings.size(); ++r) {
    for (const sched::ActionTiming& timing : sim.timings[r]) {
      stages[r].action_start_seconds.push_back(timing.start_seconds);
      stages[r].action_end_seconds.push_back(timing.end_seconds);
      stages[r].step_seconds = std::max(stages[r].step_seconds, timing.end_seconds);
    }
  }
  return stages;
}

/// Index of the median of `steps` by step_seconds (the upper one of an even
/// count); requires a non-empty `steps`. Pure.
inline size_t MedianStep(const std::vector<Measured>& steps) {
  std::vector<size_t> order(steps.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return steps[a].step_seconds < steps[b].step_seconds;
  });
  return order[order.size() / 2];
}

/// Runs `steps` steps of `schedule` under `synthetic` (RunSyntheticPipeline)
/// over a fresh group of schedule.stages communicators: the order-strict
/// one (worker/comm/order_strict_communicator.h, which matches messages by
/// their order between two ranks as NCCL does), or with `in_process` the
/// in-process one (matches by tag). Returns timelines[step][stage].
/// Errors: RunSyntheticPipeline's. Blocks for the run; one thread per stage.
inline absl::StatusOr<std::vector<std::vector<worker::StepTimeline>>> RunSynthetic(
    const sched::Schedule& schedule, const worker::SyntheticCompute& synthetic, bool in_process,
    int steps, const worker::SyntheticShape& shape) {
  std::vector<std::unique_ptr<worker::Communicator>> group =
      in_process ? worker::CreateInProcessGroup(schedule.stages)
                 : std::move(worker::CreateOrderStrictGroup(schedule.stages).ranks);
  std::vector<worker::Communicator*> ranks;
  for (auto& c : group) ranks.push_back(c.get());
  return worker::RunSyntheticPipeline(schedule, synthetic, ranks, steps, shape);
}

}  // namespace zbpp::bench

#endif  // ZBPP_BENCH_SYNTHETIC_RUN_H_
