// The coordinator core's recovery (FakeClock, SQLite store, fake workers
// calling the core): a lost worker sends its job to RECOVERING and a new
// attempt, whose replayed steps replace their stored records; errors in the
// job itself fail it; a restarted coordinator
// recovers jobs, versions and counts from its store file, and refuses the
// ids of workers from before the restart.

#include "coordinator/core/coordinator.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "api/time_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"
#include "tests/coordinator/sqlite_store_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::CoordinatorTest;
using testing::EqualsProto;
using testing::FakeWorker;
using testing::TestSpec;
using testing::TrueCosts;

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

// A worker fails after step 6; the new attempt resumes after checkpoint 3
// and runs steps 4-6 again, on a slower stage 1, clipping step 6 but no
// longer step 5. Those steps' records are stored already: each replayed
// record replaces its first run's (store.h, "Replayed steps") without a
// single store error, so nothing is refused and the store never fails (a
// failing one would pause the job); steps 0-3 keep theirs, and the re-solve
// log keeps both runs' decisions.
TEST_F(CoordinatorTest, ReplayedStepsReplaceTheirRecordsWithoutStoreErrors) {
  v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 12, 2);
  spec.set_validation(v1::VALIDATION_MODE_SYNCHRONOUS);
  spec.mutable_checkpoint()->set_interval_steps(4);
  spec.mutable_checkpoint()->set_directory("/ckpt/{job_id}");
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem first_truth = TrueCosts(spec, 1, 1.5);
  for (int64_t step = 0; step <= 6; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, first_truth, step,
                                step >= 5 ? v1::VALIDATION_DECISION_CLIPPED
                                          : v1::VALIDATION_DECISION_COMMITTED))
        << step;
  }
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->clipped_steps_total(), 2);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const std::vector<v1::StepSummary> first_steps = *store_->ListStepSummaries(job_id, 0, 100);
  ASSERT_EQ(first_steps.size(), 7u);
  const auto first_costs = *store_->ListCostSnapshots(job_id);
  const std::vector<ResolveRecord> first_resolves = *store_->ListResolveRecords(job_id);
  ASSERT_TRUE(std::any_of(first_costs.begin(), first_costs.end(),
                          [](const auto& snapshot) { return snapshot.first >= 4; }))
      << "no re-solve at a step the replay runs again";

  clock_.Advance(absl::Hours(1));
  const absl::Time replay_began = clock_.Now();
  v1::Heartbeat failed;
  failed.set_phase(v1::WORKER_PHASE_FAILED);
  failed.set_job_id(job_id);
  failed.set_attempt(1);
  failed.set_error("CUDA error: an illegal memory access was encountered");
  ASSERT_TRUE(coordinator_->Heartbeat(workers[2].id, failed).ok());
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  ASSERT_EQ(workers[0].assignment->attempt(), 2);
  ASSERT_EQ(workers[0].assignment->start_step(), 4) << "resumes after checkpoint 3";
  const sched::Problem second_truth = TrueCosts(spec, 1, 3.0);
  for (int64_t step = 4; step < 12; ++step) {
    ASSERT_TRUE(ReportStepOnAll(workers, second_truth, step,
                                step == 6 ? v1::VALIDATION_DECISION_CLIPPED
                                          : v1::VALIDATION_DECISION_COMMITTED))
        << step;
  }

  ASSERT_TRUE(coordinator_->FlushStore().ok());
  EXPECT_THAT(faulty_store_->store_errors(), IsEmpty());
  const StoreWriter::Health health = coordinator_->StoreHealth();
  EXPECT_TRUE(health.healthy);
  EXPECT_EQ(health.failed_attempts, 0);
  EXPECT_EQ(health.refused, 0);
  const auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job->recoveries_total(), 1);
  // Step 5's replay did not clip: the job counts the stored outcomes.
  EXPECT_EQ(job->clipped_steps_total(), 1);

  // One summary per step: 0-3 as first stored, 4-6 the replay's.
  const std::vector<v1::StepSummary> steps = *store_->ListStepSummaries(job_id, 0, 100);
  ASSERT_EQ(steps.size(), 12u);
  for (int64_t step = 0; step < 12; ++step) {
    EXPECT_EQ(steps[step].step(), step);
    if (step < 4) {
      EXPECT_THAT(steps[step], EqualsProto(first_steps[step])) << step;
      continue;
    }
    EXPECT_GE(FromTimestamp(steps[step].complete_time()), replay_began) << step;
    EXPECT_EQ(steps[step].schedule_version(), workers[0].version_of_step.at(step)) << step;
    if (step <= 6) {
      EXPECT_GT(steps[step].step_seconds(), first_steps[step].step_seconds()) << step;
    }
  }
  // One outcome per step, the last run's.
  const std::vector<v1::ValidationOutcome> outcomes = *store_->ListValidationOutcomes(job_id);
  ASSERT_EQ(outcomes.size(), 12u);
  for (int64_t step = 0; step < 12; ++step) {
    EXPECT_EQ(outcomes[step].step(), step);
    EXPECT_EQ(outcomes[step].decision(), step == 6 ? v1::VALIDATION_DECISION_CLIPPED
                                                   : v1::VALIDATION_DECISION_COMMITTED)
        << step;
  }
  const StoredState stored = *store_->LoadAll();
  std::vector<int64_t> checkpoints;
  for (const CheckpointRecord& c : stored.checkpoints) checkpoints.push_back(c.step);
  EXPECT_EQ(checkpoints, (std::vector<int64_t>{3, 7, 11}));
  // A snapshot per re-solve step: those before the checkpoint as stored,
  // the replayed ones the replay's (its stage 1 ran 3x slow, not 1.5x).
  const auto costs = *store_->ListCostSnapshots(job_id);
  std::map<int64_t, v1::CostModel> by_step(costs.begin(), costs.end());
  ASSERT_EQ(by_step.size(), costs.size());
  for (const auto& [step, first] : first_costs) {
    ASSERT_TRUE(by_step.count(step)) << step;
    if (step < 4) {
      EXPECT_THAT(by_step[step], EqualsProto(first)) << step;
    } else {
      EXPECT_GT(by_step[step].virtual_stages(1).f_seconds(),
                first.virtual_stages(1).f_seconds())
          << step;
    }
  }
  // The re-solve log: the first run's decisions, then the replay's, so
  // each replayed re-solve step holds both runs' records.
  const std::vector<ResolveRecord> resolves = *store_->ListResolveRecords(job_id);
  ASSERT_GT(resolves.size(), first_resolves.size());
  for (size_t i = 0; i < first_resolves.size(); ++i) {
    EXPECT_EQ(resolves[i].step, first_resolves[i].step);
    EXPECT_EQ(resolves[i].version, first_resolves[i].version);
    EXPECT_EQ(resolves[i].reason, first_resolves[i].reason);
  }
  for (const auto& [step, first] : first_costs) {
    if (step < 4) continue;
    EXPECT_EQ(std::count_if(resolves.begin(), resolves.end(),
                            [step = step](const ResolveRecord& r) { return r.step == step; }),
              2)
        << step;
  }
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
        "checkpoint /c/step-00000004/stage-001.pt does not match the model"));
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
  // Once the wait for what the old attempt's workers hold is over (none
  // registered again: docs/elastic.md, "Coordinator restart"), fresh
  // workers resume the recovering job first, with every version.
  std::vector<FakeWorker> workers;
  WaitOutTheRestoredAttempts(workers);
  EXPECT_THAT(coordinator_->GetJob(job_id, {})->state_message(),
              HasSubstr("coordinator restarted; restarting from step 0"));
  for (int i = 0; i < 4; ++i) workers.push_back(AddWorker(20 + i));
  HeartbeatAll(workers);
  // The recovery attempt calibrates again (its workers may be other
  // hardware): one version more. With no checkpoint the attempt restarts
  // at step 0, so it takes effect with the latest version, which it
  // supersedes before any step runs it (schedule.proto, versioning rule).
  const auto resumed = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  EXPECT_EQ(resumed->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(resumed->schedule_version(), before->schedule_version() + 1);
  EXPECT_EQ(resumed->schedule().reason(), v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  EXPECT_EQ(resumed->schedule().effective_step(), before->schedule().effective_step());
  for (auto& w : workers) w.Drain();
  EXPECT_EQ(workers[0].VersionFor(before->schedule().effective_step()).version(),
            resumed->schedule_version());
  RunSteps(workers, TrueCosts(spec, 2, 1.5), 39);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->state(),
            v1::JOB_STATE_SUCCEEDED);
  // Steps 0-9 ran again, re-solving where their first run had stored a
  // cost snapshot: the replay's replaces it, with no store error ("UNIQUE
  // constraint failed" once).
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  EXPECT_EQ(coordinator_->StoreHealth().refused, 0);
  EXPECT_THAT(faulty_store_->store_errors(), IsEmpty());
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
  ASSERT_TRUE(store_->PutValidationOutcome(job_id, clipped).ok());
  v1::ValidationOutcome skipped;
  skipped.set_step(3);
  skipped.set_decision(v1::VALIDATION_DECISION_SKIPPED);
  ASSERT_TRUE(store_->PutValidationOutcome(job_id, skipped).ok());
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

}  // namespace
}  // namespace zbpp::coordinator
