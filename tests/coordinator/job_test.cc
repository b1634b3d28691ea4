// Job (coordinator/core/job.h) on its own: its state machine, watchers,
// attempts and grants, with a FakeClock, an in-memory SQLite store behind
// a StoreWriter and a WorkerRegistry holding the workers' outboxes.

#include "coordinator/core/job.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/worker_registry.h"
#include "coordinator/store/sqlite_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/fake_pipeline.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::TestSpec;

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *SqliteStore::Create({":memory:"});
    StoreWriter::Options writer_options;
    writer_options.store = store_.get();
    writer_ = *StoreWriter::Create(writer_options);
    registry_ = *WorkerRegistry::Create({.clock = &clock_});
    context_.clock = &clock_;
    context_.writer = writer_.get();
    context_.workers = registry_.get();
  }

  // Job "job-1" in PENDING for `spec`, stored as SubmitJob stores it.
  std::unique_ptr<Job> NewJob(const v1::JobSpec& spec) {
    v1::Job proto;
    proto.set_id("job-1");
    *proto.mutable_spec() = spec;
    proto.set_state(v1::JOB_STATE_PENDING);
    proto.set_last_checkpoint_step(-1);
    EXPECT_TRUE(store_->CreateJob(proto).ok());
    return std::make_unique<Job>(1, proto, context_);
  }

  // Registers `n` workers with open Sessions; returns their ids.
  std::vector<std::string> AddWorkers(int n) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      v1::WorkerDescription d;
      d.set_address(absl::StrCat("10.0.0.", i, ":7000"));
      d.set_host("node");
      d.set_device_kind(v1::DEVICE_KIND_CPU);
      d.set_memory_bytes(uint64_t{1} << 30);
      absl::StatusOr<Registration> added = registry_->Add(d, "digest");
      EXPECT_TRUE(added.ok()) << added.status();
      ids.push_back(added->worker_id);
      outboxes_.push_back(registry_->OpenSession(ids.back(), d.address())->outbox);
    }
    return ids;
  }

  // Every message queued on worker `i`'s Session so far.
  std::vector<SessionMessage> Drain(int i) {
    std::vector<SessionMessage> messages;
    EXPECT_TRUE(outboxes_[i]->Pop(absl::InfinitePast(), &messages).ok());
    return messages;
  }

  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<StoreWriter> writer_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::vector<std::shared_ptr<SessionOutbox>> outboxes_;
  JobContext context_;
};

TEST_F(JobTest, LegalTransitionsChangeTheStateAndTellWatchers) {
  std::unique_ptr<Job> job = NewJob(TestSpec());
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  ASSERT_TRUE(job->SetState(v1::JOB_STATE_ASSIGNING, "").ok());
  ASSERT_TRUE(job->SetState(v1::JOB_STATE_RUNNING, "").ok());
  EXPECT_TRUE(job->proto().has_start_time());
  ASSERT_TRUE(job->SetState(v1::JOB_STATE_RECOVERING, "worker lost").ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job->proto().state_message(), "worker lost");
  EXPECT_EQ(job->proto().recoveries_total(), 1);

  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(watch->Pop(absl::InfinitePast(), &events).ok());
  ASSERT_EQ(events.size(), 4u);  // The snapshot, then three changes.
  EXPECT_TRUE(events[0].has_snapshot());
  EXPECT_EQ(events[3].state_change().old_state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(events[3].state_change().new_state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(events[3].sequence(), 4);
}

TEST_F(JobTest, IllegalTransitionIsAnErrorAndChangesNothing) {
  std::unique_ptr<Job> job = NewJob(TestSpec());
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  const absl::Status status = job->SetState(v1::JOB_STATE_RUNNING, "skipped a state");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("job job-1"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("PENDING -> RUNNING"));
  EXPECT_EQ(job->state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(job->proto().state_message(), "");
  EXPECT_FALSE(job->proto().has_start_time());
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(watch->Pop(absl::InfinitePast(), &events).ok());
  EXPECT_EQ(events.size(), 1u);  // The snapshot only.
}

TEST_F(JobTest, TerminalStateClosesWatchersAndAcceptsNoFurtherTransition) {
  std::unique_ptr<Job> job = NewJob(TestSpec());
  std::shared_ptr<WatchOutbox> watch = job->Watch(16);
  const absl::Status failed = job->Fail("no corpus");
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.message(), "job job-1 failed: no corpus");
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_TRUE(job->proto().has_end_time());
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(watch->Pop(absl::InfinitePast(), &events).ok());
  events.clear();
  EXPECT_EQ(watch->Pop(absl::InfinitePast(), &events).code(),
            absl::StatusCode::kOutOfRange);  // Closed OK and drained.

  const absl::Status again = job->SetState(v1::JOB_STATE_RUNNING, "");
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("FAILED is terminal"));
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  // A watch of a terminal job gets its snapshot and ends.
  std::shared_ptr<WatchOutbox> late = job->Watch(16);
  events.clear();
  ASSERT_TRUE(late->Pop(absl::InfinitePast(), &events).ok());
  EXPECT_EQ(events.size(), 1u);
}

TEST_F(JobTest, AttemptSendsAssignmentsAndGrantsThenRunsOnceAllAcknowledge) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  ASSERT_TRUE(job->Prepare().ok());
  ASSERT_EQ(job->proto().schedule_version(), 1);
  const std::vector<std::string> workers = AddWorkers(2);
  ASSERT_TRUE(job->BeginAttempt(workers, {v1::TRANSPORT_GLOO, "gloo: as the job spec asks"}).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_ASSIGNING);
  EXPECT_EQ(job->proto().transport(), v1::TRANSPORT_GLOO);
  EXPECT_EQ(job->proto().transport_reason(), "gloo: as the job spec asks");
  EXPECT_EQ(job->attempt().number(), 1);
  EXPECT_EQ(job->scope(), "job-1/attempt-1");
  for (int i = 0; i < 2; ++i) {
    std::vector<SessionMessage> messages = Drain(i);
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0]->assignment().stage(), i);
    EXPECT_EQ(messages[0]->assignment().schedule().version(), 1);
    EXPECT_EQ(messages[0]->assignment().transport(), v1::TRANSPORT_GLOO);
    EXPECT_EQ(messages[1]->grant().through_step(), 1);  // Lookahead 2 from -1.
  }
  EXPECT_EQ(*job->Acknowledge(workers[0]), false);
  EXPECT_EQ(*job->Acknowledge(workers[1]), true);
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);

  EXPECT_TRUE(job->EndAttempt("stopped"));
  EXPECT_FALSE(job->attempt().active());
  EXPECT_TRUE(Drain(0)[0]->command().has_abort());
  EXPECT_FALSE(job->EndAttempt("again"));
}

TEST_F(JobTest, WorkerFailuresWithoutProgressFailTheJob) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  std::shared_ptr<WatchOutbox> watch = job->Watch(64);
  ASSERT_TRUE(job->SetState(v1::JOB_STATE_ASSIGNING, "").ok());
  ASSERT_TRUE(job->SetState(v1::JOB_STATE_RUNNING, "").ok());
  ASSERT_TRUE(job->RecoverAfterFailure("w failed", /*max_recoveries=*/2, true).ok());
  ASSERT_TRUE(job->SetState(v1::JOB_STATE_RUNNING, "").ok());
  // Not counted (the store was failing): still recovering.
  ASSERT_TRUE(job->RecoverAfterFailure("w failed", 2, /*count=*/false).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  // A failure while recovering counts too and keeps the job RECOVERING.
  ASSERT_TRUE(job->RecoverAfterFailure("v failed", 2, true).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(job->proto().state_message(), "v failed");
  // Watchers see why, in a change that keeps the state.
  std::vector<v1::JobEvent> events;
  ASSERT_TRUE(watch->Pop(absl::InfinitePast(), &events).ok());
  ASSERT_FALSE(events.empty());
  const v1::JobStateChange& last = events.back().state_change();
  EXPECT_EQ(last.old_state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(last.new_state(), v1::JOB_STATE_RECOVERING);
  EXPECT_EQ(last.message(), "v failed");
  ASSERT_TRUE(job->RecoverAfterFailure("w failed", 2, true).ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job->proto().state_message(), HasSubstr("2 recoveries made no progress"));
}

TEST_F(JobTest, BasicViewDropsPerStageRowsAndFullViewAddsTheSchedule) {
  std::unique_ptr<Job> job = NewJob(TestSpec(/*stages=*/2));
  ASSERT_TRUE(job->Prepare().ok());
  EXPECT_EQ(job->View(/*full=*/true).schedule().version(), 1);
  EXPECT_FALSE(job->View(/*full=*/false).has_schedule());
  EXPECT_FALSE(job->View(/*full=*/false).has_last_step());
}

}  // namespace
}  // namespace zbpp::coordinator
