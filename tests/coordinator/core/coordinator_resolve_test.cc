// The coordinator core's re-solves and schedule versions (FakeClock,
// in-memory SQLite store, fake workers calling the core: no gRPC, no
// sleeps): a straggler's shorter schedule published to every worker at one
// step, re-solves and validation-mode switches that must not be published,
// the background re-solve thread, a re-solve that outlives its job, and the
// measured T_comm in the cost model.

#include "coordinator/core/coordinator.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "api/schedule_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::CoordinatorTest;
using testing::FakeWorker;
using testing::TestSpec;
using testing::Uncalibrated;
using testing::TrueCosts;

// `report` carrying a clean synchronous validation of `step` (committed,
// no clipping).
v1::ReportStepRequest WithCleanValidation(v1::ReportStepRequest report, int64_t step) {
  v1::ValidationResult* v = report.add_validations();
  v->set_step(step);
  v->set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
  v->set_decision(v1::VALIDATION_DECISION_COMMITTED);
  v->set_clip_coefficient(1);
  return report;
}

TEST_F(CoordinatorTest, ResolveIsNotPublishedWhenTheAttemptChangedWhileSolving) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  // The first re-solve (which would publish: see the test below) runs
  // outside the mutex; the job is cancelled before its result is applied.
  int resolves = 0;
  resolve_hook_ = [&](const std::string& id) {
    if (resolves++ == 0) {
      ASSERT_TRUE(coordinator_->CancelJob(id, "cancelled mid-solve").ok());
    }
  };
  for (int64_t step = 0; step < 20 && resolves == 0; ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_LE(step, w.granted);
      ASSERT_TRUE(coordinator_->ReportStep(w.Report(step, truth)).ok());
    }
  }
  ASSERT_EQ(resolves, 1);
  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  EXPECT_EQ(job->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job->schedule_version(), 1);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  EXPECT_EQ(store_->LoadAll()->schedule_versions.size(), 1u);
  auto records = store_->ListResolveRecords(job_id);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_FALSE((*records)[0].published);
  EXPECT_THAT((*records)[0].reason, HasSubstr("not published"));
}

// A re-solve that came out once every step up to the last was
// granted was published to take effect after the job's end; the job's
// latest version then was one no step ran, and the measured trace of the
// last step was refused. Now such a version is not published (the re-solve
// is logged as not published), and every version stays readable by number.
TEST_F(CoordinatorTest, ResolveDoneOnceTheLastStepIsGrantedIsNotPublished) {
  background_resolves_ = true;
  Start(":memory:");
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  // The first re-solve (due at step 1; it would publish a shorter
  // schedule: see the straggler test below) waits until every step up to
  // the last is granted and all but the last have run.
  absl::Notification started;
  absl::Notification release;
  HoldFirstResolve(started, release);
  RunSteps(workers, truth, 18);
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  for (auto& w : workers) {
    w.Drain();
    ASSERT_EQ(w.granted, 19);
    ASSERT_EQ(w.next_step, 19);
  }
  release.Notify();
  coordinator_->WaitForResolves();
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->schedule_version(), 1);
  RunSteps(workers, truth, 19);
  coordinator_->WaitForResolves();

  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->state_message();
  EXPECT_EQ(job->schedule_version(), 1);
  EXPECT_EQ(job->last_step_timeline().step(), 19);
  EXPECT_EQ(job->last_step_timeline().schedule_version(), 1);
  EXPECT_EQ(job->schedule().version(), 1);
  // The measured trace of the last step is drawn with the version it ran.
  absl::StatusOr<TimedSchedule> measured = MeasuredLastStep(*job, job->schedule());
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_THAT(measured->schedule.name, HasSubstr("step 19 (measured)"));
  for (const FakeWorker& w : workers) {
    EXPECT_EQ(w.versions.size(), 1u) << "a version reached worker " << w.id;
  }
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  EXPECT_EQ(store_->LoadAll()->schedule_versions.size(), 1u);
  auto records = store_->ListResolveRecords(job_id);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_FALSE((*records)[0].published);
  EXPECT_THAT((*records)[0].reason, HasSubstr("not published: every step up to the job's last "
                                              "(19) was granted while solving"));

  absl::StatusOr<v1::ScheduleVersion> ran = coordinator_->GetScheduleVersion(job_id, 1);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->version(), 1);
  EXPECT_EQ(ran->SerializeAsString(), job->schedule().SerializeAsString());
  absl::StatusOr<v1::ScheduleVersion> missing = coordinator_->GetScheduleVersion(job_id, 2);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("version: job " + job_id + " has no schedule version 2"));
  absl::StatusOr<v1::ScheduleVersion> zero = coordinator_->GetScheduleVersion(job_id, 0);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("version: must be >= 1, got 0"));
  EXPECT_EQ(coordinator_->GetScheduleVersion("job-404", 1).status().code(),
            absl::StatusCode::kNotFound);
}

// A validation-mode switch whose version no step could run is not
// published either.
TEST_F(CoordinatorTest, ModeSwitchOnceTheLastStepIsGrantedIsNotPublished) {
  validation_policy_.post_after_clean_steps = 1;
  Start(":memory:");
  v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 2, 2));
  spec.mutable_schedule()->mutable_resolve()->set_window_steps(100);
  spec.set_validation(v1::VALIDATION_MODE_AUTO);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  for (auto& w : workers) w.Drain();
  ASSERT_EQ(workers[0].granted, 1) << "both steps are granted at once";
  // Step 0's clean outcome would switch AUTO to POST from step 2: past the
  // job's last step.
  for (auto& w : workers) {
    ASSERT_TRUE(coordinator_->ReportStep(WithCleanValidation(w.Report(0, truth), 0)).ok());
    ++w.next_step;
  }
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->schedule_version(), 1);
  RunSteps(workers, truth, 1);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->state_message();
  EXPECT_EQ(job->schedule_version(), 1);
}

TEST_F(CoordinatorTest, StragglerResolvePublishesShorterVersionAllSwitchTogether) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  RunSteps(workers, truth, 19);
  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->state_message();
  EXPECT_EQ(job->steps_completed(), 20);
  ASSERT_GE(job->schedule_version(), 2);

  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const StoredState stored = *store_->LoadAll();
  const v1::ScheduleVersion* v2 = nullptr;
  for (const auto& v : stored.schedule_versions) {
    if (v.version() == 2) v2 = &v;
  }
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->reason(), v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  EXPECT_LT(v2->predicted().makespan_seconds(),
            v2->previous_predicted().makespan_seconds());
  EXPECT_THAT(v2->reason_detail(), HasSubstr("stage 2"));
  // Every worker ran every step with the same version, switching at v2's
  // effective step.
  for (int64_t step = 0; step < 20; ++step) {
    const int64_t expected = step < v2->effective_step() ? 1 : 2;
    for (const auto& w : workers) {
      if (stored.schedule_versions.size() == 2) {
        EXPECT_EQ(w.version_of_step.at(step), expected) << "step " << step;
      }
      EXPECT_EQ(w.version_of_step.at(step),
                workers[0].version_of_step.at(step));
    }
  }
  // Every re-solve is logged.
  auto records = store_->ListResolveRecords(job_id);
  ASSERT_TRUE(records.ok());
  ASSERT_GE(records->size(), 2u);
  EXPECT_TRUE((*records)[0].published);
  EXPECT_GT((*records)[0].old_makespan_seconds,
            (*records)[0].new_makespan_seconds);
  // The step summaries: per-stage measured and predicted bubble rates.
  auto summaries = store_->ListStepSummaries(job_id, 0, 100);
  ASSERT_EQ(summaries->size(), 20u);
  const v1::StepSummary& last = summaries->back();
  EXPECT_EQ(last.stages_size(), 4);
  EXPECT_EQ(last.loss(), 2.5);
  EXPECT_GT(last.tokens_per_second(), 0);
  // The workers report the simulator's own timings for the true costs and
  // the cost model has converged to them: measured and predicted bubble use
  // one definition (1 - busy / largest per-rank span), so they agree.
  EXPECT_NEAR(last.predicted_bubble_rate(), last.measured_bubble_rate(), 1e-6);
  for (const v1::StageStepStats& s : last.stages()) {
    EXPECT_NEAR(s.predicted_bubble_rate(), s.measured_bubble_rate(), 1e-6) << s.stage();
  }
  // Workers were aborted (released) at the end and are idle again.
  for (const auto& w : workers) EXPECT_EQ(w.aborts, 1);
  EXPECT_EQ(coordinator_->WorkerCounts().at("IDLE"), 4);
}

TEST_F(CoordinatorTest, PublishedVersionIsOneMessageSharedByEveryOutbox) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  RunSteps(workers, TrueCosts(spec, 2, 1.5), 19);
  ASSERT_FALSE(workers[0].schedule_messages.empty());
  const SessionMessage& first = workers[0].schedule_messages[0];
  EXPECT_EQ(first->schedule().version(), 2);
  EXPECT_EQ(first->sequence(), 0);  // The stream's writer numbers it.
  for (const auto& w : workers) {
    ASSERT_FALSE(w.schedule_messages.empty());
    // The same object, not an equal copy.
    EXPECT_EQ(w.schedule_messages[0].get(), first.get());
  }
}

// A validation-mode switch published while a re-solve runs keeps the
// schedule: the re-solved candidate is still published after it, and takes
// the new mode.
TEST_F(CoordinatorTest, ModeSwitchDuringAResolveDoesNotDiscardItsCandidate) {
  background_resolves_ = true;
  validation_policy_.post_after_clean_steps = 1;
  Start(":memory:");
  v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  spec.set_validation(v1::VALIDATION_MODE_AUTO);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  absl::Notification started;
  absl::Notification release;
  HoldFirstResolve(started, release);
  // Steps without validation results until the first re-solve waits.
  int64_t step = 0;
  for (; step < 10 && !started.HasBeenNotified(); ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_LE(step, w.granted);
      ASSERT_TRUE(coordinator_->ReportStep(w.Report(step, truth)).ok());
    }
    // The re-solve runs on its thread; give it time to reach the hook.
    started.WaitForNotificationWithTimeout(absl::Milliseconds(500));
  }
  ASSERT_TRUE(started.HasBeenNotified());
  // Meanwhile one clean outcome: AUTO switches to POST (version 2).
  for (auto& w : workers) {
    w.Drain();
    ASSERT_LE(step, w.granted);
    ASSERT_TRUE(
        coordinator_->ReportStep(WithCleanValidation(w.Report(step, truth), step)).ok());
  }
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->schedule_version(), 2);
  release.Notify();
  coordinator_->WaitForResolves();
  auto job = coordinator_->GetJob(job_id, {});
  ASSERT_EQ(job->schedule_version(), 3) << "the re-solve was discarded";
  workers[0].Drain();
  const std::vector<v1::ScheduleVersion>& versions = workers[0].versions;
  ASSERT_EQ(versions.size(), 3u);
  EXPECT_EQ(versions[1].reason(), v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  EXPECT_EQ(versions[1].validation(), v1::VALIDATION_MODE_POST);
  EXPECT_EQ(versions[2].reason(), v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  EXPECT_EQ(versions[2].validation(), v1::VALIDATION_MODE_POST);
  EXPECT_GT(versions[2].effective_step(), versions[1].effective_step());
  EXPECT_NE(versions[2].schedule().SerializeAsString(),
            versions[1].schedule().SerializeAsString());
}

TEST_F(CoordinatorTest, BackgroundResolveLetsReportStepReturnFirst) {
  background_resolves_ = true;
  Start(":memory:");
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  // The first re-solve blocks in the hook until this thread has made (and
  // got back from) every report it can; with the solver on the reporting
  // thread the hook would run inside a ReportStep below instead.
  absl::Notification started;
  absl::Notification release;
  std::atomic<int> reports_returned{0};
  int reports_made = 0;
  int returned_when_released = -1;
  std::thread::id hook_thread;
  int hooks = 0;
  resolve_hook_ = [&](const std::string&) {
    if (hooks++ > 0) return;
    hook_thread = std::this_thread::get_id();
    started.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(10));
    returned_when_released = reports_returned.load();
  };
  for (int64_t step = 0; step < 6; ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_LE(step, w.granted);
      ++reports_made;
      ASSERT_TRUE(coordinator_->ReportStep(w.Report(step, truth)).ok());
      ++reports_returned;
    }
  }
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  release.Notify();
  coordinator_->WaitForResolves();
  EXPECT_NE(hook_thread, std::this_thread::get_id());
  EXPECT_EQ(returned_when_released, reports_made);
  // The queued re-solve still publishes, and every worker switches at the
  // same step.
  RunSteps(workers, truth, 19);
  coordinator_->WaitForResolves();
  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->state_message();
  EXPECT_GE(job->schedule_version(), 2);
  for (int64_t step = 0; step < 20; ++step) {
    for (const auto& w : workers) {
      EXPECT_EQ(w.version_of_step.at(step),
                workers[0].version_of_step.at(step));
    }
  }
}

// The retention/re-solve race: job B's re-solve waits in the resolver's
// queue (behind job A's, held in the hook) while B is cancelled and erased
// by the retention. The queued task owns what it solves with (its copies
// and a share of the policy), so it is solved after B is gone and its
// result, finding no job, is dropped: nothing stored for B, nothing
// published to anyone. (Under AddressSanitizer a task pointing into the
// erased job fails here as a heap use-after-free.)
TEST_F(CoordinatorTest, AReSolveQueuedForAJobErasedMeanwhileTouchesNothingOfIt) {
  background_resolves_ = true;
  retained_finished_jobs_ = 1;
  Start(":memory:");
  const v1::JobSpec spec = Uncalibrated(TestSpec(2, 4, "zb-1p", 20, 2));
  const sched::Problem truth = TrueCosts(spec, 1, 1.5);
  const std::string a = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers_a = {AddWorker(0), AddWorker(1)};
  const std::string b = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers_b = {AddWorker(2), AddWorker(3)};
  for (int round = 0; round < 2; ++round) {
    HeartbeatAll(workers_a);
    HeartbeatAll(workers_b);
  }
  ASSERT_EQ(coordinator_->GetJob(b, {})->state(), v1::JOB_STATE_RUNNING);
  absl::Notification a_solved;
  absl::Notification release;
  std::atomic<int> b_solved{0};
  std::atomic<bool> b_gone_when_solved{false};
  resolve_hook_ = [&](const std::string& id) {
    if (id == b) {
      ++b_solved;
      b_gone_when_solved = absl::IsNotFound(coordinator_->GetJob(b, {}).status());
    } else if (!a_solved.HasBeenNotified()) {
      a_solved.Notify();
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
  };
  RunSteps(workers_a, truth, 1);  // A's window ends: its re-solve holds the thread.
  ASSERT_TRUE(a_solved.WaitForNotificationWithTimeout(absl::Seconds(10)));
  RunSteps(workers_b, truth, 1);  // B's is queued behind it.
  ASSERT_TRUE(coordinator_->CancelJob(b, "").ok());
  // A newer finished job, then the retention (one kept, never the newest):
  // B goes.
  const std::string c = coordinator_->SubmitJob(spec)->id();
  ASSERT_TRUE(coordinator_->CancelJob(c, "").ok());
  coordinator_->Tick();
  ASSERT_TRUE(absl::IsNotFound(coordinator_->GetJob(b, {}).status()));

  release.Notify();
  coordinator_->WaitForResolves();
  EXPECT_EQ(b_solved.load(), 1);
  EXPECT_TRUE(b_gone_when_solved.load());
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const auto b_records = store_->ListResolveRecords(b);
  EXPECT_TRUE(!b_records.ok() || b_records->empty());
  const auto b_costs = store_->ListCostSnapshots(b);
  EXPECT_TRUE(!b_costs.ok() || b_costs->empty());
  // A's re-solve was recorded as ever; B's workers heard of no version 2.
  EXPECT_EQ(store_->ListResolveRecords(a)->size(), 1u);
  for (FakeWorker& w : workers_b) {
    w.Drain();
    for (const v1::ScheduleVersion& v : w.versions) EXPECT_EQ(v.version(), 1);
  }
}

TEST_F(CoordinatorTest, NewVersionTakesEffectAfterEveryGrant) {
  std::string job_id;
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 40, 2));
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  RunSteps(workers, TrueCosts(spec, 2, 1.5), 5);
  for (auto& w : workers) w.Drain();
  ASSERT_GE(workers[0].versions.size(), 2u);
  const int64_t effective = workers[0].versions[1].effective_step();
  for (const auto& w : workers) {
    // Same step everywhere, and no grant held at arrival reached it.
    EXPECT_EQ(w.versions[1].effective_step(), effective);
    EXPECT_LT(w.granted_at_version[0], effective);
  }
}

TEST_F(CoordinatorTest, HopLatenciesBecomeTheCostModelsCommSeconds) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  const double one_way = truth.virtual_stages[0].f_seconds / 2;
  for (auto& w : workers) w.one_way_seconds = one_way;
  RunSteps(workers, truth, 19);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const StoredState stored = *store_->LoadAll();
  ASSERT_GE(stored.schedule_versions.size(), 2u);
  const v1::ScheduleVersion& first = stored.schedule_versions[0];
  EXPECT_EQ(first.cost_model().comm_seconds(), 0);
  // The re-solve ran on the measured T_comm.
  EXPECT_DOUBLE_EQ(stored.schedule_versions[1].cost_model().comm_seconds(),
                   one_way);
  // Step 0's prediction: version 1 simulated on the true costs plus the
  // reported T_comm, not on the true costs alone.
  sched::Problem with_comm = truth;
  with_comm.comm_seconds = one_way;
  const sched::Schedule schedule = *ScheduleFromProto(first.schedule());
  const double expected =
      PredictionToProto(*sched::Simulate(with_comm, schedule)).bubble_rate();
  const double without =
      PredictionToProto(*sched::Simulate(truth, schedule)).bubble_rate();
  ASSERT_GT(expected, without + 0.01);
  auto summaries = store_->ListStepSummaries(job_id, 0, 1);
  ASSERT_EQ(summaries->size(), 1u);
  EXPECT_NEAR((*summaries)[0].predicted_bubble_rate(), expected, 1e-6);
}

}  // namespace
}  // namespace zbpp::coordinator
