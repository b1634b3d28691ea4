#ifndef ZBPP_TESTING_FAKE_PIPELINE_H_
#define ZBPP_TESTING_FAKE_PIPELINE_H_

// Shared by the coordinator's core and service tests: a job spec, the
// "true" costs of a pipeline with one slow stage, and the per-action timings
// a fake worker reports for a schedule version (the simulator run on the
// true costs, so reports are consistent across stages).

#include <cstdint>
#include <string>
#include <vector>

#include "api/schedule_proto.h"
#include "coordinator/core/planning.h"
#include "scheduler/problem.h"
#include "scheduler/simulator.h"
#include "zbpp/v1/job_spec.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator::testing {

/// A small valid GPT job: p = `stages`, m = `microbatches`, schedule `name`,
/// re-solve every `window` steps. The re-solve threshold is 1%: at p = 4,
/// m = 8 ZB-1p's re-solve for a 1.5x stage gains ~1.5%, under the default
/// 2%.
inline zbpp::v1::JobSpec TestSpec(int stages = 4, int microbatches = 8,
                                  const std::string& name = "zb-1p",
                                  int64_t steps = 20, int window = 2) {
  zbpp::v1::JobSpec spec;
  spec.set_name("test");
  auto* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(stages * 2);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_vocab(256);
  model->set_seq_len(32);
  spec.mutable_dataset()->mutable_synthetic();
  auto* pipeline = spec.mutable_pipeline();
  pipeline->set_stages(stages);
  pipeline->set_microbatches(microbatches);
  pipeline->set_microbatch_size(1);
  spec.mutable_schedule()->set_name(name);
  spec.mutable_schedule()->mutable_resolve()->set_window_steps(window);
  spec.mutable_schedule()->mutable_resolve()->set_min_improvement(0.01);
  spec.mutable_optimizer()->set_learning_rate(1e-3);
  spec.set_steps(steps);
  return spec;
}

/// The spec's analytic problem with every virtual stage held by stage
/// `slow_stage` (loop placement) `factor` times slower.
inline sched::Problem TrueCosts(const zbpp::v1::JobSpec& spec, int slow_stage,
                                double factor) {
  sched::Problem problem = *InitialProblem(spec);
  for (int s = 0; s < problem.num_virtual_stages(); ++s) {
    if (s % problem.stages != slow_stage) continue;
    problem.virtual_stages[s].f_seconds *= factor;
    problem.virtual_stages[s].b_seconds *= factor;
    problem.virtual_stages[s].w_seconds *= factor;
  }
  return problem;
}

/// Start/end of each action of `stage` in `version`, simulated on `truth`.
inline std::vector<sched::ActionTiming> TrueTimings(
    const zbpp::v1::ScheduleVersion& version, const sched::Problem& truth,
    int stage) {
  sched::Schedule schedule = *ScheduleFromProto(version.schedule());
  sched::SimulationResult sim = *sched::Simulate(truth, schedule);
  return sim.timings[stage];
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTING_FAKE_PIPELINE_H_
