// What each transition of a Job (coordinator/core/job.h) decides, read from
// the effects it returns (Job::TakeEffects, job_effects.h) and never
// applied: no store, no writer, no Session outbox, no rendezvous store, no
// Coordinator. The job reads a clock and an empty worker registry (its
// JobContext) and nothing else; the fake workers (fake_worker.h) are handed
// the decided messages directly.

#include "coordinator/core/job_effects.h"

#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "common/clock.h"
#include "coordinator/core/job.h"
#include "coordinator/core/resolver.h"
#include "coordinator/core/worker_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::FakeWorker;
using testing::TestSpec;
using testing::TrueCosts;
using testing::Uncalibrated;

// --- The effects, one line each, in order ---

std::vector<std::string> Writes(const JobEffects& effects) {
  std::vector<std::string> lines;
  for (const StoreWrite& write : effects.writes) lines.push_back(DescribeWrite(write));
  return lines;
}

// "w0 assignment stage 0", "w1 version 2", "w0 grant 3", "w1 abort: why".
std::vector<std::string> Messages(const JobEffects& effects) {
  std::vector<std::string> lines;
  for (const WorkerMessage& m : effects.messages) {
    const v1::SessionResponse& r = *m.message;
    if (r.has_assignment()) {
      lines.push_back(absl::StrCat(m.worker_id, " assignment stage ", r.assignment().stage()));
    } else if (r.has_schedule()) {
      lines.push_back(absl::StrCat(m.worker_id, " version ", r.schedule().version()));
    } else if (r.has_grant()) {
      lines.push_back(absl::StrCat(m.worker_id, " grant ", r.grant().through_step()));
    } else {
      lines.push_back(absl::StrCat(m.worker_id, " abort: ", r.command().abort().reason()));
    }
  }
  return lines;
}

// "PENDING->ASSIGNING", "version 2", "step 3", "validation 3", "unwatched".
std::vector<std::string> Events(const JobEffects& effects) {
  std::vector<std::string> lines;
  for (const WatchEvent& e : effects.events) {
    if (e.event.has_state_change()) {
      lines.push_back(absl::StrCat(JobStateName(e.event.state_change().old_state()), "->",
                                   JobStateName(e.event.state_change().new_state())));
    } else if (e.event.has_schedule_change()) {
      lines.push_back(absl::StrCat("version ", e.event.schedule_change().version()));
    } else if (e.event.has_step()) {
      lines.push_back(absl::StrCat("step ", e.event.step().step()));
    } else if (e.event.has_validation()) {
      lines.push_back(absl::StrCat("validation ", e.event.validation().step()));
    } else {
      lines.push_back("unwatched");
    }
  }
  return lines;
}

// "step 3", "version 2", "resolve published", "validation", "transport
// TRANSPORT_GLOO", "finished".
std::vector<std::string> Observed(const JobEffects& effects) {
  std::vector<std::string> lines;
  for (const Observation& o : effects.observations) {
    lines.push_back(std::visit(
        [](const auto& x) -> std::string {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, StepObserved>) {
            return absl::StrCat("step ", x.step.step());
          } else if constexpr (std::is_same_v<T, VersionObserved>) {
            return absl::StrCat("version ", x.version);
          } else if constexpr (std::is_same_v<T, ResolveObserved>) {
            return x.published ? "resolve published" : "resolve dropped";
          } else if constexpr (std::is_same_v<T, ValidationObserved>) {
            return "validation";
          } else if constexpr (std::is_same_v<T, TransportObserved>) {
            return absl::StrCat("transport ", v1::Transport_Name(x.transport));
          } else if constexpr (std::is_same_v<T, LayoutObserved>) {
            return absl::StrCat("layout ", LayoutText(x.layout));
          } else if constexpr (std::is_same_v<T, ReplicasObserved>) {
            return absl::StrCat("replicas ", x.active, " active, ", x.spares, " spare");
          } else {
            return "finished";
          }
        },
        o));
  }
  return lines;
}

// The job's record as the effects' last write of it stores it.
const v1::Job& StoredRecord(const JobEffects& effects) {
  const v1::Job* last = nullptr;
  for (const StoreWrite& write : effects.writes) {
    if (const v1::Job* job = std::get_if<v1::Job>(&write)) last = job;
  }
  EXPECT_NE(last, nullptr);
  static const v1::Job kNone;
  return last != nullptr ? *last : kNone;
}

class JobEffectsTest : public ::testing::Test {
 protected:
  JobEffectsTest() {
    registry_ = *WorkerRegistry::Create({.clock = &clock_});
    context_.clock = &clock_;
    context_.workers = registry_.get();
  }

  std::unique_ptr<Job> NewJob(const v1::JobSpec& spec) {
    v1::Job proto;
    proto.set_id("job-1");
    *proto.mutable_spec() = spec;
    proto.set_state(v1::JOB_STATE_PENDING);
    proto.set_last_checkpoint_step(-1);
    return std::make_unique<Job>(1, proto, context_);
  }

  /// Fake workers "w0".."w<n-1>", holding nothing.
  static std::vector<FakeWorker> Workers(int n) {
    std::vector<FakeWorker> workers(n);
    for (int i = 0; i < n; ++i) workers[i].id = absl::StrCat("w", i);
    return workers;
  }
  static std::vector<std::string> Ids(const std::vector<FakeWorker>& workers) {
    std::vector<std::string> ids;
    for (const FakeWorker& w : workers) ids.push_back(w.id);
    return ids;
  }
  /// Hands each decided message to the fake worker it names.
  static void Deliver(const JobEffects& effects, std::vector<FakeWorker>& workers) {
    for (const WorkerMessage& m : effects.messages) {
      for (FakeWorker& w : workers) {
        if (w.id == m.worker_id) w.Apply(*m.message);
      }
    }
  }

  /// A job of `spec` whose first attempt began on `workers` (Prepare and
  /// BeginAttempt over Gloo, their messages delivered, the rest dropped).
  std::unique_ptr<Job> Begun(const v1::JobSpec& spec, std::vector<FakeWorker>* workers) {
    std::unique_ptr<Job> job = NewJob(spec);
    *workers = Workers(WorkersOf(spec.pipeline()));
    EXPECT_TRUE(job->Prepare().ok());
    job->TakeEffects();
    EXPECT_TRUE(job->BeginAttempt(Ids(*workers), {v1::TRANSPORT_GLOO, "gloo"}).ok());
    Deliver(job->TakeEffects(), *workers);
    return job;
  }
  /// Begun, then every worker acknowledged: RUNNING.
  std::unique_ptr<Job> Running(const v1::JobSpec& spec, std::vector<FakeWorker>* workers) {
    std::unique_ptr<Job> job = Begun(spec, workers);
    for (const FakeWorker& w : *workers) EXPECT_TRUE(job->Acknowledge(w.id).ok());
    job->TakeEffects();
    EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
    return job;
  }
  /// Every worker reports `step` (timed on `truth`, each report carrying
  /// `validation` when given) in worker-index order; the effects of every
  /// report but the last are delivered and checked empty, the last's
  /// returned undelivered.
  JobEffects ReportAll(Job& job, std::vector<FakeWorker>& workers, int64_t step,
                       const sched::Problem& truth,
                       const v1::ValidationResult* validation = nullptr) {
    JobEffects last;
    for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
      v1::ReportStepRequest report = workers[i].Report(step, truth);
      if (validation != nullptr) *report.add_validations() = *validation;
      EXPECT_TRUE(job.ReportStep(report, i).ok()) << i;
      last = job.TakeEffects();
      if (i + 1 < static_cast<int>(workers.size())) {
        EXPECT_TRUE(last.empty()) << "report " << i << " of step " << step;
      }
    }
    return last;
  }

  FakeClock clock_;
  std::unique_ptr<WorkerRegistry> registry_;
  JobContext context_;
};

TEST_F(JobEffectsTest, PrepareDecidesVersionOneItsStoreWriteEventAndMetric) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  ASSERT_TRUE(job->Prepare().ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_EQ(effects.job_id, "job-1");
  EXPECT_THAT(Writes(effects), ElementsAre("storing schedule version 1 of job job-1"));
  EXPECT_THAT(Messages(effects), IsEmpty());  // No attempt holds a worker yet.
  EXPECT_THAT(Events(effects), ElementsAre("version 1"));
  EXPECT_THAT(Observed(effects), ElementsAre("version 1"));
  EXPECT_EQ(effects.resolve, nullptr);
  EXPECT_FALSE(effects.release_workers);
  // Taken: the job holds nothing more, and nothing reached the watch.
  EXPECT_TRUE(job->TakeEffects().empty());
  std::vector<v1::JobEvent> queued;
  ASSERT_TRUE(watch->Pop(absl::InfinitePast(), &queued).ok());
  EXPECT_EQ(queued.size(), 1u);  // The snapshot alone.
}

TEST_F(JobEffectsTest, AVersionNobodyWatchesIsAnEventWithoutItsPayload) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  ASSERT_TRUE(job->Prepare().ok());
  EXPECT_THAT(Events(job->TakeEffects()), ElementsAre("unwatched"));
}

TEST_F(JobEffectsTest, BeginAttemptStoresTheRecordThenAssignsAndGrantsEachWorker) {
  std::unique_ptr<Job> job = NewJob(Uncalibrated(TestSpec(/*stages=*/2)));
  ASSERT_TRUE(job->Prepare().ok());
  job->TakeEffects();
  ASSERT_TRUE(job->BeginAttempt({"w0", "w1"}, {v1::TRANSPORT_GLOO, "gloo"}).ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_EQ(StoredRecord(effects).state(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(StoredRecord(effects).assignments_size(), 2);
  EXPECT_THAT(Messages(effects), ElementsAre("w0 assignment stage 0", "w1 assignment stage 1",
                                             "w0 grant 1", "w1 grant 1"));
  // One grant message, shared by both workers.
  EXPECT_EQ(effects.messages[2].message, effects.messages[3].message);
  EXPECT_THAT(Events(effects), ElementsAre("PENDING->ASSIGNING"));
  EXPECT_THAT(Observed(effects), ElementsAre("transport TRANSPORT_GLOO", "layout []"));
  EXPECT_FALSE(effects.release_workers);
  EXPECT_THAT(effects.deleted_scopes, IsEmpty());
}

TEST_F(JobEffectsTest, ACalibratingAttemptIsGrantedNothingAndAFailingStoreNothingEither) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  ASSERT_TRUE(job->Prepare().ok());
  job->TakeEffects();
  ASSERT_TRUE(job->BeginAttempt({"w0", "w1"}, {v1::TRANSPORT_GLOO, "gloo"}).ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Messages(effects), ElementsAre("w0 assignment stage 0", "w1 assignment stage 1"));
  EXPECT_TRUE(effects.messages[0].message->assignment().profile());

  // Uncalibrated, under a failing store: assigned, never granted.
  bool healthy = false;
  context_.store_healthy = [&healthy] { return healthy; };
  std::unique_ptr<Job> paused = NewJob(Uncalibrated(TestSpec(/*stages=*/2)));
  ASSERT_TRUE(paused->Prepare().ok());
  paused->TakeEffects();
  ASSERT_TRUE(paused->BeginAttempt({"w0", "w1"}, {v1::TRANSPORT_GLOO, "gloo"}).ok());
  EXPECT_THAT(Messages(paused->TakeEffects()),
              ElementsAre("w0 assignment stage 0", "w1 assignment stage 1"));
  healthy = true;
  paused->UpdateGrant();
  EXPECT_THAT(Messages(paused->TakeEffects()), ElementsAre("w0 grant 1", "w1 grant 1"));
}

TEST_F(JobEffectsTest, TheLastAcknowledgementStoresTheRunningRecordAndTellsWatchers) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Begun(Uncalibrated(TestSpec(/*stages=*/2)), &workers);
  EXPECT_EQ(*job->Acknowledge("w0"), false);
  EXPECT_TRUE(job->TakeEffects().empty());
  EXPECT_EQ(*job->Acknowledge("w1"), true);
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_TRUE(StoredRecord(effects).has_start_time());
  EXPECT_THAT(Messages(effects), IsEmpty());
  EXPECT_THAT(Events(effects), ElementsAre("ASSIGNING->RUNNING"));
  EXPECT_THAT(Observed(effects), ElementsAre("replicas 1 active, 0 spare"));
}

// The step completes with its validation: the outcome, then the summary,
// then the record are stored; the next grant goes out; at the window's end
// the re-solve is decided, holding its own copies.
TEST_F(JobEffectsTest, ACompleteStepStoresItsOutcomeSummaryAndRecordThenGrants) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(2, 4, "zb-1p", /*steps=*/20, /*window=*/2));
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(spec, &workers);
  const sched::Problem truth = TrueCosts(spec, 1, 1.5);
  v1::ValidationResult validation;
  validation.set_step(0);
  validation.set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
  validation.set_decision(v1::VALIDATION_DECISION_COMMITTED);
  validation.set_clip_coefficient(1);
  const JobEffects step0 = ReportAll(*job, workers, 0, truth, &validation);
  EXPECT_THAT(Writes(step0), ElementsAre("storing the validation outcome of step 0 of job job-1",
                                         "storing the summary of step 0 of job job-1",
                                         "storing job job-1"));
  EXPECT_EQ(StoredRecord(step0).steps_completed(), 1);
  EXPECT_THAT(Messages(step0), ElementsAre("w0 grant 2", "w1 grant 2"));
  EXPECT_THAT(Events(step0), ElementsAre("validation 0", "step 0"));
  EXPECT_FALSE(step0.events[0].droppable);
  EXPECT_TRUE(step0.events[1].droppable);  // A lagging watch may miss a step.
  EXPECT_THAT(Observed(step0), ElementsAre("validation", "step 0"));
  EXPECT_EQ(step0.resolve, nullptr);  // Mid-window.
  Deliver(step0, workers);

  const JobEffects step1 = ReportAll(*job, workers, 1, truth);
  EXPECT_THAT(Writes(step1), ElementsAre("storing the summary of step 1 of job job-1",
                                         "storing job job-1"));
  ASSERT_NE(step1.resolve, nullptr);
  const ResolveTask& task = *step1.resolve;
  EXPECT_EQ(task.job_id, "job-1");
  EXPECT_EQ(task.attempt, 1);
  EXPECT_EQ(task.current_version, 1);
  EXPECT_EQ(task.record.step, 1);
  EXPECT_FALSE(task.calibration);
  EXPECT_NE(task.policy, nullptr);
  EXPECT_EQ(task.current.stages, 2);
}

TEST_F(JobEffectsTest, TheLastStepSucceedsAbortingReleasingAndClosing) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(2, 4, "zb-1p", /*steps=*/2, /*window=*/8));
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(spec, &workers);
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  Deliver(ReportAll(*job, workers, 0, truth), workers);
  const JobEffects effects = ReportAll(*job, workers, 1, truth);
  EXPECT_THAT(Writes(effects), ElementsAre("storing the summary of step 1 of job job-1",
                                           "storing job job-1"));
  EXPECT_EQ(StoredRecord(effects).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(Messages(effects), ElementsAre("w0 abort: job succeeded", "w1 abort: job succeeded"));
  EXPECT_TRUE(effects.release_workers);
  EXPECT_THAT(effects.deleted_scopes, ElementsAre("job-1/attempt-1"));
  EXPECT_EQ(effects.resolve, nullptr);
  EXPECT_THAT(Events(effects), ElementsAre("step 1", "RUNNING->SUCCEEDED"));
  EXPECT_TRUE(effects.close_watchers);
  EXPECT_THAT(Observed(effects), ElementsAre("step 1", "finished"));
}

TEST_F(JobEffectsTest, ReplicasThatDisagreeFailTheJobAndStoreNothingOfTheStep) {
  v1::JobSpec spec = Uncalibrated(TestSpec(2, 4, "zb-1p", /*steps=*/20, /*window=*/8));
  spec.mutable_pipeline()->set_data_parallel(2);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(spec, &workers);
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  JobEffects effects;
  for (int i = 0; i < 4; ++i) {
    v1::ReportStepRequest report = workers[i].Report(0, truth);
    v1::ValidationResult* v = report.add_validations();
    v->set_step(0);
    v->set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
    v->set_clip_coefficient(1);
    // Stage 0 of replica 1 skipped a step the others took.
    v->set_decision(i == 2 ? v1::VALIDATION_DECISION_SKIPPED
                           : v1::VALIDATION_DECISION_COMMITTED);
    ASSERT_TRUE(job->ReportStep(report, i).ok());
    effects = job->TakeEffects();
  }
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_THAT(StoredRecord(effects).state_message(),
              HasSubstr("stage 0 replica 1 disagrees with replica 0"));
  ASSERT_EQ(effects.messages.size(), 4u);
  EXPECT_THAT(Messages(effects)[3], HasSubstr("w3 abort: validation of step 0"));
  EXPECT_TRUE(effects.release_workers);
  EXPECT_THAT(Events(effects), ElementsAre("RUNNING->FAILED"));
  EXPECT_TRUE(effects.close_watchers);
  EXPECT_THAT(Observed(effects), ElementsAre("finished"));
}

// The solved re-solve comes back to the job: the version is stored before
// the message that carries it, then the record, the costs it was decided
// on and the decision.
TEST_F(JobEffectsTest, FinishResolvePublishesThenStoresTheCostsAndTheDecision) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", /*steps=*/20, /*window=*/2));
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(spec, &workers);
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  Deliver(ReportAll(*job, workers, 0, truth), workers);
  std::unique_ptr<ResolveTask> task = ReportAll(*job, workers, 1, truth).resolve;
  ASSERT_NE(task, nullptr);
  SolveResolve(*task);
  ASSERT_TRUE(task->candidate.has_value()) << task->record.reason;

  job->FinishResolve(*task);
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing schedule version 2 of job job-1",
                                           "storing job job-1",
                                           "storing the cost snapshot of step 1 of job job-1",
                                           "storing a re-solve of job job-1 at step 1"));
  EXPECT_EQ(StoredRecord(effects).schedule_version(), 2);
  const auto& record = std::get<ResolveRecord>(effects.writes[3]);
  EXPECT_TRUE(record.published);
  EXPECT_EQ(record.version, 2);
  EXPECT_THAT(Messages(effects), ElementsAre("w0 version 2", "w1 version 2", "w2 version 2",
                                             "w3 version 2"));
  EXPECT_EQ(effects.messages[0].message, effects.messages[3].message);
  EXPECT_THAT(Events(effects), ElementsAre("version 2"));
  EXPECT_THAT(Observed(effects), ElementsAre("version 2", "resolve published"));
}

TEST_F(JobEffectsTest, AReSolveForAnEndedAttemptIsRecordedUnpublished) {
  const v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-1p", /*steps=*/20, /*window=*/2));
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(spec, &workers);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  Deliver(ReportAll(*job, workers, 0, truth), workers);
  std::unique_ptr<ResolveTask> task = ReportAll(*job, workers, 1, truth).resolve;
  ASSERT_NE(task, nullptr);
  ASSERT_TRUE(job->AfterWorkerLost("w3 lost").ok());
  job->TakeEffects();
  SolveResolve(*task);

  job->FinishResolve(*task);
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing the cost snapshot of step 1 of job job-1",
                                           "storing a re-solve of job job-1 at step 1"));
  const auto& record = std::get<ResolveRecord>(effects.writes[1]);
  EXPECT_FALSE(record.published);
  EXPECT_THAT(record.reason, HasSubstr("not published: the job's attempt or version changed"));
  EXPECT_THAT(Messages(effects), IsEmpty());
  EXPECT_THAT(Events(effects), IsEmpty());
  EXPECT_THAT(Observed(effects), ElementsAre("resolve dropped"));
}

TEST_F(JobEffectsTest, TheLastProfileDecidesACalibrationWhoseVersionIsGrantedOnceItIsBack) {
  const v1::JobSpec spec = TestSpec(2, 4, "zb-1p");
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(spec, &workers);
  ASSERT_TRUE(job->ReportProfile(*workers[0].TakeProfile(), 0).ok());
  EXPECT_TRUE(job->TakeEffects().empty());
  ASSERT_TRUE(job->ReportProfile(*workers[1].TakeProfile(), 1).ok());
  JobEffects decided = job->TakeEffects();
  EXPECT_THAT(Writes(decided), IsEmpty());
  EXPECT_THAT(Messages(decided), IsEmpty());  // No grant before the version.
  ASSERT_NE(decided.resolve, nullptr);
  EXPECT_TRUE(decided.resolve->calibration);
  EXPECT_EQ(decided.resolve->record.step, -1);  // Before the attempt's first step.

  SolveResolve(*decided.resolve);
  job->FinishResolve(*decided.resolve);
  const JobEffects effects = job->TakeEffects();
  // No cost snapshot (the version carries its costs), no re-solve counted.
  EXPECT_THAT(Writes(effects), ElementsAre("storing schedule version 2 of job job-1",
                                           "storing job job-1",
                                           "storing a re-solve of job job-1 at step -1"));
  EXPECT_THAT(Messages(effects),
              ElementsAre("w0 version 2", "w1 version 2", "w0 grant 1", "w1 grant 1"));
  EXPECT_THAT(Observed(effects), ElementsAre("version 2"));
}

TEST_F(JobEffectsTest, CancelAbortsReleasesDeletesTheScopeStoresAndCloses) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(job->Cancel("enough").ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_EQ(StoredRecord(effects).state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(StoredRecord(effects).assignments_size(), 0);
  EXPECT_THAT(Messages(effects),
              ElementsAre("w0 abort: job cancelled: enough", "w1 abort: job cancelled: enough"));
  EXPECT_TRUE(effects.release_workers);
  EXPECT_THAT(effects.deleted_scopes, ElementsAre("job-1/attempt-1"));
  EXPECT_THAT(Events(effects), ElementsAre("RUNNING->CANCELLED"));
  EXPECT_TRUE(effects.close_watchers);
  EXPECT_THAT(Observed(effects), ElementsAre("finished"));
  // A refused transition decides nothing.
  EXPECT_FALSE(job->Cancel("twice").ok());
  EXPECT_TRUE(job->TakeEffects().empty());
}

TEST_F(JobEffectsTest, FailWithoutAnAttemptStoresAndClosesWithNoWorkerToTell) {
  std::unique_ptr<Job> job = NewJob(TestSpec());
  EXPECT_FALSE(job->Fail("no corpus").ok());  // The job failed: its error.
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_EQ(StoredRecord(effects).state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(Messages(effects), IsEmpty());
  EXPECT_FALSE(effects.release_workers);
  EXPECT_THAT(effects.deleted_scopes, IsEmpty());
  EXPECT_THAT(Events(effects), ElementsAre("PENDING->FAILED"));
  EXPECT_TRUE(effects.close_watchers);
  EXPECT_THAT(Observed(effects), ElementsAre("finished"));
}

TEST_F(JobEffectsTest, ALostWorkerEndsTheAttemptAndTheJobRecovers) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(job->AfterWorkerLost("w1 lost").ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_EQ(StoredRecord(effects).recoveries_total(), 1);
  EXPECT_THAT(Messages(effects),
              ElementsAre("w0 abort: attempt ended: w1 lost", "w1 abort: attempt ended: w1 lost"));
  EXPECT_TRUE(effects.release_workers);
  EXPECT_THAT(effects.deleted_scopes, ElementsAre("job-1/attempt-1"));
  EXPECT_THAT(Events(effects), ElementsAre("RUNNING->RECOVERING"));
  EXPECT_FALSE(effects.close_watchers);
  EXPECT_THAT(Observed(effects), ElementsAre("replicas 0 active, 0 spare"));

  // While assigning, the job waits again.
  std::unique_ptr<Job> assigning = Begun(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(assigning->AfterWorkerLost("w0 lost").ok());
  EXPECT_THAT(Events(assigning->TakeEffects()), ElementsAre("ASSIGNING->PENDING"));
}

TEST_F(JobEffectsTest, AFailedWorkerEndsTheAttemptNamingItsStage) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(job->AfterWorkerFailed("w1", 1, "out of memory", /*job_error=*/false,
                                     /*max_recoveries=*/3, /*count=*/true)
                  .ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  EXPECT_EQ(StoredRecord(effects).state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(Messages(effects), ElementsAre("w0 abort: worker w1 (stage 1) failed: out of memory",
                                             "w1 abort: worker w1 (stage 1) failed: out of memory"));
  EXPECT_TRUE(effects.release_workers);
  EXPECT_THAT(Events(effects), ElementsAre("RUNNING->RECOVERING"));
  EXPECT_THAT(Observed(effects), ElementsAre("replicas 0 active, 0 spare"));

  // A job error fails the job.
  std::unique_ptr<Job> doomed = Running(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(doomed->AfterWorkerFailed("w0", 0, "no corpus", /*job_error=*/true, 3, true).ok());
  const JobEffects failed = doomed->TakeEffects();
  EXPECT_THAT(Events(failed), ElementsAre("RUNNING->FAILED"));
  EXPECT_TRUE(failed.close_watchers);
  EXPECT_THAT(Observed(failed), ElementsAre("finished"));
}

TEST_F(JobEffectsTest, ACalibrationPastItsDeadlineFailsTheAttemptOfTheFirstSilentWorker) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(TestSpec(/*stages=*/2), &workers);
  ASSERT_TRUE(job->ReportProfile(*workers[0].TakeProfile(), 0).ok());
  job->TakeEffects();
  const absl::Time began = clock_.Now();
  ASSERT_TRUE(job->CheckCalibrationDeadline(began + absl::Seconds(59), absl::Seconds(60), 3,
                                            true)
                  .ok());
  EXPECT_TRUE(job->TakeEffects().empty());  // In time.

  ASSERT_TRUE(job->CheckCalibrationDeadline(began + absl::Seconds(60), absl::Seconds(60), 3,
                                            true)
                  .ok());
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-1"));
  ASSERT_EQ(effects.messages.size(), 2u);
  EXPECT_THAT(Messages(effects)[0],
              HasSubstr("w0 abort: worker w1 (stage 1) failed: sent no calibration profile "
                        "within 1m (1 of 2 workers missing"));
  EXPECT_TRUE(effects.release_workers);
  EXPECT_THAT(Events(effects), ElementsAre("RUNNING->RECOVERING"));
}

TEST_F(JobEffectsTest, ANewSessionIsSentTheAttemptAgainAndNothingElse) {
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Running(Uncalibrated(TestSpec(/*stages=*/2)), &workers);
  job->ReplaySession("w1", 1);
  const JobEffects effects = job->TakeEffects();
  EXPECT_THAT(Messages(effects), ElementsAre("w1 assignment stage 1", "w1 grant 1"));
  EXPECT_THAT(Writes(effects), IsEmpty());
  EXPECT_THAT(Events(effects), IsEmpty());
  job->ReplaySession("w1", 0);  // Not the worker at that index: nothing.
  EXPECT_TRUE(job->TakeEffects().empty());
}

TEST_F(JobEffectsTest, AWaitingJobStoresWhyOnceAndARestoredOneGoesRecovering) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  ASSERT_TRUE(job->Prepare().ok());
  job->TakeEffects();
  const absl::Status refused = absl::ResourceExhaustedError("2 workers with 1 GiB free");
  job->NoteWaiting(refused, job->EstimateMemory());
  const JobEffects waiting = job->TakeEffects();
  EXPECT_THAT(Writes(waiting), ElementsAre("storing job job-1"));
  EXPECT_THAT(StoredRecord(waiting).state_message(),
              HasSubstr("waiting for workers: 2 workers with 1 GiB free"));
  EXPECT_THAT(Events(waiting), IsEmpty());  // No transition.
  job->NoteWaiting(refused, job->EstimateMemory());
  EXPECT_TRUE(job->TakeEffects().empty());  // The same message again.

  v1::Job stored;
  stored.set_id("job-2");
  *stored.mutable_spec() = TestSpec(/*stages=*/2);
  stored.set_state(v1::JOB_STATE_RUNNING);
  Job restored(2, stored, context_);
  ASSERT_TRUE(restored.Restore({}).ok());
  const JobEffects effects = restored.TakeEffects();
  EXPECT_THAT(Writes(effects), ElementsAre("storing job job-2"));
  EXPECT_EQ(StoredRecord(effects).state_message(), "coordinator restarted");
  EXPECT_THAT(Messages(effects), IsEmpty());  // The old process's workers register anew.
  EXPECT_FALSE(effects.release_workers);
  EXPECT_THAT(Events(effects), ElementsAre("RUNNING->RECOVERING"));
}

}  // namespace
}  // namespace zbpp::coordinator
