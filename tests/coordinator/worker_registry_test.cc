// WorkerRegistry (coordinator/core/worker_registry.h) on its own: a
// worker's registration, credential, Sessions, heartbeats, listing and
// forgetting, with a FakeClock.

#include "coordinator/core/worker_registry.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/worker_credential.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

v1::WorkerDescription Description(int n) {
  v1::WorkerDescription d;
  d.set_address(absl::StrCat("10.0.0.", n, ":7000"));
  d.set_host("node");
  d.set_device_kind(v1::DEVICE_KIND_CPU);
  d.set_memory_bytes(uint64_t{1} << 30);
  return d;
}

// No worker is in a job.
std::optional<WorkerPlace> Nowhere(const std::string&, int) { return std::nullopt; }

class WorkerRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = *WorkerRegistry::Create({.clock = &clock_,
                                         .heartbeat_timeout_seconds = 10,
                                         .lost_worker_retention_seconds = 60});
  }

  std::string Add(int n, const std::string& credential = "secret") {
    absl::StatusOr<Registration> added =
        registry_->Add(Description(n), CredentialDigest(credential));
    EXPECT_TRUE(added.ok()) << added.status();
    return added.ok() ? added->worker_id : "";
  }

  FakeClock clock_;
  std::unique_ptr<WorkerRegistry> registry_;
};

TEST(WorkerRegistryDescription, RefusesMissingAndOversizedFields) {
  EXPECT_TRUE(WorkerRegistry::CheckDescription(Description(1)).ok());
  v1::WorkerDescription d = Description(1);
  d.clear_host();
  EXPECT_THAT(std::string(WorkerRegistry::CheckDescription(d).message()),
              HasSubstr("worker.host"));
  d = Description(1);
  d.set_name(std::string(254, 'n'));
  EXPECT_THAT(std::string(WorkerRegistry::CheckDescription(d).message()),
              HasSubstr("worker.name: must be at most 253 bytes"));
  d = Description(1);
  d.set_memory_bytes(0);
  EXPECT_EQ(WorkerRegistry::CheckDescription(d).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkerRegistryTest, AuthenticatesOnlyTheRegisteredCredential) {
  const std::string id = Add(1, "right");
  EXPECT_TRUE(registry_->Authenticate(id, "right", CredentialDigest("right")).ok());
  EXPECT_EQ(registry_->Authenticate(id, "wrong", CredentialDigest("wrong")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(registry_->Authenticate(id, "", CredentialDigest("")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(registry_->Authenticate("worker-99", "right", CredentialDigest("right")).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(WorkerRegistryTest, OneSessionAtATimeAtTheRegisteredAddress) {
  const std::string id = Add(1);
  EXPECT_EQ(registry_->OpenSession(id, "10.0.0.2:7000").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<WorkerRegistry::OpenedSession> opened =
      registry_->OpenSession(id, Description(1).address());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->record.id, id);
  EXPECT_EQ(registry_->OpenSession(id, Description(1).address()).status().code(),
            absl::StatusCode::kAlreadyExists);

  auto message = std::make_shared<v1::SessionResponse>();
  message->mutable_grant()->set_through_step(3);
  registry_->Send(id, message);
  std::vector<SessionMessage> popped;
  ASSERT_TRUE(opened->outbox->Pop(absl::InfinitePast(), &popped).ok());
  ASSERT_EQ(popped.size(), 1u);
  EXPECT_EQ(popped[0]->grant().through_step(), 3);

  registry_->CloseSession(id, opened->outbox);
  EXPECT_EQ(opened->outbox->Pop(absl::InfinitePast(), &popped).code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(registry_->OpenSession(id, Description(1).address()).ok());
}

TEST_F(WorkerRegistryTest, HeartbeatKeepsABoundedErrorAndThePhase) {
  const std::string id = Add(1);
  v1::Heartbeat hb;
  hb.set_phase(v1::WORKER_PHASE_FAILED);
  hb.set_error(std::string(WorkerRegistry::kMaxHeartbeatErrorBytes + 10, 'e'));
  absl::StatusOr<std::string> kept = registry_->RecordHeartbeat(id, hb);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->size(), WorkerRegistry::kMaxHeartbeatErrorBytes);
  EXPECT_THAT(*kept, HasSubstr("[... truncated]"));
  absl::StatusOr<v1::ListWorkersResponse> listed =
      registry_->List(v1::ListWorkersRequest(), Nowhere);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->workers_size(), 1);
  EXPECT_EQ(listed->workers(0).phase(), v1::WORKER_PHASE_FAILED);
  EXPECT_EQ(listed->workers(0).state(), v1::WORKER_STATE_IDLE);
  EXPECT_EQ(registry_->RecordHeartbeat("worker-99", hb).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(WorkerRegistryTest, ListsPagesAndCountsByApiState) {
  for (int n = 1; n <= 3; ++n) Add(n);
  ASSERT_TRUE(registry_->membership().Assign("job-1", 1).ok());
  // worker-1 holds rank 0 of job-1, which runs.
  auto running = [](const std::string& job_id, int rank) -> std::optional<WorkerPlace> {
    if (job_id != "job-1") return std::nullopt;
    return WorkerPlace{true, rank, 0};
  };
  v1::ListWorkersRequest request;
  request.set_page_size(2);
  absl::StatusOr<v1::ListWorkersResponse> first = registry_->List(request, running);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->workers_size(), 2);
  EXPECT_EQ(first->workers(0).state(), v1::WORKER_STATE_RUNNING);
  EXPECT_EQ(first->workers(0).job_id(), "job-1");
  EXPECT_EQ(first->next_page_token(), "2");
  request.set_page_token(first->next_page_token());
  absl::StatusOr<v1::ListWorkersResponse> second = registry_->List(request, running);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->workers_size(), 1);
  EXPECT_EQ(second->workers(0).worker_id(), "worker-3");
  EXPECT_TRUE(second->next_page_token().empty());

  std::map<std::string, int> counts = registry_->Counts(running);
  EXPECT_EQ(counts["RUNNING"], 1);
  EXPECT_EQ(counts["IDLE"], 2);
  EXPECT_EQ(counts["LOST"], 0);
  request.set_page_token("x");
  EXPECT_EQ(registry_->List(request, running).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkerRegistryTest, ForgetsLostWorkersWithEverythingKeptByTheirId) {
  const std::string id = Add(1);
  std::shared_ptr<SessionOutbox> outbox =
      registry_->OpenSession(id, Description(1).address())->outbox;
  clock_.Advance(absl::Seconds(11));
  ASSERT_EQ(registry_->membership().ExpireLeases().size(), 1u);
  clock_.Advance(absl::Seconds(61));
  registry_->ForgetLost([](const std::string&) { return false; });
  std::vector<SessionMessage> popped;
  EXPECT_EQ(outbox->Pop(absl::InfinitePast(), &popped).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Description(id), nullptr);
  EXPECT_EQ(registry_->Authenticate(id, "secret", CredentialDigest("secret")).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Counts(Nowhere)["LOST"], 0);
}

}  // namespace
}  // namespace zbpp::coordinator
