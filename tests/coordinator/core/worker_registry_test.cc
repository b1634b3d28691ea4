// WorkerRegistry (coordinator/core/worker_registry.h) on its own, with a
// FakeClock: registration, credentials, leases, assignment, Sessions,
// heartbeats, listing and forgetting, all on the one record per worker.

#include "coordinator/core/worker_registry.h"

#include <memory>
#include <optional>
#include <set>
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr double kTimeoutSeconds = 10.0;
constexpr double kRetentionSeconds = 60.0;
constexpr auto kKeepNone = [](const std::string&) { return false; };

v1::WorkerDescription Description(int n, uint64_t memory_bytes = uint64_t{1} << 30) {
  v1::WorkerDescription d;
  d.set_address(absl::StrCat("10.0.0.", n, ":7000"));
  d.set_host("node");
  d.set_device_kind(v1::DEVICE_KIND_CPU);
  d.set_memory_bytes(memory_bytes);
  return d;
}

std::vector<std::string> Ids(const std::vector<const WorkerRecord*>& records) {
  std::vector<std::string> ids;
  for (const WorkerRecord* record : records) ids.push_back(record->id);
  return ids;
}

// No worker is in a job.
std::optional<WorkerPlace> Nowhere(const std::string&, int) { return std::nullopt; }

class WorkerRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { registry_ = MakeRegistry(); }

  std::unique_ptr<WorkerRegistry> MakeRegistry(int max_workers = 4096) {
    absl::StatusOr<std::unique_ptr<WorkerRegistry>> created = WorkerRegistry::Create(
        {.clock = &clock_,
         .heartbeat_timeout_seconds = kTimeoutSeconds,
         .max_workers = max_workers,
         .lost_worker_retention_seconds = kRetentionSeconds});
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *std::move(created) : nullptr;
  }

  std::string Add(const v1::WorkerDescription& d, const std::string& credential = "secret") {
    absl::StatusOr<Registration> added = registry_->Add(d, CredentialDigest(credential));
    EXPECT_TRUE(added.ok()) << added.status();
    return added.ok() ? added->worker_id : "";
  }
  std::string Add(int n) { return Add(Description(n)); }

  const WorkerRecord& Record(const std::string& id) {
    absl::StatusOr<const WorkerRecord*> record = registry_->Get(id);
    EXPECT_TRUE(record.ok()) << record.status();
    static const WorkerRecord kNone;
    return record.ok() ? **record : kNone;
  }

  absl::Status Beat(const std::string& id) {
    return registry_->RecordHeartbeat(id, v1::Heartbeat()).status();
  }

  FakeClock clock_;
  std::unique_ptr<WorkerRegistry> registry_;
};

// ------------------------------------------------------------- options

TEST(WorkerRegistryOptions, BadOptionsAreRefusedNamingTheOption) {
  FakeClock clock;
  EXPECT_EQ(WorkerRegistry::Create({.clock = nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status status =
      WorkerRegistry::Create({.clock = &clock, .heartbeat_timeout_seconds = 0}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("heartbeat_timeout_seconds"));
  status = WorkerRegistry::Create({.clock = &clock, .max_workers = 0}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("max_workers"));
  status = WorkerRegistry::Create({.clock = &clock, .lost_worker_retention_seconds = -1})
               .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("lost_worker_retention_seconds"));
}

// -------------------------------------------------------- registration

TEST_F(WorkerRegistryTest, AddGivesIdsInOrderAndKeepsOneRecord) {
  EXPECT_EQ(Add(1), "worker-1");
  v1::WorkerDescription second = Description(2);
  second.set_name("pod-2");
  EXPECT_EQ(Add(second, "two"), "worker-2");
  const WorkerRecord& record = Record("worker-2");
  EXPECT_EQ(record.id, "worker-2");
  EXPECT_EQ(record.description.address(), "10.0.0.2:7000");
  EXPECT_EQ(record.description.name(), "pod-2");
  EXPECT_EQ(registry_->Description("worker-2"), &record.description);
  EXPECT_EQ(record.credential_digest, CredentialDigest("two"));
  EXPECT_EQ(record.state, WorkerState::kIdle);
  EXPECT_EQ(record.registered_at, clock_.Now());
  EXPECT_EQ(record.last_heartbeat, clock_.Now());
  EXPECT_EQ(record.lost_at, absl::InfinitePast());
  EXPECT_EQ(record.session, nullptr);
  EXPECT_EQ(registry_->Counts(Nowhere)["IDLE"], 2);
  // Ids carry the record's key: other spellings of the number are unknown.
  for (const char* id : {"worker-9", "worker-02", "worker-+2", "worker- 2", "node-2", ""}) {
    EXPECT_EQ(registry_->Get(id).status().code(), absl::StatusCode::kNotFound) << id;
    EXPECT_EQ(registry_->Description(id), nullptr) << id;
  }
}

TEST_F(WorkerRegistryTest, BadDescriptionsAreRefusedNamingTheFieldAndNothingIsHeld) {
  v1::WorkerDescription d = Description(1);
  d.clear_host();
  EXPECT_THAT(std::string(registry_->Add(d, "x").status().message()),
              HasSubstr("worker.host"));
  d = Description(1);
  d.clear_address();
  EXPECT_THAT(std::string(registry_->Add(d, "x").status().message()),
              HasSubstr("worker.address"));
  d = Description(1);
  d.set_name(std::string(254, 'n'));
  EXPECT_THAT(std::string(registry_->Add(d, "x").status().message()),
              HasSubstr("worker.name: must be at most 253 bytes"));
  d = Description(1);
  d.set_memory_bytes(0);
  EXPECT_EQ(registry_->Add(d, "x").status().code(), absl::StatusCode::kInvalidArgument);
  d = Description(1);
  d.set_device_identity("GPU-1234");
  absl::Status status = registry_->Add(d, "x").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("worker.device_identity"));
  for (const auto& [state, count] : registry_->Counts(Nowhere)) EXPECT_EQ(count, 0) << state;
  EXPECT_EQ(Add(1), "worker-1");  // No number was used up.
}

TEST_F(WorkerRegistryTest, AuthenticatesOnlyTheRegisteredCredential) {
  const std::string id = Add(Description(1), "right");
  EXPECT_TRUE(registry_->Authenticate(id, "right", CredentialDigest("right")).ok());
  EXPECT_EQ(registry_->Authenticate(id, "wrong", CredentialDigest("wrong")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(registry_->Authenticate(id, "", CredentialDigest("")).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(registry_->Authenticate("worker-99", "right", CredentialDigest("right")).code(),
            absl::StatusCode::kNotFound);
}

// Lost workers hold their place under the cap until they are forgotten;
// the cap counts records held, not registrations ever made.
TEST_F(WorkerRegistryTest, CapRefusesRegistrationsUntilALostWorkerIsForgotten) {
  registry_ = MakeRegistry(/*max_workers=*/2);
  Add(1);
  Add(2);
  absl::Status refused = registry_->Add(Description(3), "x").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("max_workers"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("cap of 2"));
  EXPECT_EQ(registry_->Get("worker-3").status().code(), absl::StatusCode::kNotFound);

  clock_.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_TRUE(Beat("worker-2").ok());
  EXPECT_THAT(Ids(registry_->ExpireLeases()), ElementsAre("worker-1"));
  EXPECT_EQ(registry_->Add(Description(3), "x").status().code(),
            absl::StatusCode::kResourceExhausted);
  clock_.Advance(absl::Seconds(kRetentionSeconds));
  registry_->ForgetLost(kKeepNone);
  EXPECT_TRUE(registry_->Get("worker-1").ok());  // Not past the retention yet.
  clock_.Advance(absl::Milliseconds(1));
  registry_->ForgetLost(kKeepNone);
  EXPECT_EQ(registry_->Get("worker-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Add(3), "worker-3");
}

TEST_F(WorkerRegistryTest, ForgetLostSparesWhatTheCallerKeeps) {
  for (int n = 1; n <= 3; ++n) Add(n);
  clock_.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_EQ(registry_->ExpireLeases().size(), 3u);
  clock_.Advance(absl::Seconds(kRetentionSeconds + 1));
  registry_->ForgetLost([](const std::string& id) { return id == "worker-2"; });
  EXPECT_EQ(registry_->Get("worker-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Get("worker-3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Record("worker-2").state, WorkerState::kLost);
  EXPECT_EQ(registry_->Counts(Nowhere)["LOST"], 1);
}

// -------------------------------------------------------------- leases

TEST_F(WorkerRegistryTest, LeaseExpiresJustAfterTheTimeoutNotBefore) {
  const std::string id = Add(1);
  clock_.Advance(absl::Seconds(kTimeoutSeconds) - absl::Milliseconds(1));
  EXPECT_THAT(registry_->ExpireLeases(), IsEmpty());
  EXPECT_EQ(registry_->Counts(Nowhere)["IDLE"], 1);
  clock_.Advance(absl::Milliseconds(2));
  std::vector<const WorkerRecord*> lost = registry_->ExpireLeases();
  EXPECT_THAT(Ids(lost), ElementsAre(id));
  EXPECT_EQ(lost[0]->state, WorkerState::kLost);
  EXPECT_EQ(lost[0]->lost_at, clock_.Now());
  EXPECT_EQ(registry_->Counts(Nowhere)["LOST"], 1);
  EXPECT_EQ(registry_->Counts(Nowhere)["IDLE"], 0);
  // Reported once only.
  EXPECT_THAT(registry_->ExpireLeases(), IsEmpty());
}

TEST_F(WorkerRegistryTest, HeartbeatsAndSessionsRenewTheLease) {
  const std::string renewed = Add(1);
  const std::string silent = Add(2);
  const std::string session = Add(3);
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(kTimeoutSeconds * 0.75));
    ASSERT_TRUE(Beat(renewed).ok());
    if (i == 0) {
      ASSERT_TRUE(registry_->OpenSession(session, Description(3).address()).ok());
    }
    std::vector<std::string> lost = Ids(registry_->ExpireLeases());
    if (i == 1) {
      EXPECT_THAT(lost, ElementsAre(silent));  // 15 s without a beat.
    } else if (i == 2) {
      EXPECT_THAT(lost, ElementsAre(session));  // 15 s after its Session opened.
    } else {
      EXPECT_THAT(lost, IsEmpty()) << "round " << i;
    }
  }
  EXPECT_EQ(Record(renewed).state, WorkerState::kIdle);
  EXPECT_EQ(Record(renewed).last_heartbeat, clock_.Now());
}

TEST_F(WorkerRegistryTest, HeartbeatOfUnknownOrLostWorkerIsNotFound) {
  EXPECT_EQ(Beat("worker-7").code(), absl::StatusCode::kNotFound);
  const std::string id = Add(1);
  clock_.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_EQ(registry_->ExpireLeases().size(), 1u);
  absl::Status status = Beat(id);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("register again"));
  // A late heartbeat does not revive it.
  EXPECT_EQ(Record(id).state, WorkerState::kLost);
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
  EXPECT_EQ(Record(id).heartbeat.error(), *kept);
  // Two-byte characters: the cut does not split one.
  std::string accents;
  while (accents.size() <= WorkerRegistry::kMaxHeartbeatErrorBytes) accents += "\xC3\xA9";
  hb.set_error(accents);
  kept = registry_->RecordHeartbeat(id, hb);
  ASSERT_TRUE(kept.ok());
  const size_t body = kept->size() - std::string(" [... truncated]").size();
  EXPECT_EQ(body % 2, 0u);
  EXPECT_EQ(kept->substr(0, body), accents.substr(0, body));

  absl::StatusOr<v1::ListWorkersResponse> listed =
      registry_->List(v1::ListWorkersRequest(), Nowhere);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->workers_size(), 1);
  EXPECT_EQ(listed->workers(0).phase(), v1::WORKER_PHASE_FAILED);
  EXPECT_EQ(listed->workers(0).state(), v1::WORKER_STATE_IDLE);
}

// ---------------------------------------------------------- assignment

TEST_F(WorkerRegistryTest, AssignTakesFreeWorkersInRegistrationOrder) {
  for (int n = 1; n <= 6; ++n) Add(n);
  // worker-2 dies before the job arrives.
  clock_.Advance(absl::Seconds(kTimeoutSeconds - 1));
  for (const char* id : {"worker-1", "worker-3", "worker-4", "worker-5", "worker-6"}) {
    ASSERT_TRUE(Beat(id).ok());
  }
  clock_.Advance(absl::Seconds(2));
  ASSERT_THAT(Ids(registry_->ExpireLeases()), ElementsAre("worker-2"));

  absl::StatusOr<std::vector<std::string>> preview = registry_->Preview("job-a", 3);
  ASSERT_TRUE(preview.ok()) << preview.status();
  EXPECT_EQ(registry_->CountAssignable(), 5);  // Preview changes nothing.
  absl::StatusOr<std::vector<std::string>> job_a = registry_->Assign("job-a", 3);
  ASSERT_TRUE(job_a.ok()) << job_a.status();
  EXPECT_THAT(*job_a, ElementsAre("worker-1", "worker-3", "worker-4"));
  EXPECT_EQ(*preview, *job_a);
  EXPECT_EQ(Record("worker-4").worker_index, 2);
  EXPECT_EQ(Record("worker-4").job_id, "job-a");
  EXPECT_EQ(Record("worker-4").state, WorkerState::kAssigned);

  absl::Status job_b = registry_->Assign("job-b", 3).status();
  EXPECT_EQ(job_b.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(job_b.message()), HasSubstr("needs 3 workers; 2 registered and free"));
  EXPECT_EQ(registry_->CountAssignable(), 2);  // Unchanged.

  EXPECT_EQ(registry_->Assign("job-a", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_->Assign("job-c", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Assign("", 1).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(registry_->Release("job-a"), 3);
  EXPECT_EQ(Record("worker-1").worker_index, -1);
  EXPECT_EQ(Record("worker-1").job_id, "");
  EXPECT_EQ(Record("worker-1").state, WorkerState::kIdle);
  // Released workers drain until they say they are idle: a dead process
  // keeps its lease for a while and must not be handed the next job.
  EXPECT_TRUE(Record("worker-1").draining);
  EXPECT_EQ(registry_->CountAssignable(), 2);
  EXPECT_EQ(registry_->Assign("job-b", 5).status().code(),
            absl::StatusCode::kResourceExhausted);
  for (const char* id : {"worker-1", "worker-3", "worker-4"}) {
    EXPECT_TRUE(registry_->ConfirmIdle(id));
  }
  EXPECT_FALSE(registry_->ConfirmIdle("worker-1"));  // Already idle.
  EXPECT_FALSE(registry_->ConfirmIdle("worker-99"));
  absl::StatusOr<std::vector<std::string>> again = registry_->Assign("job-b", 5);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(*again, ElementsAre("worker-1", "worker-3", "worker-4", "worker-5", "worker-6"));
}

TEST_F(WorkerRegistryTest, AssignGivesEachIndexTheFirstWorkerWithEnoughMemory) {
  Add(Description(1, 1000));
  Add(Description(2, 4000));
  Add(Description(3, 2000));
  absl::StatusOr<std::vector<std::string>> fit =
      registry_->Preview("job-a", 3, {3000, 1000, 1500});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_THAT(*fit, ElementsAre("worker-2", "worker-1", "worker-3"));
  // The needs repeat over the indices: index 1 needs 1500 bytes too.
  fit = registry_->Preview("job-a", 2, {1500});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_THAT(*fit, ElementsAre("worker-2", "worker-3"));
  absl::Status refused = registry_->Assign("job-a", 2, {5000}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("5000 bytes that worker index 0 needs (largest free: 4000 bytes)"));
  EXPECT_EQ(registry_->CountAssignable(), 3);
}

TEST_F(WorkerRegistryTest, LostAssignedWorkerKeepsItsJobForRecovery) {
  Add(1);
  Add(2);
  ASSERT_TRUE(registry_->Assign("job-a", 2).ok());
  clock_.Advance(absl::Seconds(kTimeoutSeconds - 1));
  ASSERT_TRUE(Beat("worker-1").ok());
  clock_.Advance(absl::Seconds(2));
  std::vector<const WorkerRecord*> lost = registry_->ExpireLeases();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0]->id, "worker-2");
  EXPECT_EQ(lost[0]->job_id, "job-a");
  EXPECT_EQ(lost[0]->worker_index, 1);
  EXPECT_EQ(registry_->Release("job-a"), 1);  // Only the live one.
  EXPECT_EQ(Record("worker-2").job_id, "job-a");
  EXPECT_EQ(registry_->Counts(Nowhere)["IDLE"], 1);
}

TEST_F(WorkerRegistryTest, ReRegistrationAtTheSameAddressSupersedes) {
  const std::string old_id = Add(1);
  ASSERT_TRUE(registry_->Assign("job-a", 1).ok());
  absl::StatusOr<Registration> again = registry_->Add(Description(1), "new");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->worker_id, "worker-2");
  ASSERT_NE(again->superseded, nullptr);
  EXPECT_EQ(again->superseded->id, old_id);
  EXPECT_EQ(again->superseded->job_id, "job-a");
  EXPECT_EQ(Record(old_id).state, WorkerState::kLost);
  EXPECT_EQ(Record(old_id).lost_at, clock_.Now());
  EXPECT_EQ(Beat(old_id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Counts(Nowhere)["IDLE"], 1);
  EXPECT_EQ(registry_->Add(Description(2), "x")->superseded, nullptr);
}

// ------------------------------------------------------------ sessions

TEST_F(WorkerRegistryTest, OneSessionAtATimeAtTheRegisteredAddress) {
  const std::string id = Add(1);
  EXPECT_EQ(registry_->OpenSession(id, "10.0.0.2:7000").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->OpenSession("worker-9", "10.0.0.1:7000").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<WorkerRegistry::OpenedSession> opened =
      registry_->OpenSession(id, Description(1).address());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->record->id, id);
  EXPECT_EQ(opened->record->session, opened->outbox);
  absl::Status second = registry_->OpenSession(id, Description(1).address()).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(second.message()), HasSubstr(id));

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
  EXPECT_EQ(Record(id).session, nullptr);
  registry_->Send(id, message);  // Dropped: no Session is open.
  EXPECT_TRUE(registry_->OpenSession(id, Description(1).address()).ok());
}

TEST_F(WorkerRegistryTest, LosingOrClosingAllSessionsEndsThemWithTheStatus) {
  const std::string lost = Add(1);
  const std::string kept = Add(2);
  std::shared_ptr<SessionOutbox> lost_outbox =
      registry_->OpenSession(lost, Description(1).address())->outbox;
  std::shared_ptr<SessionOutbox> kept_outbox =
      registry_->OpenSession(kept, Description(2).address())->outbox;
  registry_->LoseSession(lost, absl::NotFoundError("worker-1 lost"));
  std::vector<SessionMessage> popped;
  EXPECT_EQ(lost_outbox->Pop(absl::InfinitePast(), &popped).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Record(lost).session, nullptr);
  EXPECT_TRUE(kept_outbox->Pop(absl::InfinitePast(), &popped).ok());
  registry_->CloseAllSessions(absl::UnavailableError("shutting down"));
  EXPECT_EQ(kept_outbox->Pop(absl::InfinitePast(), &popped).code(),
            absl::StatusCode::kUnavailable);
}

// --------------------------------------------------------------- views

TEST_F(WorkerRegistryTest, ListsPagesAndCountsByApiState) {
  for (int n = 1; n <= 3; ++n) Add(n);
  ASSERT_TRUE(registry_->Assign("job-1", 1).ok());
  // worker-1 holds index 0 of job-1, which runs.
  auto running = [](const std::string& job_id, int index) -> std::optional<WorkerPlace> {
    if (job_id != "job-1") return std::nullopt;
    return WorkerPlace{true, index, 0};
  };
  v1::ListWorkersRequest request;
  request.set_page_size(2);
  absl::StatusOr<v1::ListWorkersResponse> first = registry_->List(request, running);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->workers_size(), 2);
  EXPECT_EQ(first->workers(0).state(), v1::WORKER_STATE_RUNNING);
  EXPECT_EQ(first->workers(0).job_id(), "job-1");
  EXPECT_EQ(first->workers(0).stage(), 0);
  EXPECT_EQ(first->workers(0).description().address(), "10.0.0.1:7000");
  EXPECT_EQ(first->workers(1).job_id(), "");
  EXPECT_EQ(first->workers(1).stage(), -1);
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
  // While its job is not running the worker is ASSIGNED.
  EXPECT_EQ(registry_->Counts([](const std::string&, int) {
    return std::optional<WorkerPlace>(WorkerPlace{false, 0, 0});
  })["ASSIGNED"], 1);
  request.set_page_token("x");
  EXPECT_THAT(std::string(registry_->List(request, running).status().message()),
              HasSubstr("page_token"));
  request.clear_page_token();
  request.set_page_size(-1);
  EXPECT_THAT(std::string(registry_->List(request, running).status().message()),
              HasSubstr("page_size"));
}

TEST_F(WorkerRegistryTest, PagesStartAfterTheTokenAndSkipLostUnlessAsked) {
  for (int n = 1; n <= 12; ++n) Add(n);
  clock_.Advance(absl::Seconds(kTimeoutSeconds + 1));
  for (int n = 1; n <= 12; ++n) {
    if (n != 10) {
      ASSERT_TRUE(Beat(absl::StrCat("worker-", n)).ok());
    }
  }
  ASSERT_THAT(Ids(registry_->ExpireLeases()), ElementsAre("worker-10"));
  v1::ListWorkersRequest request;
  request.set_page_size(2);
  request.set_page_token("8");
  absl::StatusOr<v1::ListWorkersResponse> page = registry_->List(request, Nowhere);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->workers_size(), 2);
  EXPECT_EQ(page->workers(0).worker_id(), "worker-9");
  EXPECT_EQ(page->workers(1).worker_id(), "worker-11");  // LOST worker-10 skipped.
  EXPECT_EQ(page->next_page_token(), "11");
  request.add_states(v1::WORKER_STATE_LOST);
  request.clear_page_token();
  page = registry_->List(request, Nowhere);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->workers_size(), 1);
  EXPECT_EQ(page->workers(0).worker_id(), "worker-10");
  EXPECT_EQ(page->workers(0).state(), v1::WORKER_STATE_LOST);
  // A token naming a forgotten worker keeps its place.
  clock_.Advance(absl::Seconds(kRetentionSeconds + 1));
  registry_->ForgetLost(kKeepNone);
  request.clear_states();
  request.set_page_token("10");
  page = registry_->List(request, Nowhere);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->workers_size(), 2);
  EXPECT_EQ(page->workers(0).worker_id(), "worker-11");
}

// ----------------------------------------------------------- forgetting

TEST_F(WorkerRegistryTest, ForgettingAWorkerLeavesNothingOfItBehind) {
  v1::WorkerDescription old_description = Description(1);
  old_description.set_name("old");
  const std::string old_id = Add(old_description, "old-secret");
  std::shared_ptr<SessionOutbox> old_outbox =
      registry_->OpenSession(old_id, old_description.address())->outbox;
  v1::Heartbeat hb;
  hb.set_phase(v1::WORKER_PHASE_FAILED);
  hb.set_error("gloo: connect timed out");
  ASSERT_TRUE(registry_->RecordHeartbeat(old_id, hb).ok());
  ASSERT_TRUE(registry_->Assign("job-a", 1).ok());
  clock_.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_EQ(registry_->ExpireLeases().size(), 1u);
  clock_.Advance(absl::Seconds(kRetentionSeconds + 1));
  registry_->ForgetLost(kKeepNone);

  std::vector<SessionMessage> popped;
  EXPECT_EQ(old_outbox->Pop(absl::InfinitePast(), &popped).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Get(old_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->Description(old_id), nullptr);
  EXPECT_EQ(registry_->Authenticate(old_id, "old-secret", CredentialDigest("old-secret")).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->OpenSession(old_id, old_description.address()).status().code(),
            absl::StatusCode::kNotFound);
  for (const auto& [state, count] : registry_->Counts(Nowhere)) EXPECT_EQ(count, 0) << state;

  // The same process registers again: a new id and a fresh record.
  const std::string new_id = Add(Description(1), "new-secret");
  EXPECT_EQ(new_id, "worker-2");
  const WorkerRecord& record = Record(new_id);
  EXPECT_EQ(record.description.name(), "");
  EXPECT_EQ(record.credential_digest, CredentialDigest("new-secret"));
  EXPECT_EQ(record.state, WorkerState::kIdle);
  EXPECT_EQ(record.job_id, "");
  EXPECT_EQ(record.worker_index, -1);
  EXPECT_FALSE(record.draining);
  EXPECT_EQ(record.lost_at, absl::InfinitePast());
  EXPECT_EQ(record.heartbeat.phase(), v1::WORKER_PHASE_UNSPECIFIED);
  EXPECT_EQ(record.heartbeat.error(), "");
  EXPECT_EQ(record.session, nullptr);
  EXPECT_EQ(registry_->Release("job-a"), 0);  // Nothing holds the old job.
  absl::StatusOr<v1::ListWorkersResponse> listed =
      registry_->List(v1::ListWorkersRequest(), Nowhere);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->workers_size(), 1);
  EXPECT_EQ(listed->workers(0).worker_id(), new_id);
  EXPECT_EQ(listed->workers(0).phase(), v1::WORKER_PHASE_UNSPECIFIED);
  // Nothing sent to the old id reaches the new worker's Session.
  std::shared_ptr<SessionOutbox> new_outbox =
      registry_->OpenSession(new_id, Description(1).address())->outbox;
  registry_->Send(old_id, std::make_shared<v1::SessionResponse>());
  popped.clear();
  EXPECT_TRUE(new_outbox->Pop(absl::InfinitePast(), &popped).ok());
  EXPECT_THAT(popped, IsEmpty());
}

// A worker holding a stage its job keeps (docs/elastic.md) is that job's
// spare: listed SPARE with the job and stage, given to no other job by
// Assign, taken by its own job's AssignWorkers; a job that no longer keeps
// it frees it.
// What a restarted coordinator places (docs/elastic.md, "Coordinator
// restart"): the idle workers with a Session that hold the job's state.
TEST_F(WorkerRegistryTest, IdleHoldersAreTheIdleWorkersWithASessionHoldingTheJob) {
  std::vector<std::string> ids;
  for (int n = 1; n <= 4; ++n) ids.push_back(Add(n));
  for (int i : {0, 1, 3}) {
    ASSERT_TRUE(registry_->OpenSession(ids[i], Description(i + 1).address()).ok());
  }
  for (int i = 0; i < 4; ++i) {
    v1::Heartbeat hb;
    hb.mutable_held()->set_job_id(i == 1 ? "job-b" : "job-a");
    ASSERT_TRUE(registry_->RecordHeartbeat(ids[i], hb).ok());
  }
  ASSERT_TRUE(registry_->AssignWorkers("job-c", {ids[3]}).ok());
  std::vector<std::string> holders;
  for (const WorkerRecord* record : registry_->IdleHolders("job-a")) {
    holders.push_back(record->id);
  }
  // ids[1] holds another job, ids[2] has no Session, ids[3] is assigned.
  EXPECT_THAT(holders, ::testing::ElementsAre(ids[0]));
  EXPECT_TRUE(registry_->IdleHolders("job-d").empty());
}

TEST(WorkerRegistrySpares, ASpareIsReservedForItsJobOnly) {
  FakeClock clock;
  std::set<std::string> kept = {"worker-1"};
  absl::StatusOr<std::unique_ptr<WorkerRegistry>> created = WorkerRegistry::Create(
      {.clock = &clock,
       .keeps_held = [&kept](const std::string& worker_id, const v1::HeldState& held) {
         return held.job_id() == "job-a" && kept.count(worker_id) > 0;
       }});
  ASSERT_TRUE(created.ok()) << created.status();
  WorkerRegistry& registry = **created;
  std::vector<std::string> ids;
  for (int n = 1; n <= 3; ++n) {
    v1::WorkerDescription d;
    d.set_address(absl::StrCat("10.0.0.", n, ":7000"));
    d.set_host("node");
    d.set_device_kind(v1::DEVICE_KIND_CPU);
    d.set_memory_bytes(1 << 30);
    ids.push_back(registry.Add(d, CredentialDigest("secret"))->worker_id);
  }
  v1::Heartbeat holding;
  holding.mutable_held()->set_job_id("job-a");
  holding.mutable_held()->set_attempt(1);
  holding.mutable_held()->set_stage(1);
  holding.mutable_held()->set_step(7);
  ASSERT_TRUE(registry.RecordHeartbeat(ids[0], holding).ok());
  EXPECT_EQ(registry.CountAssignable(), 2);
  EXPECT_EQ(registry.Counts(Nowhere)["SPARE"], 1);
  const v1::Worker spare = registry.List({}, Nowhere)->workers(0);
  EXPECT_EQ(spare.state(), v1::WORKER_STATE_SPARE);
  EXPECT_EQ(spare.job_id(), "job-a");
  EXPECT_EQ(spare.stage(), 1);
  EXPECT_EQ(spare.replica(), -1);
  // Another job takes the two others, never the spare.
  EXPECT_THAT(*registry.Preview("job-b", 2), ::testing::ElementsAre(ids[1], ids[2]));
  EXPECT_EQ(registry.Preview("job-b", 3).status().code(), absl::StatusCode::kResourceExhausted);
  const absl::Status refused = registry.AssignWorkers("job-b", {ids[1], ids[0]});
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr(absl::StrCat("worker ", ids[0],
                                     " is not free for it (a spare of another job)")));
  EXPECT_EQ(registry.Get(ids[1]).value()->state, WorkerState::kIdle)
      << "nothing changes on a refusal";
  // Its own job takes it, the free one beside it.
  ASSERT_TRUE(registry.AssignWorkers("job-a", {ids[0], ids[1]}).ok());
  EXPECT_EQ(registry.Get(ids[0]).value()->worker_index, 0);
  EXPECT_EQ(registry.Get(ids[1]).value()->worker_index, 1);
  EXPECT_EQ(registry.AssignWorkers("job-a", {ids[1]}).code(),
            absl::StatusCode::kFailedPrecondition)
      << "assigned already";
  // Released and no longer kept: an idle worker like any other.
  registry.Release("job-a");
  kept.clear();
  ASSERT_TRUE(registry.ConfirmIdle(ids[0]));
  ASSERT_TRUE(registry.ConfirmIdle(ids[1]));
  EXPECT_EQ(registry.CountAssignable(), 3);
  EXPECT_EQ(registry.Counts(Nowhere)["SPARE"], 0);
}

}  // namespace
}  // namespace zbpp::coordinator
