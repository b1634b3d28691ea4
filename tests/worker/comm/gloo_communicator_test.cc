// Gloo creation failures (Status values, never exceptions), the quirks the
// executor must respect, and tensors of the test device travelling through
// host memory.

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
#include "tests/worker/test_device.h"
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

// A pipeline's traffic with tensors on the test device (scripts/gpu/run.sh:
// cuda:0). Each rank sends a tensor that a long chain of kernels (tens of
// milliseconds on a GPU, queued in microseconds) has just produced, then
// drops it and overwrites a tensor of the same size at once: a send that
// copied the tensor before its producer ran, or after the caching
// allocator handed its memory out again, carries wrong values. The values
// expected are cloned on the device and read only at the end, so nothing
// waits for the producer before the send. Each receive is read by a kernel
// right after Wait, so a copy into the device tensor that was not ordered
// before that kernel shows too.
TEST(GlooCommunicatorTest, DeviceTensorsTravelAfterTheirProducerAndBeforeTheirReader) {
  const c10::Device device = TestDevice();
  auto group = GlooPair();
  ASSERT_NE(group[0], nullptr);
  ASSERT_NE(group[1], nullptr);
  constexpr int kMessages = 8;
  const int64_t n = device.is_cpu() ? 256 : 2048;
  const auto options = at::TensorOptions().device(device);
  auto random = [&](uint64_t seed) {
    return at::rand({n, n}, at::detail::createCPUGenerator(seed)).to(device);
  };
  const at::Tensor weight = random(7) / 16;
  // The value rank r sends as message i, computed on the device.
  auto produce = [&](int r, int i) {
    at::Tensor x = random(10 * r + i + 1);
    for (int k = 0; k < 50; ++k) x = at::sin(at::matmul(x, weight));
    return x;
  };
  std::vector<std::vector<at::Tensor>> sent(2), read(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      Communicator& comm = *group[r];
      std::vector<at::Tensor> inbox;
      std::vector<std::unique_ptr<PendingOp>> recvs, sends;
      for (int i = 0; i < kMessages; ++i) {
        inbox.push_back(at::zeros({n, n}, options));
        auto op = comm.Recv(inbox.back(), 1 - r, 100 + i);
        ASSERT_TRUE(op.ok()) << op.status();
        recvs.push_back(*std::move(op));
      }
      std::vector<at::Tensor> expected;
      for (int i = 0; i < kMessages; ++i) {
        at::Tensor out = produce(r, i);
        expected.push_back(out.clone());
        auto op = comm.Send(out, 1 - r, 100 + i);
        ASSERT_TRUE(op.ok()) << op.status();
        sends.push_back(*std::move(op));
        out = at::Tensor();
        at::empty({n, n}, options).fill_(-1);  // Would take the sent tensor's memory.
      }
      for (int i = 0; i < kMessages; ++i) {
        ASSERT_TRUE(recvs[i]->Wait(absl::Seconds(60)).ok()) << "message " << i;
        read[r].push_back((inbox[i] * 2).cpu());
      }
      for (auto& op : sends) EXPECT_TRUE(op->Wait(absl::Seconds(60)).ok());
      for (const at::Tensor& e : expected) sent[r].push_back(e.cpu());
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(read[r].size(), static_cast<size_t>(kMessages));
    for (int i = 0; i < kMessages; ++i) {
      EXPECT_TRUE(at::equal(read[r][i], sent[1 - r][i] * 2)) << "rank " << r << " message " << i;
    }
  }
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
