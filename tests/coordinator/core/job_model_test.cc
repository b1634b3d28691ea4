// JobModel (coordinator/core/job_model.h) with JobHarness's context: what
// Prepare builds, and when a re-solve is due (the spec's window ends under
// the latest version, every stage has a sample, none runs already).

#include "coordinator/core/job_model.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/time/time.h"
#include "coordinator/core/resolver.h"
#include "coordinator/core/schedule_versions.h"
#include "coordinator/core/step_report_check.h"
#include "gtest/gtest.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/core/job_harness.h"
#include "testing/fake_pipeline.h"

namespace zbpp::coordinator {
namespace {

using testing::TestSpec;
using testing::TrueCosts;

class JobModelTest : public testing::JobHarness {
 protected:
  /// Step `step` of version `version` as every stage reports it when its
  /// passes take the times of `truth`.
  /// `overhead_seconds`: each stage's executor overhead in the step
  /// (StepBreakdown.overhead_seconds).
  PendingStep MeasuredStep(const ScheduleVersions& versions, int64_t version, int64_t step,
                           const sched::Problem& truth, const sched::Problem& base,
                           double overhead_seconds = 0) {
    const sched::Schedule& schedule = versions.schedule(version);
    const sched::SimulationResult sim = *sched::Simulate(truth, schedule);
    PendingStep pending;
    pending.step = step;
    pending.version = version;
    for (int stage = 0; stage < schedule.stages; ++stage) {
      v1::ReportStepRequest report;
      report.set_stage(stage);
      report.set_step(step);
      double end = 0;
      for (const sched::ActionTiming& t : sim.timings[stage]) {
        report.add_action_start_seconds(t.start_seconds);
        report.add_action_end_seconds(t.end_seconds);
        end = std::max(end, t.end_seconds);
      }
      report.set_step_seconds(end);
      report.mutable_breakdown()->set_overhead_seconds(overhead_seconds);
      absl::StatusOr<MeasuredReport> measured =
          MeasureStepReport(report, schedule, version, base, 0);
      EXPECT_TRUE(measured.ok()) << measured.status();
      pending.reports[stage] = measured->stage;
    }
    return pending;
  }

  /// Prepares `model` for `proto` and adds its first version to `versions`.
  void AddFirstVersion(const v1::Job& proto, JobModel& model, ScheduleVersions& versions) {
    absl::StatusOr<std::optional<ScheduleChoice>> first =
        model.Prepare(proto, versions, context_);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE(first->has_value());
    v1::ScheduleVersion version =
        BuildVersion(proto.id(), (*first)->schedule, (*first)->problem, (*first)->simulation,
                     v1::SCHEDULE_CHANGE_REASON_INITIAL, "", nullptr);
    versions.Stamp(version, -1, 0, absl::UnixEpoch());
    versions.Add(version, (*first)->schedule);
  }
};

TEST_F(JobModelTest, AReSolveIsDueAtEachWindowsEndOnceEveryStageHasASample) {
  v1::Job proto;
  proto.set_id("job-1");
  *proto.mutable_spec() = TestSpec(2, 4, "zb-1p", /*steps=*/20, /*window=*/2);
  JobModel model;
  ScheduleVersions versions;
  AddFirstVersion(proto, model, versions);
  EXPECT_EQ(versions.schedule(1).name, "zb-1p");
  EXPECT_EQ(model.base().stages, 2);
  // Built once: a second Prepare (the next attempt) chooses nothing.
  EXPECT_FALSE(model.Prepare(proto, versions, context_)->has_value());

  // No sample yet: nothing to solve from.
  EXPECT_EQ(model.MaybeResolve(proto, versions, 1, 1), nullptr);
  const sched::Problem truth = TrueCosts(proto.spec(), 1, 1.5);
  for (int64_t step = 0; step < 2; ++step) {
    PendingStep pending = MeasuredStep(versions, 1, step, truth, model.base());
    model.AddStep(proto.spec(), pending, versions);
  }
  EXPECT_EQ(model.MaybeResolve(proto, versions, 1, 0), nullptr);  // Mid-window.
  std::unique_ptr<ResolveTask> task = model.MaybeResolve(proto, versions, 1, 1);
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(task->job_id, "job-1");
  EXPECT_EQ(task->attempt, 1);
  EXPECT_EQ(task->current_version, 1);
  EXPECT_EQ(task->policy_name, "zb-1p");
  EXPECT_EQ(task->record.step, 1);
  // The measured costs: stage 1 is 1.5x slower than the analytic model.
  EXPECT_NEAR(task->measured.virtual_stages[1].f_seconds /
                  task->measured.virtual_stages[0].f_seconds,
              1.5 * model.base().virtual_stages[1].f_seconds /
                  model.base().virtual_stages[0].f_seconds,
              1e-6);
  // One at a time: the next window waits for this one to end.
  EXPECT_EQ(model.MaybeResolve(proto, versions, 1, 3), nullptr);
  model.EndResolve();
  EXPECT_NE(model.MaybeResolve(proto, versions, 1, 3), nullptr);
}

// A job erased (retention) while its re-solve waits for the resolver thread:
// the task owns what it solves with, so solving it afterwards touches
// nothing of the job.
TEST_F(JobModelTest, AReSolveTaskOutlivesItsJob) {
  v1::Job proto;
  proto.set_id("job-1");
  *proto.mutable_spec() = TestSpec(2, 4, "zb-1p", /*steps=*/20, /*window=*/2);
  auto model = std::make_unique<JobModel>();
  ScheduleVersions versions;
  AddFirstVersion(proto, *model, versions);
  const sched::Problem truth = TrueCosts(proto.spec(), 1, 1.5);
  for (int64_t step = 0; step < 2; ++step) {
    PendingStep pending = MeasuredStep(versions, 1, step, truth, model->base());
    model->AddStep(proto.spec(), pending, versions);
  }
  std::unique_ptr<ResolveTask> task = model->MaybeResolve(proto, versions, 1, 1);
  ASSERT_NE(task, nullptr);
  const std::weak_ptr<const ResolvePolicy> policy = task->policy;
  model.reset();  // The job and its model are gone.
  EXPECT_FALSE(policy.expired());
  SolveResolve(*task);
  // Decided from the task's own copies: both makespans simulated.
  EXPECT_GT(task->record.old_makespan_seconds, 0);
  EXPECT_GT(task->record.new_makespan_seconds, 0);
  EXPECT_FALSE(task->record.reason.empty());
}

TEST_F(JobModelTest, TheStepsPredictionPaysTheMeasuredOverheadAndCountsItAsIdle) {
  v1::Job proto;
  proto.set_id("job-1");
  *proto.mutable_spec() = TestSpec(2, 4, "zb-1p", /*steps=*/20, /*window=*/2);
  JobModel bare, paying;
  ScheduleVersions versions;
  AddFirstVersion(proto, bare, versions);
  ASSERT_TRUE(paying.Prepare(proto, versions, context_).ok());
  const sched::Schedule& schedule = versions.schedule(1);
  const sched::Problem truth = TrueCosts(proto.spec(), 1, 1.0);
  // Each stage runs 4 F, 4 B and 4 W: 12 passes, each paying o.
  const double o = 0.2 * truth.virtual_stages[0].f_seconds;
  PendingStep without = MeasuredStep(versions, 1, 0, truth, bare.base());
  PendingStep with = MeasuredStep(versions, 1, 0, truth, paying.base(), 12 * o);
  const StepReports predicted_bare = bare.AddStep(proto.spec(), without, versions);
  const StepReports predicted = paying.AddStep(proto.spec(), with, versions);

  // The simulator under the measured passes, each o longer; busy time is
  // the passes alone, as the workers measure it.
  sched::Problem paid = paying.base();
  for (int s = 0; s < paid.num_virtual_stages(); ++s) {
    paid.virtual_stages[s].f_seconds = truth.virtual_stages[s].f_seconds + o;
    paid.virtual_stages[s].b_seconds = truth.virtual_stages[s].b_seconds + o;
    paid.virtual_stages[s].w_seconds = truth.virtual_stages[s].w_seconds + o;
  }
  const sched::SimulationResult sim = *sched::Simulate(paid, schedule);
  double busy = 0;
  for (int w = 0; w < schedule.stages; ++w) {
    double stage_busy = 0;
    for (const sched::Action& a : schedule.actions[w]) {
      stage_busy += sched::PassSeconds(truth.CostOf(a.virtual_stage), a, 1);
    }
    EXPECT_NEAR(predicted.predicted_stage_bubble_rate[w], 1 - stage_busy / sim.makespan_seconds,
                1e-9)
        << w;
    busy += stage_busy;
  }
  EXPECT_NEAR(predicted.predicted_bubble_rate, 1 - busy / (2 * sim.makespan_seconds), 1e-9);
  EXPECT_GT(predicted.predicted_bubble_rate, predicted_bare.predicted_bubble_rate + 0.05);
}

}  // namespace
}  // namespace zbpp::coordinator
