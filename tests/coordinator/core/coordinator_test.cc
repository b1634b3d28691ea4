// The coordinator core's jobs with a FakeClock and an in-memory SQLite
// store: no gRPC, no sleeps. Fake workers here call the core directly and
// drain their Session outboxes without blocking. Options, submission and
// its checks, assignment (memory included), schedule files, cancel, watch
// and list. Re-solves, step reports, workers and recovery have their own
// files (coordinator_{resolve,steps,workers,recovery}_test.cc).

#include "coordinator/core/coordinator.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/core/planning.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/schedule_io.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TestSpec;
using testing::Uncalibrated;
using testing::TrueCosts;
using testing::CoordinatorTest;
using testing::FakeWorker;

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
      {"model.layers", [](v1::JobSpec& s) { s.mutable_model()->set_layers(1); }},
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

// One spec submitted twice wrote one checkpoint directory: the second job
// trained until its first checkpoint, then failed on the first job's files.
// The second is refused at submission while the first has not finished; a
// "{job_id}" directory gives each its own.
TEST_F(CoordinatorTest, CheckpointDirectoryOfAnUnfinishedJobIsRefused) {
  v1::JobSpec spec = TestSpec();
  spec.mutable_checkpoint()->set_interval_steps(4);
  spec.mutable_checkpoint()->set_directory("/ckpt/run");
  const auto first = coordinator_->SubmitJob(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  v1::JobSpec trailing_slash = spec;
  trailing_slash.mutable_checkpoint()->set_directory("/ckpt/run/");
  for (const v1::JobSpec& clash : {spec, trailing_slash}) {
    const auto second = coordinator_->SubmitJob(clash);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(second.status().message()), HasSubstr("checkpoint.directory"));
    EXPECT_THAT(std::string(second.status().message()), HasSubstr(first->id()));
  }
  EXPECT_EQ(coordinator_->ListJobs({})->jobs_size(), 1);
  v1::JobSpec elsewhere = spec;
  elsewhere.mutable_checkpoint()->set_directory("/ckpt/run-2");
  EXPECT_TRUE(coordinator_->SubmitJob(elsewhere).ok());
  // Once the job has finished, its directory is free (to resume from it).
  ASSERT_TRUE(coordinator_->CancelJob(first->id(), "done").ok());
  EXPECT_TRUE(coordinator_->SubmitJob(spec).ok());

  v1::JobSpec templated = TestSpec();
  templated.mutable_checkpoint()->set_interval_steps(4);
  templated.mutable_checkpoint()->set_directory("/ckpt/{job_id}");
  const auto a = coordinator_->SubmitJob(templated);
  const auto b = coordinator_->SubmitJob(templated);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->spec().checkpoint().directory(), "/ckpt/" + a->id());
  EXPECT_EQ(b->spec().checkpoint().directory(), "/ckpt/" + b->id());
  EXPECT_EQ(store_->GetJob(b->id())->spec().checkpoint().directory(), "/ckpt/" + b->id());
  // The placeholder would name the new job, which has nothing to resume.
  templated.mutable_checkpoint()->set_resume_step(3);
  const auto resumed = coordinator_->SubmitJob(templated);
  EXPECT_EQ(resumed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(resumed.status().message()), HasSubstr("checkpoint.directory"));
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
    // Calibration first: a profile is asked for and nothing granted yet.
    EXPECT_TRUE(workers[r].assignment->profile());
    EXPECT_EQ(workers[r].granted, -1);
  }
  HeartbeatAll(workers);  // Acknowledges, then sends every profile.
  const auto running = coordinator_->GetJob(job->id(), v1::JOB_VIEW_FULL);
  EXPECT_EQ(running->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running->schedule_version(), 2);
  EXPECT_EQ(running->schedule().reason(), v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  EXPECT_EQ(running->schedule().effective_step(), 0);
  for (auto& w : workers) {
    w.Drain();
    EXPECT_EQ(w.granted, 1);  // Lookahead 2 from step -1.
    EXPECT_EQ(w.VersionFor(0).version(), 2);
  }
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
              HasSubstr("stage 1 needs about 7."));
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
  EXPECT_THAT(waiting->state_message(), HasSubstr("stage 1 needs about 13."));
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
  const v1::JobSpec named = Uncalibrated(TestSpec(4, 8, "zb-1p", 20, 2));
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
