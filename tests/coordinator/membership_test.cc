#include "coordinator/core/membership.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kTimeoutSeconds = 10.0;

WorkerInfo Info(const std::string& address) {
  return WorkerInfo{address, "node-a", "cpu", int64_t{1} << 30};
}

std::vector<std::string> Ids(const std::vector<WorkerRecord>& records) {
  std::vector<std::string> ids;
  for (const WorkerRecord& record : records) ids.push_back(record.id);
  return ids;
}

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Membership>> created = Membership::Create(
        {.clock = &clock_, .heartbeat_timeout_seconds = kTimeoutSeconds});
    ASSERT_TRUE(created.ok()) << created.status();
    membership_ = *std::move(created);
  }

  std::string MustRegister(const std::string& address) {
    absl::StatusOr<Registration> registration =
        membership_->Register(Info(address));
    EXPECT_TRUE(registration.ok()) << registration.status();
    return registration.ok() ? registration->worker_id : "";
  }

  FakeClock clock_;
  std::unique_ptr<Membership> membership_;
};

TEST(MembershipOptions, BadOptionsAreRefused) {
  FakeClock clock;
  EXPECT_EQ(Membership::Create({.clock = nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status status =
      Membership::Create({.clock = &clock, .heartbeat_timeout_seconds = 0})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("heartbeat_timeout_seconds"));
  status = Membership::Create({.clock = &clock, .max_workers = 0}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("max_workers"));
  status = Membership::Create(
               {.clock = &clock, .lost_worker_retention_seconds = -1})
               .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("lost_worker_retention_seconds"));
}

// Lost workers hold their place under the cap until they are forgotten;
// the cap counts records held, not registrations ever made.
TEST(MembershipBounds, CapRefusesRegistrationsUntilALostWorkerIsForgotten) {
  FakeClock clock;
  std::unique_ptr<Membership> membership =
      *Membership::Create({.clock = &clock,
                           .heartbeat_timeout_seconds = kTimeoutSeconds,
                           .max_workers = 2,
                           .lost_worker_retention_seconds = 60});
  ASSERT_TRUE(membership->Register(Info("a:1")).ok());
  ASSERT_TRUE(membership->Register(Info("b:1")).ok());
  absl::StatusOr<Registration> refused = membership->Register(Info("c:1"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("cap of 2"));
  EXPECT_EQ(membership->Get("worker-3").status().code(),
            absl::StatusCode::kNotFound);

  clock.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_EQ(membership->Heartbeat("worker-2").code(),
            absl::StatusCode::kOk);
  EXPECT_THAT(Ids(membership->ExpireLeases()), ElementsAre("worker-1"));
  EXPECT_EQ(membership->Register(Info("c:1")).status().code(),
            absl::StatusCode::kResourceExhausted);
  const auto keep_none = [](const std::string&) { return false; };
  clock.Advance(absl::Seconds(60));
  EXPECT_TRUE(membership->ForgetLost(keep_none).empty());
  clock.Advance(absl::Milliseconds(1));
  EXPECT_THAT(membership->ForgetLost(keep_none), ElementsAre("worker-1"));
  EXPECT_EQ(membership->Get("worker-1").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(membership->Register(Info("c:1"))->worker_id, "worker-3");
}

TEST(MembershipBounds, ForgetLostSparesWhatTheCallerKeeps) {
  FakeClock clock;
  std::unique_ptr<Membership> membership =
      *Membership::Create({.clock = &clock,
                           .heartbeat_timeout_seconds = kTimeoutSeconds,
                           .lost_worker_retention_seconds = 0});
  ASSERT_TRUE(membership->Register(Info("a:1")).ok());
  ASSERT_TRUE(membership->Register(Info("b:1")).ok());
  ASSERT_TRUE(membership->Register(Info("c:1")).ok());
  clock.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_EQ(membership->ExpireLeases().size(), 3u);
  clock.Advance(absl::Seconds(1));
  EXPECT_THAT(membership->ForgetLost([](const std::string& id) {
    return id == "worker-2";
  }),
              ElementsAre("worker-1", "worker-3"));
  std::vector<int64_t> held;
  membership->ForEachAfter(0, [&](int64_t seq, const WorkerRecord& record) {
    held.push_back(seq);
    EXPECT_EQ(record.state, WorkerState::kLost);
    return true;
  });
  EXPECT_THAT(held, ElementsAre(2));
}

TEST_F(MembershipTest, ForEachAfterStartsAfterTheSequenceAndStopsOnFalse) {
  for (int i = 1; i <= 12; ++i) MustRegister(absl::StrCat("10.0.0.", i, ":1"));
  std::vector<std::string> seen;
  membership_->ForEachAfter(9, [&](int64_t, const WorkerRecord& record) {
    seen.push_back(record.id);
    return seen.size() < 2;
  });
  EXPECT_THAT(seen, ElementsAre("worker-10", "worker-11"));
}

TEST_F(MembershipTest, RegisterGivesIdsInOrderAndKeepsTheInfo) {
  EXPECT_EQ(MustRegister("10.0.0.1:7000"), "worker-1");
  EXPECT_EQ(MustRegister("10.0.0.2:7000"), "worker-2");
  absl::StatusOr<WorkerRecord> record = membership_->Get("worker-2");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->info.address, "10.0.0.2:7000");
  EXPECT_EQ(record->info.memory_bytes, int64_t{1} << 30);
  EXPECT_EQ(record->state, WorkerState::kRegistered);
  EXPECT_EQ(record->registered_at, clock_.Now());
  EXPECT_EQ(membership_->Count(WorkerState::kRegistered), 2);
  EXPECT_EQ(membership_->Get("worker-9").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(MembershipTest, BadRegistrationsAreRefused) {
  EXPECT_EQ(membership_->Register(Info("")).status().code(),
            absl::StatusCode::kInvalidArgument);
  WorkerInfo negative = Info("a:1");
  negative.memory_bytes = -1;
  EXPECT_EQ(membership_->Register(negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  int held = 0;
  membership_->ForEachAfter(0, [&](int64_t, const WorkerRecord&) { return ++held > 0; });
  EXPECT_EQ(held, 0);
}

TEST_F(MembershipTest, LeaseExpiresJustAfterTheTimeoutNotBefore) {
  const std::string id = MustRegister("a:1");
  clock_.Advance(absl::Seconds(kTimeoutSeconds) - absl::Milliseconds(1));
  EXPECT_TRUE(membership_->ExpireLeases().empty());
  EXPECT_EQ(membership_->Count(WorkerState::kRegistered), 1);
  clock_.Advance(absl::Milliseconds(2));
  std::vector<WorkerRecord> lost = membership_->ExpireLeases();
  EXPECT_THAT(Ids(lost), ElementsAre(id));
  EXPECT_EQ(lost[0].state, WorkerState::kLost);
  EXPECT_EQ(membership_->Count(WorkerState::kLost), 1);
  EXPECT_EQ(membership_->Count(WorkerState::kRegistered), 0);
  // Reported once only.
  EXPECT_TRUE(membership_->ExpireLeases().empty());
}

TEST_F(MembershipTest, HeartbeatsRenewTheLease) {
  const std::string renewed = MustRegister("a:1");
  const std::string silent = MustRegister("b:1");
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(kTimeoutSeconds * 0.75));
    ASSERT_TRUE(membership_->Heartbeat(renewed).ok());
    std::vector<WorkerRecord> lost = membership_->ExpireLeases();
    if (i == 1) {
      EXPECT_THAT(Ids(lost), ElementsAre(silent));  // 15 s without a beat
    } else {
      EXPECT_TRUE(lost.empty()) << "round " << i;
    }
  }
  EXPECT_EQ(membership_->Get(renewed)->state, WorkerState::kRegistered);
  EXPECT_EQ(membership_->Get(renewed)->last_heartbeat, clock_.Now());
}

TEST_F(MembershipTest, HeartbeatOfUnknownOrLostWorkerIsNotFound) {
  EXPECT_EQ(membership_->Heartbeat("worker-7").code(),
            absl::StatusCode::kNotFound);
  const std::string id = MustRegister("a:1");
  clock_.Advance(absl::Seconds(kTimeoutSeconds + 1));
  ASSERT_EQ(membership_->ExpireLeases().size(), 1u);
  absl::Status status = membership_->Heartbeat(id);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("register again"));
  // A late heartbeat does not revive it.
  EXPECT_EQ(membership_->Get(id)->state, WorkerState::kLost);
}

TEST_F(MembershipTest, AssignTakesFreeWorkersInRegistrationOrder) {
  for (int i = 0; i < 6; ++i) MustRegister("w:" + std::to_string(i));
  // worker-2 dies before the job arrives.
  clock_.Advance(absl::Seconds(kTimeoutSeconds - 1));
  for (const char* id :
       {"worker-1", "worker-3", "worker-4", "worker-5", "worker-6"}) {
    ASSERT_TRUE(membership_->Heartbeat(id).ok());
  }
  clock_.Advance(absl::Seconds(2));
  ASSERT_THAT(Ids(membership_->ExpireLeases()), ElementsAre("worker-2"));

  absl::StatusOr<Assignment> job_a = membership_->Assign("job-a", 3);
  ASSERT_TRUE(job_a.ok()) << job_a.status();
  EXPECT_THAT(job_a->worker_ids,
              ElementsAre("worker-1", "worker-3", "worker-4"));
  EXPECT_EQ(membership_->Get("worker-4")->worker_index, 2);
  EXPECT_EQ(membership_->Get("worker-4")->job_id, "job-a");
  EXPECT_EQ(membership_->Count(WorkerState::kAssigned), 3);

  absl::StatusOr<Assignment> job_b = membership_->Assign("job-b", 3);
  EXPECT_EQ(job_b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(job_b.status().message()),
              HasSubstr("needs 3 workers; 2 registered and free"));
  EXPECT_EQ(membership_->Count(WorkerState::kRegistered), 2);  // unchanged

  EXPECT_EQ(membership_->Assign("job-a", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(membership_->Assign("job-c", 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(membership_->Release("job-a"), 3);
  EXPECT_EQ(membership_->Get("worker-1")->worker_index, -1);
  // Released workers drain until they say they are idle: a dead process
  // keeps its lease for a while and must not be handed the next job.
  EXPECT_TRUE(membership_->Get("worker-1")->draining);
  EXPECT_EQ(membership_->CountAssignable(), 2);
  EXPECT_EQ(membership_->Assign("job-b", 5).status().code(),
            absl::StatusCode::kResourceExhausted);
  for (const char* id : {"worker-1", "worker-3", "worker-4"}) {
    EXPECT_TRUE(membership_->ConfirmIdle(id));
  }
  EXPECT_FALSE(membership_->ConfirmIdle("worker-1"));  // Already idle.
  absl::StatusOr<Assignment> again = membership_->Assign("job-b", 5);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(again->worker_ids, ElementsAre("worker-1", "worker-3", "worker-4",
                                             "worker-5", "worker-6"));
}

TEST_F(MembershipTest, LostAssignedWorkerKeepsItsJobForRecovery) {
  MustRegister("a:1");
  MustRegister("b:1");
  ASSERT_TRUE(membership_->Assign("job-a", 2).ok());
  clock_.Advance(absl::Seconds(kTimeoutSeconds - 1));
  ASSERT_TRUE(membership_->Heartbeat("worker-1").ok());
  clock_.Advance(absl::Seconds(2));
  std::vector<WorkerRecord> lost = membership_->ExpireLeases();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, "worker-2");
  EXPECT_EQ(lost[0].job_id, "job-a");
  EXPECT_EQ(lost[0].worker_index, 1);
  EXPECT_EQ(membership_->Release("job-a"), 1);  // only the live one
  EXPECT_EQ(membership_->Count(WorkerState::kRegistered), 1);
}

TEST_F(MembershipTest, ReRegistrationAtTheSameAddressSupersedes) {
  const std::string old_id = MustRegister("a:1");
  ASSERT_TRUE(membership_->Assign("job-a", 1).ok());
  absl::StatusOr<Registration> again = membership_->Register(Info("a:1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->worker_id, "worker-2");
  ASSERT_TRUE(again->superseded.has_value());
  EXPECT_EQ(again->superseded->id, old_id);
  EXPECT_EQ(again->superseded->job_id, "job-a");
  EXPECT_EQ(membership_->Get(old_id)->state, WorkerState::kLost);
  EXPECT_EQ(membership_->Heartbeat(old_id).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Ids(membership_->List(WorkerState::kRegistered)),
              ElementsAre("worker-2"));
  EXPECT_FALSE(membership_->Register(Info("b:1"))->superseded.has_value());
}

}  // namespace
}  // namespace zbpp::coordinator
