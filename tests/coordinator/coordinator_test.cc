// The coordinator core with a FakeClock and an in-memory SQLite store: no
// gRPC, no sleeps. Fake workers here call the core directly and drain their
// Session outboxes without blocking.

#include "coordinator/core/coordinator.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "api/schedule_proto.h"
#include "common/clock.h"
#include "coordinator/core/planning.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TestSpec;
using testing::TrueCosts;
using testing::TrueTimings;
using testing::CoordinatorTest;
using testing::FakeWorker;

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

// Options that only the parts check (the WorkerRegistry's bounds) are refused
// too, and the half-built coordinator goes away cleanly.
TEST(CoordinatorOptions, BadOptionsAreInvalidArgument) {
  FakeClock clock;
  std::unique_ptr<SqliteStore> store = *SqliteStore::Create({":memory:"});
  Coordinator::Options options;
  options.clock = &clock;
  options.store = store.get();
  ASSERT_TRUE(Coordinator::Create(options).ok());
  for (auto bad : std::vector<std::function<void(Coordinator::Options&)>>{
           [](Coordinator::Options& o) { o.store = nullptr; },
           [](Coordinator::Options& o) { o.grant_lookahead_steps = 1; },
           [](Coordinator::Options& o) { o.max_workers = 0; },
           [](Coordinator::Options& o) { o.lost_worker_retention_seconds = -1; },
           [](Coordinator::Options& o) { o.store_retry_initial_backoff = absl::ZeroDuration(); },
       }) {
    Coordinator::Options changed = options;
    bad(changed);
    EXPECT_EQ(Coordinator::Create(changed).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(CoordinatorTest, SubmitStoresPendingJob) {
  auto job = coordinator_->SubmitJob(TestSpec());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(job->last_checkpoint_step(), -1);
  EXPECT_TRUE(store_->GetJob(job->id()).ok());
  auto listed = coordinator_->ListJobs({});
  ASSERT_EQ(listed->jobs_size(), 1);
  EXPECT_EQ(listed->jobs(0).id(), job->id());
}

TEST_F(CoordinatorTest, BadSpecsChangeNothing) {
  ASSERT_TRUE(coordinator_->SubmitJob(TestSpec()).ok());
  struct Case {
    std::string field;
    std::function<void(v1::JobSpec&)> mutate;
  };
  std::vector<Case> cases = {
      {"pipeline.microbatches",
       [](v1::JobSpec& s) { s.mutable_pipeline()->set_microbatches(0); }},
      {"pipeline.microbatches",
       [](v1::JobSpec& s) { s.mutable_pipeline()->set_microbatches(-3); }},
      {"model.layers", [](v1::JobSpec& s) { s.mutable_model()->set_layers(7); }},
      {"schedule.name",
       [](v1::JobSpec& s) { s.mutable_schedule()->set_name("zb-h3"); }},
      {"schedule.memory_limit_m_b",
       [](v1::JobSpec& s) { s.mutable_schedule()->set_memory_limit_m_b(0.5); }},
      {"dataset", [](v1::JobSpec& s) { s.clear_dataset(); }},
  };
  for (const Case& c : cases) {
    v1::JobSpec spec = TestSpec();
    c.mutate(spec);
    auto job = coordinator_->SubmitJob(spec);
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument)
        << c.field;
    EXPECT_THAT(std::string(job.status().message()), HasSubstr(c.field));
    EXPECT_EQ(coordinator_->ListJobs({})->jobs_size(), 1) << c.field;
  }
  EXPECT_EQ(store_->LoadAll()->jobs.size(), 1u);
}

TEST_F(CoordinatorTest, AssignsWhenEnoughWorkersThenRuns) {
  auto job = coordinator_->SubmitJob(TestSpec());
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(AddWorker(i));
  EXPECT_EQ(coordinator_->GetJob(job->id(), {})->state(),
            v1::JOB_STATE_PENDING);
  workers.push_back(AddWorker(3));
  auto assigning = coordinator_->GetJob(job->id(), v1::JOB_VIEW_FULL);
  EXPECT_EQ(assigning->state(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(assigning->schedule_version(), 1);
  EXPECT_EQ(assigning->schedule().reason(),
            v1::SCHEDULE_CHANGE_REASON_INITIAL);
  EXPECT_EQ(assigning->assignments_size(), 4);
  for (int r = 0; r < 4; ++r) {
    workers[r].Drain();
    ASSERT_TRUE(workers[r].assignment.has_value());
    EXPECT_EQ(workers[r].assignment->stage(), r);
    EXPECT_EQ(workers[r].assignment->attempt(), 1);
    EXPECT_EQ(workers[r].assignment->peers_size(), 4);
    EXPECT_EQ(workers[r].granted, 1);  // Lookahead 2 from step -1.
  }
  HeartbeatAll(workers);
  EXPECT_EQ(coordinator_->GetJob(job->id(), {})->state(),
            v1::JOB_STATE_RUNNING);
  auto listed = coordinator_->ListWorkers({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->workers_size(), 4);
  EXPECT_EQ(listed->workers(0).state(), v1::WORKER_STATE_RUNNING);
}

TEST_F(CoordinatorTest, JobThatFitsNoWorkersMemoryWaitsSayingWhy) {
  // A 2^20-token vocabulary at hidden 256: 2^28 embedding parameters on
  // rank 0 and as many in the LM head on rank 1, 28 bytes each (weights,
  // gradient, AdamW moments, rollback copy): about 7 GiB per rank, and on
  // rank 1 0.375 GiB of logits (32 x 2^20 float32 elements, 12 bytes each).
  v1::JobSpec big = TestSpec(/*stages=*/2);
  big.mutable_model()->set_vocab(1 << 20);
  big.mutable_model()->set_hidden(256);
  auto job = coordinator_->SubmitJob(big);
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(AddWorker(i));  // 1 GiB.
  auto waiting = coordinator_->GetJob(job->id(), {});
  EXPECT_EQ(waiting->state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(waiting->state_message(),
              HasSubstr("pipeline rank 1 needs about 7."));
  EXPECT_THAT(waiting->state_message(), HasSubstr("384.00 MiB of logits"));
  EXPECT_THAT(waiting->state_message(),
              HasSubstr("largest free: 1073741824 bytes"));

  // A small job behind it is not held up by the workers it cannot use.
  auto small = coordinator_->SubmitJob(TestSpec(/*stages=*/2));
  EXPECT_EQ(coordinator_->GetJob(small->id(), {})->state(),
            v1::JOB_STATE_ASSIGNING);

  // Two workers with enough memory: the big job runs on them.
  for (int i = 2; i < 4; ++i) {
    workers.push_back(AddWorker(i, uint64_t{16} << 30));
  }
  auto assigned = coordinator_->GetJob(job->id(), v1::JOB_VIEW_FULL);
  EXPECT_EQ(assigned->state(), v1::JOB_STATE_ASSIGNING);
  ASSERT_EQ(assigned->assignments_size(), 2);
  EXPECT_EQ(assigned->assignments(0).worker_id(), workers[2].id);
  EXPECT_EQ(assigned->assignments(1).worker_id(), workers[3].id);
}

TEST_F(CoordinatorTest, LogitsOfALargeVocabularyCountInTheMemoryCheck) {
  // A 2^20-token vocabulary at hidden 64: 2^26 parameters at each end, about
  // 1.75 GiB of weights and optimizer state per rank, and tiny activations
  // per block; but the last rank's logits of one microbatch, 2 x 512 x 2^20
  // elements at 12 bytes (logits, log-softmax, gradient), are 12 GiB: the
  // job does not fit workers of 11.8 GiB.
  v1::JobSpec big = TestSpec(/*stages=*/2);
  big.mutable_model()->set_vocab(1 << 20);
  big.mutable_model()->set_seq_len(512);
  big.mutable_pipeline()->set_microbatch_size(2);
  auto job = coordinator_->SubmitJob(big);
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(AddWorker(i, static_cast<uint64_t>(11.8 * (uint64_t{1} << 30))));
  }
  auto waiting = coordinator_->GetJob(job->id(), {});
  EXPECT_EQ(waiting->state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(waiting->state_message(), HasSubstr("pipeline rank 1 needs about 13."));
  EXPECT_THAT(waiting->state_message(), HasSubstr("12.00 GiB of logits"));
}

// `spec` running, from a schedule file, the schedule that its named
// generator makes for it.
v1::JobSpec AsScheduleFile(v1::JobSpec spec) {
  const sched::Schedule schedule =
      *sched::Generate(spec.schedule().name(), *InitialProblem(spec));
  spec.mutable_schedule()->clear_name();
  spec.mutable_schedule()->set_file("zb-1p.json");
  spec.mutable_schedule()->set_file_text(sched::ScheduleToJson(schedule));
  return spec;
}

// The straggler of StragglerResolvePublishesShorterVersionAllSwitchTogether
// with the same schedule given as a file: kept for the whole job unless a
// re-solve is asked for (resolve.disabled: false).
class ScheduleFileTest : public CoordinatorTest,
                         public ::testing::WithParamInterface<bool> {};

TEST_P(ScheduleFileTest, RunsAsWrittenAndIsResolvedOnlyWhenAsked) {
  const bool resolve = GetParam();
  const v1::JobSpec named = TestSpec(4, 8, "zb-1p", 20, 2);
  const sched::Problem truth = TrueCosts(named, 2, 1.5);
  v1::JobSpec spec = AsScheduleFile(named);
  if (resolve) {
    spec.mutable_schedule()->mutable_resolve()->set_disabled(false);
  }
  {
    std::string job_id;
    std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
    const auto first = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->schedule().schedule().name(), "zb-1p");
    const sched::Schedule written =
        *sched::ScheduleFromJson(spec.schedule().file_text());
    for (int w = 0; w < 4; ++w) {
      const auto& actions = first->schedule().schedule().stage_actions(w);
      ASSERT_EQ(actions.actions_size(), written.actions[w].size());
      for (int i = 0; i < actions.actions_size(); ++i) {
        EXPECT_EQ(actions.actions(i), sched::ActionToString(written.actions[w][i]));
      }
    }
    RunSteps(workers, truth, 19);
    const auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
    EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->state_message();
    if (resolve) {
      EXPECT_GE(job->schedule_version(), 2);
    } else {
      EXPECT_EQ(job->schedule_version(), 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ResolveAsked, ScheduleFileTest, ::testing::Bool());

TEST_F(CoordinatorTest, ResolveIsNotPublishedWhenTheAttemptChangedWhileSolving) {
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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
  absl::StatusOr<TimedSchedule> measured = MeasuredLastStep(*job);
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
  v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 2, 2);
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
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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
  v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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

TEST_F(CoordinatorTest, NewVersionTakesEffectAfterEveryGrant) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 40, 2);
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

TEST_F(CoordinatorTest, SilentWorkerSendsJobToRecoveringThenReassigns) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  RunSteps(workers, TrueCosts(spec, 2, 1.0), 1);
  // Three keep heartbeating, worker 3 is silent.
  SilenceUntilLost(workers, 3);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(), HasSubstr(workers[3].id));
  EXPECT_EQ(job->recoveries_total(), 1);
  EXPECT_EQ(coordinator_->ListWorkers({})->workers_size(), 3);
  workers[3].Drain();
  EXPECT_EQ(workers[3].closed.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_->Heartbeat(workers[3].id, {}).code(),
            absl::StatusCode::kNotFound);
  for (int i = 0; i < 3; ++i) {
    workers[i].Drain();
    EXPECT_EQ(workers[i].aborts, 1);
  }
  // A replacement registers: attempt 2 from step 0 (no checkpoint). The
  // survivors are assignable again once a heartbeat says they dropped the
  // aborted attempt; a second round takes the assignment and acknowledges.
  workers[3] = AddWorker(9);
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  for (auto& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->attempt(), 2);
    EXPECT_EQ(w.assignment->start_step(), 0);
  }
  // Reports of the old attempt are refused.
  v1::ReportStepRequest stale = workers[0].Report(0, TrueCosts(spec, 2, 1.0));
  stale.set_attempt(1);
  EXPECT_EQ(coordinator_->ReportStep(stale).code(),
            absl::StatusCode::kFailedPrecondition);
}

// An error in the job itself (a checkpoint that does not match, a corpus
// that is missing) fails every attempt the same way: after
// max_recoveries_without_progress (3) recoveries the job FAILS instead of
// recovering forever.
TEST_F(CoordinatorTest, RepeatedFailuresWithoutProgressFailTheJob) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  for (int attempt = 1; attempt <= 4; ++attempt) {
    ASSERT_NO_FATAL_FAILURE(RunThenFailAttempt(
        workers, job_id, attempt, 1,
        "checkpoint /c/step-00000004/rank-001.pt does not match the model"));
    const auto job = coordinator_->GetJob(job_id, {});
    if (attempt <= 3) {
      EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING) << "attempt " << attempt;
    } else {
      EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
      EXPECT_THAT(job->state_message(), HasSubstr("does not match the model"));
      EXPECT_THAT(job->state_message(), HasSubstr("3 recoveries made no progress"));
    }
  }
}

TEST_F(CoordinatorTest, JobErrorFailsTheJobWithoutRecovering) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  v1::Heartbeat failed;
  failed.set_phase(v1::WORKER_PHASE_FAILED);
  failed.set_job_id(job_id);
  failed.set_attempt(1);
  failed.set_error("dataset.text_file /no/such: No such file or directory");
  failed.set_job_error(true);
  ASSERT_TRUE(coordinator_->Heartbeat(workers[0].id, failed).ok());
  const auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job->recoveries_total(), 0);
  EXPECT_THAT(job->state_message(), HasSubstr("/no/such"));
}

TEST_F(CoordinatorTest, CancelAbortsWorkersAndIsFinal) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  auto watch = coordinator_->WatchJob(job_id);
  ASSERT_TRUE(watch.ok());
  auto cancelled = coordinator_->CancelJob(job_id, "enough");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(cancelled->state_message(), "enough");
  EXPECT_TRUE(cancelled->has_end_time());
  for (auto& w : workers) {
    w.Drain();
    EXPECT_EQ(w.aborts, 1);
  }
  EXPECT_EQ(coordinator_->CancelJob(job_id, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->CancelJob("job-99", "").status().code(),
            absl::StatusCode::kNotFound);
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE((*watch)->Pop(absl::InfinitePast(), &events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].has_snapshot());
  EXPECT_EQ(events[1].state_change().new_state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(events[1].sequence(), events[0].sequence() + 1);
  events.clear();
  EXPECT_EQ((*watch)->Pop(absl::InfinitePast(), &events).code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(CoordinatorTest, WatchDropsStepEventsForSlowReaderOnly) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 40, 100);
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  auto watch = coordinator_->WatchJob(job_id);
  RunSteps(workers, TrueCosts(spec, 2, 1.0), 39);
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE((*watch)->Pop(absl::InfinitePast(), &events).ok());
  int steps = 0;
  bool succeeded = false;
  for (const auto& e : events) {
    steps += e.has_step();
    succeeded |= e.has_state_change() &&
                 e.state_change().new_state() == v1::JOB_STATE_SUCCEEDED;
  }
  EXPECT_EQ(steps, 40);  // Capacity 256: nothing dropped.
  EXPECT_TRUE(succeeded);
  EXPECT_EQ(coordinator_->WatchJob("nope").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorTest, ValidationOutcomesCountRollbacksAndSkips) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.0);
  for (auto& w : workers) w.Drain();
  for (int64_t step = 0; step < 2; ++step) {
    for (auto& w : workers) {
      v1::ReportStepRequest r = w.Report(step, truth);
      if (step == 1) {
        v1::ValidationResult* v = r.add_validations();
        v->set_step(0);
        v->set_mode(v1::VALIDATION_MODE_POST);
        v->set_found_inf_nan(true);
        v->set_decision(v1::VALIDATION_DECISION_SKIPPED);
        v->set_rolled_back(w.assignment->stage() < 2);
        v->set_rollback_seconds(0.5);
      }
      ASSERT_TRUE(coordinator_->ReportStep(r).ok());
      ++w.next_step;
    }
  }
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->rollbacks_total(), 1);
  EXPECT_EQ(job->skipped_steps_total(), 1);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto outcomes = store_->ListValidationOutcomes(job_id);
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].rolled_back_stages_size(), 2);
  EXPECT_TRUE(std::isnan((*outcomes)[0].global_grad_norm())) << "inf/nan: no norm";
  EXPECT_DOUBLE_EQ((*outcomes)[0].rollback_seconds(), 2.0);
}

// JobSpec.validation AUTO: synchronous first, POST after 10 steps that
// needed nothing (announced as a version at a step no worker was granted),
// back to SYNCHRONOUS after 3 clipped steps (and POST again after 10 clean
// ones); every worker sees the switch
// at the same step, and the last step's parameter sums add up to the job's
// param_checksum.
TEST_F(CoordinatorTest, AutoValidationSwitchesModeLikeAScheduleVersion) {
  v1::JobSpec spec = TestSpec(2, 4, "zb-h1", 40);
  spec.mutable_schedule()->mutable_resolve()->set_min_improvement(0.9);  // No re-solves.
  spec.set_validation(v1::VALIDATION_MODE_AUTO);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  // Clipped outcomes for steps 20..22, committed otherwise.
  auto decision = [](int64_t step) {
    return step >= 20 && step <= 22 ? v1::VALIDATION_DECISION_CLIPPED
                                     : v1::VALIDATION_DECISION_COMMITTED;
  };
  for (int64_t step = 0; step < 40; ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_GE(w.granted, step);
      v1::ReportStepRequest r = w.Report(step, truth);
      const v1::ScheduleVersion& version = w.VersionFor(step);
      v1::ValidationResult* v = r.add_validations();
      v->set_step(step);
      v->set_mode(version.validation());
      v->set_decision(decision(step));
      v->set_clip_coefficient(decision(step) == v1::VALIDATION_DECISION_CLIPPED ? 0.5 : 1);
      if (step == 39) r.set_parameter_sum(w.assignment->stage() == 0 ? 1.25 : -0.5);
      ASSERT_TRUE(coordinator_->ReportStep(r).ok()) << step;
    }
  }
  auto job = coordinator_->GetJob(job_id, {});
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job->clipped_steps_total(), 3);
  EXPECT_DOUBLE_EQ(job->param_checksum(), 0.75);
  // Versions: 1 synchronous, 2 POST (after step 9's outcome), 3 synchronous
  // (after step 22's, the third clipped step), 4 POST again (after step 32's,
  // ten clean steps later).
  const std::vector<v1::ScheduleVersion>& versions = workers[0].versions;
  ASSERT_EQ(versions.size(), 4u);
  EXPECT_EQ(versions[0].validation(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_EQ(versions[1].validation(), v1::VALIDATION_MODE_POST);
  EXPECT_EQ(versions[1].reason(), v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  EXPECT_GT(versions[1].effective_step(), 9);
  EXPECT_EQ(versions[2].validation(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_GT(versions[2].effective_step(), 22);
  EXPECT_EQ(versions[3].validation(), v1::VALIDATION_MODE_POST);
  EXPECT_GT(versions[3].effective_step(), 32);
  EXPECT_EQ(job->validation_mode(), v1::VALIDATION_MODE_POST);
  for (size_t i = 1; i < versions.size(); ++i) {
    EXPECT_EQ(versions[i].schedule().SerializeAsString(),
              versions[0].schedule().SerializeAsString())
        << "a mode switch keeps the schedule";
    for (const FakeWorker& w : workers) {
      // Announced before any grant reached the version's first step.
      EXPECT_LT(w.granted_at_version[i - 1], versions[i].effective_step());
      EXPECT_EQ(w.versions[i].effective_step(), versions[i].effective_step());
    }
  }
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto outcomes = store_->ListValidationOutcomes(job_id);
  ASSERT_TRUE(outcomes.ok());
  EXPECT_EQ(outcomes->size(), 40u);
}

TEST_F(CoordinatorTest, ValidationOfAStepNotRunIsRefused) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  workers[0].Drain();
  v1::ReportStepRequest r = workers[0].Report(0, TrueCosts(TestSpec(), 2, 1.0));
  r.add_validations()->set_step(1);
  const absl::Status refused = coordinator_->ReportStep(r);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("validations[0].step"), std::string::npos) << refused;
}

TEST_F(CoordinatorTest, CheckpointRecordedOnlyWhenEveryRankWroteIt) {
  v1::JobSpec spec = TestSpec(2, 4, "zb-h1", 10);
  spec.mutable_checkpoint()->set_interval_steps(2);
  spec.mutable_checkpoint()->set_directory("/ckpt");
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  // Step 1: both ranks wrote it; step 3: only rank 0 did.
  auto written = [](int64_t step, int rank) {
    return step == 1 || (step == 3 && rank == 0);
  };
  std::vector<int64_t> recorded;
  for (int64_t step = 0; step < 4; ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_GE(w.granted, step);
      v1::ReportStepRequest r = w.Report(step, truth);
      r.set_checkpoint_written(written(step, w.assignment->stage()));
      ASSERT_TRUE(coordinator_->ReportStep(r).ok());
      ++w.next_step;
    }
    recorded.push_back(
        coordinator_->GetJob(job_id, {})->last_checkpoint_step());
  }
  EXPECT_EQ(recorded, (std::vector<int64_t>{-1, 1, 1, 1}));
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto stored = store_->LoadAll();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->checkpoints.size(), 1u);
  EXPECT_EQ(stored->checkpoints[0].step, 1);
  EXPECT_EQ(stored->checkpoints[0].directory, "/ckpt");
  EXPECT_TRUE(stored->checkpoints[0].complete);
}

TEST_F(CoordinatorTest, RegisterWorkerChecksItsInput) {
  v1::WorkerDescription good;
  good.set_address("10.0.0.1:7000");
  good.set_host("node");
  good.set_device_kind(v1::DEVICE_KIND_CPU);
  good.set_memory_bytes(1 << 30);
  good.set_name(std::string(253, 'n'));
  ASSERT_TRUE(coordinator_->RegisterWorker(good).ok());
  const std::vector<std::pair<std::function<void(v1::WorkerDescription&)>, std::string>> bad = {
      {[](auto& d) { d.set_host(std::string(3 << 20, 'h')); },
       "worker.host: must be at most 253 bytes, got 3145728"},
      {[](auto& d) { d.set_address(std::string(262, 'a')); },
       "worker.address: must be at most 261 bytes, got 262"},
      {[](auto& d) { d.set_name(std::string(254, 'n')); },
       "worker.name: must be at most 253 bytes, got 254"},
      {[](auto& d) { d.set_device_name(std::string(1000, 'g')); },
       "worker.device_name: must be at most 253 bytes, got 1000"},
      {[](auto& d) { d.set_device_kind(static_cast<v1::DeviceKind>(7)); },
       "worker.device_kind: unknown kind 7"},
      {[](auto& d) { d.set_device_index(-1); }, "worker.device_index: must be >= 0, got -1"},
  };
  for (const auto& [mutate, message] : bad) {
    v1::WorkerDescription d = good;
    mutate(d);
    const absl::StatusOr<v1::RegisterWorkerResponse> refused = coordinator_->RegisterWorker(d);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_EQ(std::string(refused.status().message()), message);
  }
}

TEST_F(CoordinatorTest, ReportStepChecksItsInput) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.0);
  workers[0].Drain();
  v1::ReportStepRequest r = workers[0].Report(0, truth);
  v1::ReportStepRequest bad = r;
  bad.add_action_end_seconds(1);
  EXPECT_EQ(coordinator_->ReportStep(bad).code(),
            absl::StatusCode::kInvalidArgument);
  bad = r;
  bad.set_worker_id("worker-77");
  EXPECT_EQ(coordinator_->ReportStep(bad).code(), absl::StatusCode::kNotFound);
  bad = r;
  bad.set_step(5);  // Not granted.
  EXPECT_EQ(coordinator_->ReportStep(bad).code(),
            absl::StatusCode::kInvalidArgument);
  bad = r;
  bad.set_schedule_version(2);
  EXPECT_EQ(coordinator_->ReportStep(bad).code(),
            absl::StatusCode::kInvalidArgument);
  // Measurements out of range, each refused naming its field.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::function<void(v1::ReportStepRequest&)>, std::string>>
      out_of_range = {
          {[&](auto& b) { b.set_step_seconds(nan); }, "step_seconds: must be a finite time"},
          {[](auto& b) { b.set_idle_seconds(-1); }, "idle_seconds: must be a finite time"},
          {[](auto& b) { b.set_comm_seconds(1e308); }, "comm_seconds: 1e+308 is longer than"},
          {[](auto& b) { b.set_action_start_seconds(0, -1); },
           "action_start_seconds[0]: must be a finite time"},
          {[](auto& b) { b.set_eval_loss(-std::numeric_limits<double>::infinity()); },
           "eval_loss: must be >= 0"},
          {[](auto& b) { b.set_loss(-0.5); }, "loss: must be >= 0"},
          {[&](auto& b) { b.set_parameter_sum(nan); }, "parameter_sum: must be finite"},
          {[&](auto& b) { b.set_local_grad_norm_sq(nan); },
           "local_grad_norm_sq: must be >= 0 unless found_inf_nan"},
          {[](auto& b) {
             v1::ValidationResult* v = b.add_validations();
             v->set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
             v->set_clip_coefficient(5);
           },
           "validations[0].clip_coefficient: must be in [0, 1], got 5"},
          {[](auto& b) {
             v1::ValidationResult* v = b.add_validations();
             v->set_mode(v1::VALIDATION_MODE_POST);
             v->set_decision(static_cast<v1::ValidationDecision>(42));
           },
           "validations[0].decision: unknown decision 42"},
          {[](auto& b) {
             v1::ValidationResult* v = b.add_validations();
             v->set_mode(v1::VALIDATION_MODE_POST);
             v->set_rollback_seconds(-2);
           },
           "validations[0].rollback_seconds: must be a finite time"},
          {[](auto& b) { b.add_validations()->set_mode(v1::VALIDATION_MODE_AUTO); },
           "validations[0].mode: must be SYNCHRONOUS or POST"},
      };
  for (const auto& [mutate, message] : out_of_range) {
    bad = r;
    mutate(bad);
    const absl::Status status = coordinator_->ReportStep(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(message));
  }
  // A divergent step's loss is a fact to record, not a malformed report.
  bad = r;
  bad.set_loss(inf);
  EXPECT_TRUE(coordinator_->ReportStep(bad).ok());
}

TEST_F(CoordinatorTest, HopLatenciesBecomeTheCostModelsCommSeconds) {
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
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

TEST_F(CoordinatorTest, BadHopLatencyIsRejectedAndNothingStored) {
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  workers[1].Drain();
  workers[1].one_way_seconds = 1.0;  // A valid first entry, to rank 2.
  const v1::ReportStepRequest good = workers[1].Report(0, truth);
  workers[1].one_way_seconds.reset();
  struct Case {
    int to_stage;
    double seconds;
    const char* field;
  };
  for (const Case& c :
       {Case{0, -1e-3, "hop_latencies[1].one_way_seconds"},
        Case{0, std::numeric_limits<double>::quiet_NaN(),
             "hop_latencies[1].one_way_seconds"},
        Case{0, std::numeric_limits<double>::infinity(),
             "hop_latencies[1].one_way_seconds"},
        Case{3, 1e-3, "hop_latencies[1].to_stage"},
        Case{1, 1e-3, "hop_latencies[1].to_stage"},
        Case{7, 1e-3, "hop_latencies[1].to_stage"}}) {
    v1::ReportStepRequest bad = good;
    v1::HopLatency* hop = bad.add_hop_latencies();
    hop->set_to_stage(c.to_stage);
    hop->set_one_way_seconds(c.seconds);
    const absl::Status s = coordinator_->ReportStep(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
  // Nothing of the rejected reports reached the cost model: the re-solve
  // of a run without hop latencies sees T_comm = 0, as before.
  RunSteps(workers, truth, 19);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const StoredState stored = *store_->LoadAll();
  ASSERT_GE(stored.schedule_versions.size(), 2u);
  for (const v1::ScheduleVersion& v : stored.schedule_versions) {
    EXPECT_EQ(v.cost_model().comm_seconds(), 0) << "version " << v.version();
  }
}

// A second Session of a live worker is refused, not handed the first one's
// outbox (which would disclose the worker's assignment to the caller); once
// the first has ended the worker may open a new one.
TEST_F(CoordinatorTest, SecondSessionOfALiveWorkerIsRefused) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  FakeWorker& w = workers[0];
  auto second = coordinator_->OpenSession(w.id, w.address);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), ::testing::HasSubstr(w.id));
  w.Drain();
  EXPECT_TRUE(w.closed.ok()) << "the open session was closed: " << w.closed;
  coordinator_->CloseSession(w.id, w.outbox);
  auto reopened = coordinator_->OpenSession(w.id, w.address);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  std::vector<SessionMessage> replayed;
  ASSERT_TRUE((*reopened)->Pop(absl::InfinitePast(), &replayed).ok());
  ASSERT_FALSE(replayed.empty());
  EXPECT_TRUE(replayed[0]->has_assignment());
  EXPECT_EQ(coordinator_->OpenSession("worker-99", "10.0.0.9:7000")
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

// The address is checked whether or not it is given: an empty one is not a
// wildcard.
TEST_F(CoordinatorTest, SessionOpenWithoutTheAddressIsRefused) {
  FakeWorker w = AddWorker(1);
  coordinator_->CloseSession(w.id, w.outbox);
  EXPECT_EQ(coordinator_->OpenSession(w.id, "").status().code(),
            absl::StatusCode::kNotFound);
}

// Only the credential RegisterWorker returned authenticates the worker; the
// coordinator keeps its digest, not the secret.
TEST_F(CoordinatorTest, WorkerCredentialAuthenticatesOnlyItsWorker) {
  FakeWorker a = AddWorker(1);
  FakeWorker b = AddWorker(2);
  EXPECT_EQ(a.credential.size(), 32u);
  EXPECT_EQ(a.credential.find_first_not_of("0123456789abcdef"),
            std::string::npos);
  EXPECT_NE(a.credential, b.credential);
  EXPECT_TRUE(coordinator_->AuthenticateWorker(a.id, a.credential).ok());
  for (const std::string& wrong : {std::string(), b.credential,
                                   a.credential.substr(1), a.credential + "0"}) {
    const absl::Status refused = coordinator_->AuthenticateWorker(a.id, wrong);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << wrong;
    EXPECT_THAT(refused.message(), ::testing::HasSubstr(a.id));
    EXPECT_THAT(refused.message(),
                ::testing::Not(::testing::HasSubstr(a.credential)));
  }
  EXPECT_EQ(coordinator_->AuthenticateWorker("worker-99", a.credential).code(),
            absl::StatusCode::kNotFound);
}

// One heartbeat cannot make the coordinator store megabytes: its error is
// cut to kMaxHeartbeatErrorBytes, with a marker, in the job's message too.
TEST_F(CoordinatorTest, HeartbeatErrorIsCapped) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  HeartbeatAll(workers);
  v1::Heartbeat failed;
  failed.set_phase(v1::WORKER_PHASE_FAILED);
  failed.set_job_id(job_id);
  failed.set_attempt(workers[0].assignment->attempt());
  failed.set_job_error(true);
  failed.set_error(std::string(3 << 20, 'x'));
  ASSERT_TRUE(coordinator_->Heartbeat(workers[0].id, failed).ok());
  absl::StatusOr<v1::Job> job = coordinator_->GetJob(job_id, v1::JOB_VIEW_BASIC);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_LT(job->state_message().size(),
            Coordinator::kMaxHeartbeatErrorBytes + 100);
  EXPECT_THAT(job->state_message(), ::testing::HasSubstr("[... truncated]"));
}

TEST_F(CoordinatorTest, RendezvousOnlyForTheAttemptsWorkers) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  FakeWorker outsider = AddWorker(8);
  workers[0].Drain();
  const std::string scope = workers[0].assignment->rendezvous_scope();
  EXPECT_TRUE(coordinator_->CheckRendezvousAccess(workers[1].id, scope).ok());
  EXPECT_EQ(coordinator_->CheckRendezvousAccess(outsider.id, scope).code(),
            absl::StatusCode::kPermissionDenied);
  RendezvousStore& kv = coordinator_->rendezvous();
  ASSERT_TRUE(kv.Set(scope, "a", "1").ok());
  EXPECT_EQ(*kv.Add(scope, "a", 2), 3);
  EXPECT_EQ(*kv.Get(scope, "a", absl::InfinitePast()), "3");
  EXPECT_EQ(kv.Get(scope, "b", absl::InfinitePast()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(kv.Wait(scope, {"a", "b"}, absl::Now() + absl::Milliseconds(5))
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*kv.CompareSet(scope, "c", "", "x"), "x");
  EXPECT_EQ(*kv.CompareSet(scope, "c", "y", "z"), "x");
  ASSERT_TRUE(kv.Set(scope, "s", "text").ok());
  EXPECT_EQ(kv.Add(scope, "s", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The attempt ends: its keys go.
  ASSERT_TRUE(coordinator_->CancelJob(job_id, "").ok());
  EXPECT_EQ(kv.KeyCount(scope), 0);
}

TEST_F(CoordinatorTest, RestartRecoversJobsAndVersions) {
  const std::string path = NewDatabasePath();
  Start(path);
  std::string job_id;
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 40, 2);
  {
    std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
    RunSteps(workers, TrueCosts(spec, 2, 1.5), 9);
  }
  auto before = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_EQ(before->state(), v1::JOB_STATE_RUNNING);
  ASSERT_GE(before->schedule_version(), 2);
  std::string pending_id = coordinator_->SubmitJob(spec)->id();

  Start(path);  // Same file, new process state.
  auto after = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(after->schedule_version(), before->schedule_version());
  EXPECT_EQ(after->steps_completed(), 10);
  EXPECT_EQ(after->schedule().version(), before->schedule_version());
  EXPECT_EQ(coordinator_->GetJob(pending_id, {})->state(),
            v1::JOB_STATE_PENDING);
  // New job ids do not collide with recovered ones.
  auto third = coordinator_->SubmitJob(spec);
  EXPECT_NE(third->id(), job_id);
  EXPECT_NE(third->id(), pending_id);
  // Fresh workers resume the recovering job first, with every version.
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(AddWorker(20 + i));
  HeartbeatAll(workers);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(workers[0].versions.size(),
            static_cast<size_t>(before->schedule_version()));
  RunSteps(workers, TrueCosts(spec, 2, 1.5), 39);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->state(),
            v1::JOB_STATE_SUCCEEDED);
  std::remove(path.c_str());
}

// Validation outcomes are stored when gathered and the job's counters with
// the job afterwards: a crash in between must not lose a count. The
// restarted coordinator recounts from the stored outcomes.
TEST_F(CoordinatorTest, RestartRecountsValidationOutcomes) {
  const std::string path = NewDatabasePath();
  Start(path);
  std::string job_id;
  const v1::JobSpec spec = TestSpec(2, 4, "zb-h1", 20);
  {
    std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
    RunSteps(workers, TrueCosts(spec, 1, 1.0), 4);
  }
  // Outcomes the crashed process stored without its job update.
  v1::ValidationOutcome clipped;
  clipped.set_step(2);
  clipped.set_decision(v1::VALIDATION_DECISION_CLIPPED);
  clipped.add_rolled_back_stages(0);
  ASSERT_TRUE(store_->AddValidationOutcome(job_id, clipped).ok());
  v1::ValidationOutcome skipped;
  skipped.set_step(3);
  skipped.set_decision(v1::VALIDATION_DECISION_SKIPPED);
  ASSERT_TRUE(store_->AddValidationOutcome(job_id, skipped).ok());
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->rollbacks_total(), 0);

  Start(path);
  auto after = coordinator_->GetJob(job_id, {});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->rollbacks_total(), 1);
  EXPECT_EQ(after->clipped_steps_total(), 1);
  EXPECT_EQ(after->skipped_steps_total(), 1);
  std::remove(path.c_str());
}

// After a restart the coordinator numbers workers from 1 again: a worker
// reconnecting with the id the old process gave it must not take over the
// session of the new worker that now holds that id (seen end to end: two
// workers ping-ponged one id and the job never got its second worker).
TEST_F(CoordinatorTest, SessionOpenWithAnIdFromBeforeARestartIsRefused) {
  FakeWorker before = AddWorker(1);  // 10.0.0.1:7000 as worker-1.
  Start(":memory:");                 // Restart: no workers.
  FakeWorker other = AddWorker(2);   // 10.0.0.2:7000, now worker-1.
  ASSERT_EQ(other.id, before.id);
  auto stale = coordinator_->OpenSession(before.id, "10.0.0.1:7000");
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(stale.status().message(),
              ::testing::HasSubstr("registered for 10.0.0.2:7000"));
  other.Drain();
  EXPECT_TRUE(other.closed.ok()) << "the rightful session was closed: "
                                 << other.closed;
  // Nor does its old credential authenticate it as the new worker-1.
  EXPECT_EQ(coordinator_->AuthenticateWorker(before.id, before.credential).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(coordinator_->AuthenticateWorker(other.id, other.credential).ok());
}

TEST_F(CoordinatorTest, ListJobsPagesNewestFirst) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(coordinator_->SubmitJob(TestSpec())->id());
  v1::ListJobsRequest request;
  request.set_page_size(2);
  std::vector<std::string> seen;
  while (true) {
    auto page = coordinator_->ListJobs(request);
    ASSERT_TRUE(page.ok());
    for (const auto& j : page->jobs()) seen.push_back(j.id());
    if (page->next_page_token().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  EXPECT_EQ(seen, std::vector<std::string>(ids.rbegin(), ids.rend()));
  request.set_page_token("garbage");
  EXPECT_EQ(coordinator_->ListJobs(request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zbpp::coordinator
