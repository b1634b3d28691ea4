// The RendezvousStore against the real coordinator RendezvousService (with
// its access checks) on 127.0.0.1:0.

#include "worker/comm/rendezvous_store.h"

#include <memory>
#include <stdexcept>
#include <thread>
#include <chrono>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/comm/coordinator_harness.h"

namespace zbpp::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<uint8_t> Bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

/// The message of what `fn` throws; fails the test when it does not throw.
template <typename Fn>
std::string ThrownMessage(Fn fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

class RendezvousStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto harness = testing::CoordinatorHarness::Start();
    ASSERT_TRUE(harness.ok()) << harness.status();
    coordinator_ = *std::move(harness);
    auto ranks = coordinator_->AssignJob(2);
    ASSERT_TRUE(ranks.ok()) << ranks.status();
    ranks_ = *ranks;
    store_ = CreateRendezvousStore(coordinator_->channel(), ranks_[0].worker_id,
                                   ranks_[0].scope, absl::Milliseconds(200),
                                   ranks_[0].metadata);
  }

  std::unique_ptr<testing::CoordinatorHarness> coordinator_;
  std::vector<testing::RendezvousIdentity> ranks_;
  c10::intrusive_ptr<c10d::Store> store_;
};

TEST_F(RendezvousStoreTest, SetThenGetFromAnotherRank) {
  store_->set("addr/0", Bytes("10.0.0.1:5000"));
  auto other = CreateRendezvousStore(coordinator_->channel(),
                                     ranks_[1].worker_id, ranks_[1].scope,
                                     absl::Seconds(5), ranks_[1].metadata);
  EXPECT_EQ(other->get("addr/0"), Bytes("10.0.0.1:5000"));
  EXPECT_TRUE(other->check({"addr/0"}));
  EXPECT_FALSE(other->check({"addr/0", "addr/1"}));
}

TEST_F(RendezvousStoreTest, AddKeepsADecimalCounter) {
  EXPECT_EQ(store_->add("joined", 1), 1);
  EXPECT_EQ(store_->add("joined", 2), 3);
  EXPECT_EQ(store_->add("joined", 0), 3);
  EXPECT_EQ(store_->get("joined"), Bytes("3"));
}

TEST_F(RendezvousStoreTest, CompareSetFollowsC10d) {
  // Empty expected: set only when absent.
  EXPECT_EQ(store_->compareSet("k", {}, Bytes("a")), Bytes("a"));
  EXPECT_EQ(store_->compareSet("k", {}, Bytes("b")), Bytes("a"));
  EXPECT_EQ(store_->compareSet("k", Bytes("x"), Bytes("c")), Bytes("a"));
  EXPECT_EQ(store_->compareSet("k", Bytes("a"), Bytes("c")), Bytes("c"));
  EXPECT_EQ(store_->get("k"), Bytes("c"));
}

TEST_F(RendezvousStoreTest, DeleteKey) {
  store_->set("k", Bytes("v"));
  EXPECT_TRUE(store_->deleteKey("k"));
  EXPECT_FALSE(store_->deleteKey("k"));
  EXPECT_FALSE(store_->check({"k"}));
}

TEST_F(RendezvousStoreTest, WaitAndGetTimeOutNamingTheKey) {
  const absl::Time start = absl::Now();
  std::string wait_error = ThrownMessage([&] {
    store_->wait({"never"}, std::chrono::milliseconds(200));
  });
  EXPECT_THAT(wait_error, AllOf(HasSubstr("wait"), HasSubstr("'never'"),
                                HasSubstr("DEADLINE_EXCEEDED"),
                                HasSubstr(ranks_[0].scope)));
  // get waits the store's own timeout (200 ms here).
  std::string get_error = ThrownMessage([&] { store_->get("never"); });
  EXPECT_THAT(get_error, AllOf(HasSubstr("get"), HasSubstr("'never'"),
                               HasSubstr("DEADLINE_EXCEEDED")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_F(RendezvousStoreTest, WaitReturnsWhenAnotherRankSetsTheKey) {
  std::thread setter([&] {
    auto other = CreateRendezvousStore(coordinator_->channel(),
                                       ranks_[1].worker_id, ranks_[1].scope,
                                       absl::Seconds(5), ranks_[1].metadata);
    other->set("late", Bytes("1"));
  });
  store_->wait({"late"}, std::chrono::seconds(10));
  setter.join();
  EXPECT_TRUE(store_->check({"late"}));
}

TEST_F(RendezvousStoreTest, OutsidersAreRefused) {
  // A registered worker that holds another job's attempt.
  auto other_job = coordinator_->AssignJob(2);
  ASSERT_TRUE(other_job.ok()) << other_job.status();
  auto outsider =
      CreateRendezvousStore(coordinator_->channel(), (*other_job)[0].worker_id,
                            ranks_[0].scope, absl::Seconds(1),
                            (*other_job)[0].metadata);
  EXPECT_THAT(ThrownMessage([&] { outsider->set("k", Bytes("v")); }),
              AllOf(HasSubstr("set of key 'k'"), HasSubstr("PERMISSION_DENIED")));
}

TEST_F(RendezvousStoreTest, GetNumKeysIsNotSupported) {
  EXPECT_THAT(ThrownMessage([&] { store_->getNumKeys(); }),
              HasSubstr("not supported"));
}

}  // namespace
}  // namespace zbpp::worker
