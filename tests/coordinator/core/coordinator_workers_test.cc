// The coordinator core's workers (FakeClock, in-memory SQLite store, fake
// workers calling the core): registration checks, one Session per worker,
// credentials, capped heartbeat errors and the attempt's rendezvous scope.

#include "coordinator/core/coordinator.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using testing::CoordinatorTest;
using testing::FakeWorker;
using testing::TestSpec;

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

}  // namespace
}  // namespace zbpp::coordinator
