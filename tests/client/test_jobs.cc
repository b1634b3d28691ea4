#include "tests/client/test_jobs.h"

#include <cstdlib>

#include "api/schedule_proto.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::ctltest {

v1::ScheduleVersion ZbVScheduleVersion(const std::string& job_id) {
  const sched::Problem problem =
      sched::Problem::Uniform(4, 2, 8, sched::VirtualStageCost{1, 1, 1, 1, 0.5}, 0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate("zb-v", problem);
  absl::StatusOr<sched::SimulationResult> result =
      schedule.ok()
          ? sched::Simulate(problem, *schedule)
          : absl::StatusOr<sched::SimulationResult>(schedule.status());
  if (!result.ok()) std::abort();  // The scheduler's own tests cover this.

  v1::ScheduleVersion version;
  version.set_job_id(job_id);
  version.set_version(2);
  version.set_effective_step(40);
  version.set_reason(v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  version.set_reason_detail("stage 2 1.48x slower than modeled");
  *version.mutable_schedule() = ScheduleToProto(*schedule);
  *version.mutable_cost_model() = CostModelToProto(problem);
  *version.mutable_predicted() = PredictionToProto(*result);
  return version;
}

v1::Job RunningJob(const std::string& id) {
  v1::Job job;
  job.set_id(id);
  job.mutable_spec()->set_name("gpt-kjv");
  job.mutable_spec()->set_steps(100);
  job.mutable_spec()->mutable_schedule()->set_name("zb-v");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_steps_completed(50);
  job.set_schedule_version(2);
  *job.mutable_schedule() = ZbVScheduleVersion(id);
  job.set_last_checkpoint_step(-1);
  job.mutable_create_time()->set_seconds(1000000000);
  v1::StepSummary* step = job.mutable_last_step();
  step->set_step(49);
  step->set_schedule_version(2);
  step->set_loss(2.5);
  step->set_step_seconds(0.5);
  step->set_tokens_per_second(1000);
  step->set_measured_bubble_rate(0.2);
  step->set_predicted_bubble_rate(0.1);
  for (int s = 0; s < 4; ++s) {
    v1::StageStepStats* stats = step->add_stages();
    stats->set_stage(s);
    stats->set_worker_id("w-" + std::to_string(s));
    stats->set_measured_bubble_rate(0.1 + 0.05 * s);
    stats->set_predicted_bubble_rate(0.1);
    v1::StageAssignment* a = job.add_assignments();
    a->set_stage(s);
    a->set_worker_id("w-" + std::to_string(s));
  }
  return job;
}

v1::Job TwoStageJob() {
  v1::Job job;
  job.set_id("job-7");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_steps_completed(20);
  job.set_recoveries_total(1);
  v1::JobSpec* spec = job.mutable_spec();
  spec->mutable_schedule()->set_name("zb-h1");
  spec->mutable_pipeline()->set_stages(2);
  spec->mutable_pipeline()->set_microbatches(8);
  spec->mutable_pipeline()->set_microbatch_size(4);
  spec->mutable_model()->set_seq_len(128);
  return job;
}

v1::JobEvent StepEvent(int64_t step, double loss) {
  v1::JobEvent event;
  v1::StepSummary* s = event.mutable_step();
  s->set_step(step);
  s->set_loss(loss);
  s->set_tokens_per_second(1234.5);
  s->set_measured_bubble_rate(0.125);
  s->set_predicted_bubble_rate(0.1);
  s->set_step_seconds(0.532);
  s->set_schedule_version(2);
  return event;
}

v1::JobEvent StateEvent(v1::JobState from, v1::JobState to,
                        const std::string& message) {
  v1::JobEvent event;
  event.mutable_state_change()->set_old_state(from);
  event.mutable_state_change()->set_new_state(to);
  event.mutable_state_change()->set_message(message);
  return event;
}

}  // namespace zbpp::ctltest
