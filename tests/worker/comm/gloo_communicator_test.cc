// Gloo creation failures: Status values, never exceptions.

#include "worker/comm/gloo_communicator.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/comm/rendezvous_store.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;

/// Two Gloo ranks over one HashStore on loopback.
std::vector<std::unique_ptr<Communicator>> GlooPair() {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<Communicator>> group(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions options;
      options.store = store;
      options.rank = r;
      options.size = 2;
      options.timeout = absl::Seconds(20);
      options.hostname = "127.0.0.1";
      auto comm = CreateGlooCommunicator(options);
      EXPECT_TRUE(comm.ok()) << comm.status();
      if (comm.ok()) group[r] = *std::move(comm);
    });
  }
  for (std::thread& t : threads) t.join();
  return group;
}

// Quirks the executor must respect (gloo_communicator.h), pinned here
// because the in-process fake behaves otherwise.

TEST(GlooCommunicatorTest, SendWithoutAPostedRecvDoesNotComplete) {
  auto group = GlooPair();
  ASSERT_NE(group[0], nullptr);
  at::Tensor out = at::ones({16});
  auto send = group[0]->Send(out, 1, 3);
  ASSERT_TRUE(send.ok()) << send.status();
  absl::Status s = (*send)->Wait(absl::Milliseconds(200));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 send to peer 1, tag 3"));
}

TEST(GlooCommunicatorTest, ATimeoutClosesTheConnectionToThatPeer) {
  auto group = GlooPair();
  ASSERT_NE(group[0], nullptr);
  at::Tensor in = at::zeros({4});
  auto recv = group[0]->Recv(in, 1, 5);
  ASSERT_TRUE(recv.ok()) << recv.status();
  EXPECT_EQ((*recv)->Wait(absl::Milliseconds(100)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // The peer sends now, too late: the pair is closed on rank 0's side.
  auto send = group[1]->Send(at::ones({4}), 0, 6);
  absl::StatusOr<std::unique_ptr<PendingOp>> again = group[0]->Recv(in, 1, 6);
  absl::Status s = again.ok() ? (*again)->Wait(absl::Seconds(2)) : again.status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("pair closure"));
}

TEST(GlooCommunicatorTest, PeersNotJoiningIsDeadlineExceeded) {
  GlooOptions options;
  options.store = c10::make_intrusive<c10d::HashStore>();
  options.rank = 0;
  options.size = 2;
  options.timeout = absl::Milliseconds(300);
  options.hostname = "127.0.0.1";
  const absl::Time start = absl::Now();
  auto comm = CreateGlooCommunicator(options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded)
      << comm.status();
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("rank 0 of 2"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(GlooCommunicatorTest, UnreachableStoreIsAnError) {
  // Nothing listens on port 1 of loopback (a privileged port).
  GlooOptions options;
  options.store = CreateRendezvousStore(
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
      "worker-1", "scope", absl::Seconds(1), {});
  options.rank = 1;
  options.size = 2;
  options.timeout = absl::Seconds(1);
  options.hostname = "127.0.0.1";
  auto comm = CreateGlooCommunicator(options);
  EXPECT_FALSE(comm.ok());
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("rendezvous"));
}

TEST(GlooCommunicatorTest, BadOptionsAreInvalidArguments) {
  GlooOptions options;
  options.rank = 0;
  options.size = 2;
  EXPECT_EQ(CreateGlooCommunicator(options).status().code(),
            absl::StatusCode::kInvalidArgument);  // No store.
  options.store = c10::make_intrusive<c10d::HashStore>();
  options.rank = 2;
  EXPECT_EQ(CreateGlooCommunicator(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.rank = 0;
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(CreateGlooCommunicator(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zbpp::worker
