// The bounds on what unauthenticated registrations can make the coordinator
// hold: the cap on workers, forgetting lost workers after their retention,
// and ListWorkers in pages (coordinator/core/coordinator.h).

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "coordinator/core/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::CoordinatorTest;
using testing::FakeWorker;
using testing::TestSpec;

class WorkerLimitsTest : public CoordinatorTest {
 protected:
  void SetUp() override {}  // Each test sets its options, then Start()s.

  /// Registers a worker without opening its Session.
  absl::StatusOr<v1::RegisterWorkerResponse> Register(int n) {
    v1::WorkerDescription d;
    d.set_address(absl::StrCat("10.1.", n / 256, ".", n % 256, ":7000"));
    d.set_host("node");
    d.set_device_kind(v1::DEVICE_KIND_CPU);
    d.set_memory_bytes(1 << 30);
    return coordinator_->RegisterWorker(d);
  }

  /// Every page of ListWorkers for `states` with `page_size`: the worker
  /// ids in the order the pages gave them. Counts the pages.
  std::vector<std::string> AllPages(const std::vector<v1::WorkerState>& states,
                                    int page_size, int* pages) {
    v1::ListWorkersRequest request;
    for (v1::WorkerState state : states) request.add_states(state);
    request.set_page_size(page_size);
    std::vector<std::string> ids;
    *pages = 0;
    do {
      absl::StatusOr<v1::ListWorkersResponse> page =
          coordinator_->ListWorkers(request);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      ++*pages;
      EXPECT_LE(page->workers_size(), page_size);
      for (const v1::Worker& w : page->workers()) {
        EXPECT_TRUE(states.empty() ||
                    std::find(states.begin(), states.end(), w.state()) !=
                        states.end())
            << w.worker_id();
        ids.push_back(w.worker_id());
      }
      request.set_page_token(page->next_page_token());
    } while (!request.page_token().empty() && *pages < 100);
    return ids;
  }

  static std::vector<std::string> Ids(int first, int last) {
    std::vector<std::string> ids;
    for (int n = first; n <= last; ++n) ids.push_back(absl::StrCat("worker-", n));
    return ids;
  }
};

TEST_F(WorkerLimitsTest, RegistrationBeyondTheCapIsResourceExhausted) {
  max_workers_ = 3;
  Start(":memory:");
  for (int n = 1; n <= 3; ++n) ASSERT_TRUE(Register(n).ok());
  const absl::StatusOr<v1::RegisterWorkerResponse> refused = Register(4);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("max_workers: the coordinator holds 3 workers, its cap of 3"));
  // Nothing was added.
  EXPECT_EQ(coordinator_->ListWorkers({})->workers_size(), 3);
  EXPECT_EQ(coordinator_->WorkerCounts().at("IDLE"), 3);
}

TEST_F(WorkerLimitsTest, LostWorkerIsForgottenAfterTheRetentionNotBefore) {
  max_workers_ = 2;
  lost_worker_retention_seconds_ = 60;
  Start(":memory:");
  std::vector<FakeWorker> workers = {AddWorker(1), AddWorker(2)};
  SilenceUntilLost(workers, 0);  // Ticks 6 s; the lease (5 s) expires at 6.
  v1::ListWorkersRequest lost;
  lost.add_states(v1::WORKER_STATE_LOST);
  ASSERT_EQ(coordinator_->ListWorkers(lost)->workers_size(), 1);
  EXPECT_EQ(coordinator_->WorkerCounts().at("LOST"), 1);
  // A lost worker still holds its place under the cap.
  EXPECT_EQ(Register(3).status().code(), absl::StatusCode::kResourceExhausted);

  // Exactly the retention after it was lost: still listed.
  const auto keep_alive_for = [&](absl::Duration d) {
    for (absl::Duration t; t < d; t += absl::Seconds(1)) {
      clock_.Advance(std::min(absl::Seconds(1), d - t));
      ASSERT_TRUE(coordinator_->Heartbeat(workers[1].id, {}).ok());
      coordinator_->Tick();
    }
  };
  keep_alive_for(absl::Seconds(60));
  ASSERT_EQ(coordinator_->ListWorkers(lost)->workers_size(), 1);
  EXPECT_EQ(coordinator_->ListWorkers(lost)->workers(0).worker_id(),
            workers[0].id);

  keep_alive_for(absl::Milliseconds(1));
  EXPECT_EQ(coordinator_->ListWorkers(lost)->workers_size(), 0);
  EXPECT_EQ(coordinator_->WorkerCounts().at("LOST"), 0);
  EXPECT_EQ(coordinator_->OpenSession(workers[0].id, "10.0.0.1:7000")
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(coordinator_->AuthenticateWorker(workers[0].id,
                                             workers[0].credential)
                .code(),
            absl::StatusCode::kNotFound);
  const absl::Status heartbeat = coordinator_->Heartbeat(workers[0].id, {});
  EXPECT_EQ(heartbeat.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(heartbeat.message()), HasSubstr("unknown worker"));
  // Its place is free; the live worker is untouched.
  EXPECT_EQ(Register(3)->worker_id(), "worker-3");
  EXPECT_EQ(coordinator_->ListWorkers({})->workers_size(), 2);
}

TEST_F(WorkerLimitsTest, JobOfAForgottenWorkerRecoversOnOtherWorkers) {
  lost_worker_retention_seconds_ = 0;
  Start(":memory:");
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  SilenceUntilLost(workers, 3);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(),
            v1::JOB_STATE_RECOVERING);
  clock_.Advance(absl::Seconds(1));
  coordinator_->Tick();
  EXPECT_EQ(coordinator_->Heartbeat(workers[3].id, {}).code(),
            absl::StatusCode::kNotFound);
  workers[3] = AddWorker(9);
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  for (const FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->attempt(), 2);
  }
}

TEST_F(WorkerLimitsTest, PagesHoldEveryWorkerOnceInRegistrationOrder) {
  Start(":memory:");
  for (int n = 1; n <= 12; ++n) ASSERT_TRUE(Register(n).ok());
  // The first 4 take a 4-stage job: ASSIGNED; 5..12 stay IDLE.
  ASSERT_TRUE(coordinator_->SubmitJob(TestSpec()).ok());
  int pages = 0;
  // Numeric order: worker-10 after worker-9, not after worker-1.
  EXPECT_THAT(AllPages({}, 5, &pages), ElementsAreArray(Ids(1, 12)));
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(AllPages({v1::WORKER_STATE_IDLE}, 3, &pages),
              ElementsAreArray(Ids(5, 12)));
  EXPECT_EQ(pages, 3);  // 3 + 3 + 2: no empty last page.
  EXPECT_THAT(AllPages({v1::WORKER_STATE_ASSIGNED}, 4, &pages),
              ElementsAreArray(Ids(1, 4)));
  EXPECT_EQ(pages, 1);
  EXPECT_THAT(AllPages({v1::WORKER_STATE_LOST}, 4, &pages), ::testing::IsEmpty());

  // 0 means 100; above 1000 means 1000.
  for (int n = 13; n <= 1001; ++n) ASSERT_TRUE(Register(n).ok());
  v1::ListWorkersRequest request;
  EXPECT_EQ(coordinator_->ListWorkers(request)->workers_size(),
            Coordinator::kDefaultWorkersPage);
  request.set_page_size(5000);
  absl::StatusOr<v1::ListWorkersResponse> big = coordinator_->ListWorkers(request);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->workers_size(), Coordinator::kMaxWorkersPage);
  request.set_page_token(big->next_page_token());
  EXPECT_EQ(coordinator_->ListWorkers(request)->workers(0).worker_id(),
            "worker-1001");
}

TEST_F(WorkerLimitsTest, ATokenSurvivesItsWorkerBeingForgotten) {
  lost_worker_retention_seconds_ = 0;
  Start(":memory:");
  std::vector<FakeWorker> workers = {AddWorker(1), AddWorker(2), AddWorker(3)};
  v1::ListWorkersRequest request;
  request.set_page_size(1);
  absl::StatusOr<v1::ListWorkersResponse> first = coordinator_->ListWorkers(request);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->workers(0).worker_id(), "worker-1");
  SilenceUntilLost(workers, 0);
  clock_.Advance(absl::Seconds(1));
  coordinator_->Tick();
  request.set_page_token(first->next_page_token());
  absl::StatusOr<v1::ListWorkersResponse> second = coordinator_->ListWorkers(request);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->workers_size(), 1);
  EXPECT_EQ(second->workers(0).worker_id(), "worker-2");
}

TEST_F(WorkerLimitsTest, BadPageTokenOrSizeIsInvalidArgumentNamingIt) {
  Start(":memory:");
  ASSERT_TRUE(Register(1).ok());
  for (const std::string token : {"abc", "0", "-3", "worker-1", "1x"}) {
    v1::ListWorkersRequest request;
    request.set_page_token(token);
    const absl::Status status = coordinator_->ListWorkers(request).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << token;
    EXPECT_THAT(std::string(status.message()), HasSubstr("page_token")) << token;
  }
  v1::ListWorkersRequest request;
  request.set_page_size(-1);
  const absl::Status status = coordinator_->ListWorkers(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("page_size"));
}

}  // namespace
}  // namespace zbpp::coordinator
