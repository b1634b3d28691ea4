// Job (coordinator/core/job.h) on its own, through JobHarness: its
// transitions (each checked first, then the attempt ended, the record
// stored, the watchers told), attempts, grants and views, and a whole run
// with one thread per worker.

#include "coordinator/core/job.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/time_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/job_harness.h"
#include "testing/fake_pipeline.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::FakeWorker;
using testing::TestSpec;
using testing::Uncalibrated;
using testing::TrueCosts;

class JobTest : public testing::JobHarness {
 protected:
  /// A job of `spec` RUNNING its first attempt on new workers.
  std::unique_ptr<Job> RunningJob(const v1::JobSpec& spec, std::vector<FakeWorker>* workers) {
    std::unique_ptr<Job> job = NewJob(spec);
    *workers = AddWorkers(WorkersOf(spec.pipeline()));
    EXPECT_TRUE(StartAttempt(*job, *workers).ok());
    AcknowledgeAll(*job, *workers);
    EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
    return job;
  }

  /// The state the store holds for `job` once every queued write is in.
  v1::JobState StoredState(const Job& job) {
    EXPECT_TRUE(writer_->Flush().ok());
    return store_->GetJob(job.id())->state();
  }
};

TEST_F(JobTest, EachTransitionStoresTheRecordAndTellsWatchers) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  std::vector<FakeWorker> workers = AddWorkers(2);
  const int64_t before = StoredJobUpdates();
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(StoredJobUpdates(), before + 1);
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_ASSIGNING);

  AcknowledgeAll(*job, workers);
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(job->proto().has_start_time());
  EXPECT_EQ(StoredJobUpdates(), before + 2);  // Once, when the last acknowledged.
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(job->AfterWorkerLost("worker lost").ok());
  Apply(*job);
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job->proto().state_message(), "worker lost");
  EXPECT_EQ(job->proto().recoveries_total(), 1);
  EXPECT_EQ(StoredJobUpdates(), before + 3);
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_RECOVERING);

  const std::vector<v1::JobEvent> events = Events(*watch);
  EXPECT_THAT(StateChanges(events), ElementsAre("PENDING->ASSIGNING", "ASSIGNING->RUNNING",
                                                "RUNNING->RECOVERING"));
  EXPECT_EQ(events.back().sequence(), static_cast<int64_t>(events.size()));
}

// Job.transitions: every change, oldest first, with its time, the steps
// completed and the message it set; stored with the record (so a restarted
// coordinator reads them back) and kept in the BASIC view; past
// Job::kMaxTransitions the oldest are dropped.
TEST_F(JobTest, EachTransitionIsListedAndTheNewestHundredKept) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  EXPECT_EQ(job->proto().transitions_size(), 0) << "submission is no change";
  std::vector<FakeWorker> workers = AddWorkers(2);
  const absl::Time began = clock_.Now();
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(job->AfterWorkerLost("lost 0").ok());
  Apply(*job);
  ASSERT_EQ(job->proto().transitions_size(), 2);
  const v1::JobTransition& first = job->proto().transitions(0);
  EXPECT_EQ(first.from(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(first.to(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(FromTimestamp(first.time()), began);
  EXPECT_EQ(first.message(), "");
  const v1::JobTransition& second = job->proto().transitions(1);
  EXPECT_EQ(second.from(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(second.to(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(FromTimestamp(second.time()), began + absl::Seconds(5));
  EXPECT_EQ(second.message(), "lost 0");
  ASSERT_TRUE(writer_->Flush().ok());
  EXPECT_EQ(store_->GetJob(job->id())->transitions_size(), 2);

  // 59 more attempts lost while assigning: 120 changes, the newest 100 kept.
  for (int i = 1; i < 60; ++i) {
    for (FakeWorker& w : workers) w.Drain();
    ASSERT_TRUE(StartAttempt(*job, workers).ok()) << i;
    ASSERT_TRUE(job->AfterWorkerLost(absl::StrCat("lost ", i)).ok());
    Apply(*job);
  }
  ASSERT_EQ(job->proto().transitions_size(), Job::kMaxTransitions);
  EXPECT_EQ(Job::kMaxTransitions, 100);
  // Dropped: the changes of attempts 0-9; kept from attempt 10's start on.
  EXPECT_EQ(job->proto().transitions(0).to(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(job->proto().transitions(1).message(), "lost 10");
  EXPECT_EQ(job->proto().transitions(99).message(), "lost 59");
  EXPECT_EQ(job->View(/*full=*/false).transitions_size(), Job::kMaxTransitions);
  ASSERT_TRUE(writer_->Flush().ok());
  const absl::StatusOr<v1::Job> stored = store_->GetJob(job->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->transitions_size(), Job::kMaxTransitions);
  EXPECT_EQ(stored->transitions(99).message(), "lost 59");

  // The steps completed when a change happened.
  const v1::JobSpec spec = Uncalibrated(TestSpec(/*stages=*/2));
  std::unique_ptr<Job> ran = NewJob(spec, /*seq=*/2);
  std::vector<FakeWorker> running = AddWorkers(2);
  ASSERT_TRUE(StartAttempt(*ran, running).ok());
  AcknowledgeAll(*ran, running);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(ran->ReportStep(running[i].Report(0, truth), i).ok());
  ASSERT_EQ(ran->proto().steps_completed(), 1);
  ASSERT_TRUE(ran->Cancel("enough").ok());
  const v1::JobTransition& cancelled = *ran->proto().transitions().rbegin();
  EXPECT_EQ(cancelled.from(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(cancelled.to(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(cancelled.steps_completed(), 1);
  EXPECT_EQ(cancelled.message(), "enough");
}

// An attempt holds its workers, its rendezvous scope and the job's record;
// a transition that may not happen leaves all three as they were.
TEST_F(JobTest, RefusedSecondAttemptLeavesTheFirstHoldingItsWorkers) {
  std::vector<FakeWorker> first;
  std::unique_ptr<Job> job = RunningJob(TestSpec(/*stages=*/2), &first);
  std::vector<FakeWorker> others = AddWorkers(2);
  ASSERT_TRUE(rendezvous_->Set(job->scope(), "rank-0", "10.0.0.0:29500").ok());
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  Events(*watch);  // The snapshot.
  const int64_t stored = StoredJobUpdates();

  const absl::Status refused =
      job->BeginAttempt({others[0].id, others[1].id}, {v1::TRANSPORT_GLOO, ""});
  EXPECT_TRUE(job->TakeEffects().empty());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("job job-1: an attempt begins only while the job "
                                           "waits for workers, not while RUNNING"));
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->attempt().number(), 1);
  EXPECT_THAT(job->attempt().workers(), ElementsAre(first[0].id, first[1].id));
  for (const FakeWorker& w : first) EXPECT_EQ(HeldBy(w.id), "job-1");
  EXPECT_EQ(rendezvous_->KeyCount(job->scope()), 1);
  EXPECT_TRUE(Events(*watch).empty());
  EXPECT_EQ(StoredJobUpdates(), stored);
  for (FakeWorker& w : others) {
    w.Drain();
    EXPECT_FALSE(w.assignment.has_value());
  }
}

TEST_F(JobTest, TerminalJobRefusesEveryTransitionAndChangesNothing) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = RunningJob(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(job->Cancel("enough").ok());
  Apply(*job);
  const int64_t stored = StoredJobUpdates();
  const std::vector<std::string> observed = observer_.calls();
  const v1::Job record = job->proto();

  const absl::Status again = job->Cancel("twice");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(again.message(), "job job-1 is already CANCELLED");
  const absl::Status failed = job->Fail("late");
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.message(),
            "job job-1: illegal job state transition CANCELLED -> FAILED (CANCELLED is terminal)");
  const absl::Status job_error = job->AfterWorkerFailed(workers[0].id, 0, "no corpus",
                                                        /*job_error=*/true, 3, true);
  EXPECT_EQ(job_error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job_error.message(), HasSubstr("CANCELLED -> FAILED"));
  EXPECT_TRUE(job->AfterWorkerLost("gone").ok());  // No attempt: nothing to do.
  EXPECT_TRUE(job->TakeEffects().empty());

  EXPECT_EQ(job->proto().SerializeAsString(), record.SerializeAsString());
  EXPECT_EQ(StoredJobUpdates(), stored);
  EXPECT_EQ(observer_.calls(), observed);
  // A watch of a terminal job gets its snapshot and ends.
  std::shared_ptr<WatchOutbox> late = job->Watch(16);
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(late->Pop(absl::InfinitePast(), &events).ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].snapshot().state(), v1::JOB_STATE_CANCELLED);
  events.clear();
  EXPECT_EQ(late->Pop(absl::InfinitePast(), &events).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(JobTest, CancelEndsTheAttemptReleasingItsWorkersAndScope) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = RunningJob(TestSpec(/*stages=*/2), &workers);
  const std::string scope = job->scope();
  ASSERT_TRUE(rendezvous_->Set(scope, "rank-0", "10.0.0.0:29500").ok());
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);

  ASSERT_TRUE(job->Cancel("enough").ok());
  Apply(*job);
  EXPECT_EQ(job->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job->proto().state_message(), "enough");
  EXPECT_TRUE(job->proto().has_end_time());
  EXPECT_EQ(job->proto().assignments_size(), 0);
  EXPECT_FALSE(job->attempt().active());
  for (FakeWorker& w : workers) {
    EXPECT_EQ(HeldBy(w.id), "");
    std::vector<SessionMessage> messages;
    ASSERT_TRUE(w.outbox->Pop(absl::InfinitePast(), &messages).ok());
    ASSERT_FALSE(messages.empty());
    EXPECT_EQ(messages.back()->command().abort().reason(), "job cancelled: enough");
  }
  EXPECT_EQ(rendezvous_->KeyCount(scope), 0);
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(observer_.calls().back(), "finished job-1");
  std::vector<v1::JobEvent> events = Events(*watch);
  EXPECT_THAT(StateChanges(events), ElementsAre("RUNNING->CANCELLED"));
  events.clear();
  EXPECT_EQ(watch->Pop(absl::InfinitePast(), &events).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(JobTest, LostWorkerWhileAssigningSendsTheJobBackToWaiting) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  std::vector<FakeWorker> workers = AddWorkers(2);
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  ASSERT_TRUE(job->AfterWorkerLost("worker-2 lost: no heartbeat for 5s").ok());
  Apply(*job);
  EXPECT_EQ(job->state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(job->proto().state_message(), "worker-2 lost: no heartbeat for 5s");
  EXPECT_EQ(job->proto().recoveries_total(), 0);
  EXPECT_TRUE(job->Waiting());
  for (FakeWorker& w : workers) {
    EXPECT_EQ(HeldBy(w.id), "");
    w.Drain();
    EXPECT_EQ(w.aborts, 1);
  }
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_PENDING);
  // The next attempt takes the workers again.
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  EXPECT_EQ(job->attempt().number(), 2);
  EXPECT_EQ(job->scope(), "job-1/attempt-2");
  EXPECT_EQ(HeldBy(workers[0].id), "job-1");
}

TEST_F(JobTest, WorkerFailuresWithoutProgressFailTheJob) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = RunningJob(TestSpec(/*stages=*/2), &workers);
  std::shared_ptr<WatchOutbox> watch = job->Watch(64);
  auto fail = [&](int index, bool count) {
    const absl::Status status =
        job->AfterWorkerFailed(workers[index].id, index, "out of memory",
                               /*job_error=*/false, /*max_recoveries=*/2, count);
    Apply(*job);
    return status;
  };
  ASSERT_TRUE(fail(0, true).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_FALSE(job->attempt().active());
  EXPECT_EQ(HeldBy(workers[0].id), "");
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  AcknowledgeAll(*job, workers);
  // Not counted (the store was failing): still recovering.
  ASSERT_TRUE(fail(1, /*count=*/false).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  // A failure while recovering counts too and keeps the job RECOVERING;
  // watchers see why, in a change that keeps the state.
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  ASSERT_TRUE(fail(1, true).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job->proto().state_message(), "worker " + workers[1].id + " (stage 1) failed: out of memory");
  EXPECT_EQ(job->proto().recoveries_total(), 2);
  EXPECT_FALSE(job->attempt().active());
  EXPECT_THAT(StateChanges(Events(*watch)),
              ElementsAre("RUNNING->RECOVERING", "RECOVERING->RUNNING", "RUNNING->RECOVERING",
                          "RECOVERING->RECOVERING"));
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  ASSERT_TRUE(fail(0, true).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job->proto().state_message(), HasSubstr("2 recoveries made no progress"));
  EXPECT_EQ(HeldBy(workers[0].id), "");
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_FAILED);
}

TEST_F(JobTest, JobErrorFailsTheJobNamingTheWorkersStageAndReplica) {
  v1::JobSpec spec = TestSpec(/*stages=*/2);
  spec.mutable_pipeline()->set_data_parallel(2);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = RunningJob(spec, &workers);
  ASSERT_TRUE(job->AfterWorkerFailed(workers[3].id, 3, "no corpus at /no/such",
                                     /*job_error=*/true, 3, true)
                  .ok());
  Apply(*job);
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job->proto().state_message(),
            "worker " + workers[3].id + " (stage 1, replica 1) failed: no corpus at /no/such");
  EXPECT_EQ(job->proto().recoveries_total(), 0);
  for (FakeWorker& w : workers) EXPECT_EQ(HeldBy(w.id), "");
}

TEST_F(JobTest, FailBeforeAnyAttemptIsAnErrorThatEndsTheJob) {
  std::unique_ptr<Job> job = NewJob(TestSpec());
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  const absl::Status failed = job->Fail("no corpus");
  Apply(*job);
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.message(), "job job-1 failed: no corpus");
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_TRUE(job->proto().has_end_time());
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_FAILED);
  std::vector<v1::JobEvent> events = Events(*watch);
  EXPECT_THAT(StateChanges(events), ElementsAre("PENDING->FAILED"));
  events.clear();
  EXPECT_EQ(watch->Pop(absl::InfinitePast(), &events).code(),
            absl::StatusCode::kOutOfRange);  // Closed OK and drained.
}

// Without calibration (calibrate: false) no profile is asked for and the
// first steps are granted with the assignment, under version 1.
TEST_F(JobTest, AttemptSendsAssignmentsAndGrantsThenRunsOnceAllAcknowledge) {
  std::unique_ptr<Job> job = NewJob(Uncalibrated(TestSpec(/*stages=*/2)));
  std::vector<FakeWorker> workers = AddWorkers(2);
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  ASSERT_EQ(job->proto().schedule_version(), 1);
  EXPECT_EQ(job->state(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(job->proto().transport(), v1::TRANSPORT_GLOO);
  EXPECT_EQ(job->proto().transport_reason(), "gloo: as the job spec asks");
  EXPECT_EQ(job->attempt().number(), 1);
  EXPECT_EQ(job->scope(), "job-1/attempt-1");
  EXPECT_THAT(observer_.calls(), ElementsAre("version job-1 1", "transport job-1 TRANSPORT_GLOO"));
  for (int i = 0; i < 2; ++i) {
    std::vector<SessionMessage> messages;
    ASSERT_TRUE(workers[i].outbox->Pop(absl::InfinitePast(), &messages).ok());
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0]->assignment().stage(), i);
    EXPECT_EQ(messages[0]->assignment().schedule().version(), 1);
    EXPECT_EQ(messages[0]->assignment().transport(), v1::TRANSPORT_GLOO);
    EXPECT_FALSE(messages[0]->assignment().profile());
    EXPECT_EQ(messages[1]->grant().through_step(), 1);  // Lookahead 2 from -1.
  }
  EXPECT_EQ(*job->Acknowledge(workers[0].id), false);
  EXPECT_EQ(*job->Acknowledge(workers[1].id), true);
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobTest, BasicViewDropsPerStageRowsAndFullViewAddsTheSchedule) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  ASSERT_TRUE(job->Prepare().ok());
  EXPECT_EQ(job->View(/*full=*/true).schedule().version(), 1);
  EXPECT_FALSE(job->View(/*full=*/false).has_schedule());
  EXPECT_FALSE(job->View(/*full=*/false).has_last_step());
}

// p = 2 stages × d = 2 replicas, one thread per worker: each reports the
// steps granted to it as they come; the job completes every step in order,
// makes a re-solve due at the end of each window (JobModel) while a step is
// left to run its result, and ends SUCCEEDED with its workers free.
TEST_F(JobTest, OneThreadPerWorkerRunsTheJobToItsEnd) {
  v1::JobSpec spec = TestSpec(/*stages=*/2, /*microbatches=*/4, "zb-1p", /*steps=*/6,
                              /*window=*/2);
  spec.mutable_pipeline()->set_data_parallel(2);
  std::unique_ptr<Job> job = NewJob(spec);
  std::vector<FakeWorker> workers = AddWorkers(4);
  ASSERT_TRUE(StartAttempt(*job, workers).ok());
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  Spawn(4, [&](int i) { RunWorker(*job, workers[i], truth); });

  absl::MutexLock lock(&mu_);
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job->proto().steps_completed(), 6);
  EXPECT_EQ(resolve_steps_, (std::vector<int64_t>{1, 3}));
  std::vector<std::string> steps;
  for (const std::string& call : observer_.calls()) {
    if (call.rfind("step ", 0) == 0) steps.push_back(call);
  }
  EXPECT_THAT(steps, ElementsAre("step job-1 0", "step job-1 1", "step job-1 2", "step job-1 3",
                                 "step job-1 4", "step job-1 5"));
  EXPECT_EQ(observer_.calls().back(), "finished job-1");
  for (const FakeWorker& w : workers) {
    EXPECT_EQ(HeldBy(w.id), "");
    EXPECT_EQ(w.aborts, 1);
    EXPECT_EQ(w.next_step, 6);
  }
  EXPECT_EQ(StoredState(*job), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(store_->ListStepSummaries(job->id(), 0, 100)->size(), 6u);
}

}  // namespace
}  // namespace zbpp::coordinator
