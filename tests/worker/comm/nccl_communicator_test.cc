// The NCCL communicator (worker/comm/nccl_communicator.h). Without a GPU:
// it builds, links and refuses in one line. On a GPU machine
// (ZBPP_TEST_DEVICE=cuda:N, scripts/gpu/run.sh): ranks as processes on the
// one GPU, each presenting its own host identity to NCCL (the shared-GPU
// test setting), exchange messages in a pair order in both directions,
// host tensors, all-reduces and barriers.

#include "worker/comm/nccl_communicator.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/rank_processes.h"
#include "tests/worker/runtime/rank_groups.h"
#include "tests/worker/test_device.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kPatience = absl::Seconds(30);

NcclOptions OptionsOn(c10::Device device) {
  NcclOptions options;
  options.store = c10::make_intrusive<c10d::HashStore>();
  options.rank = 0;
  options.size = 1;
  options.device = device;
  return options;
}

TEST(NcclCommunicatorTest, RefusesBadOptionsNamingTheField) {
  NcclOptions no_store = OptionsOn(c10::Device(c10::kCUDA, 0));
  no_store.store = nullptr;
  EXPECT_THAT(std::string(CreateNcclCommunicator(no_store).status().message()),
              HasSubstr("no store"));
  NcclOptions bad_rank = OptionsOn(c10::Device(c10::kCUDA, 0));
  bad_rank.rank = 1;
  EXPECT_EQ(CreateNcclCommunicator(bad_rank).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status cpu = CreateNcclCommunicator(OptionsOn(c10::Device(c10::kCPU))).status();
  EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cpu.message()), HasSubstr("not a CUDA device"));
  EXPECT_EQ(ConfigureNcclForSharedGpuTests("").code(), absl::StatusCode::kInvalidArgument);
}

// A GPU the process does not have is refused in one line, before NCCL is
// touched: cuda:0 on a machine without GPU, cuda:100 on any.
TEST(NcclCommunicatorTest, RefusesADeviceThatIsNotHere) {
  const int index = c10::cuda::device_count() == 0 ? 0 : 100;
  absl::Status refused =
      CreateNcclCommunicator(OptionsOn(c10::Device(c10::kCUDA, index))).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr(absl::StrCat("cuda:", index, " is not a usable GPU here")));
  EXPECT_EQ(GpuIdentity(index).status().code(), absl::StatusCode::kFailedPrecondition);
}

// The UUID, not the PCI bus id: the bus id names a device on one host
// only, and in Kubernetes every pod is a host of its own.
TEST(NcclCommunicatorTest, GpuIdentityIsTheGpusUuid) {
  const unsigned char bytes[16] = {0x5f, 0x0c, 0x9e, 0x7a, 0x1b, 0x3d, 0x4c, 0x6e,
                                   0x8f, 0x2a, 0x0b, 0x1c, 0x3d, 0x5e, 0x7f, 0x90};
  EXPECT_EQ(GpuUuidText(bytes), "GPU-5f0c9e7a-1b3d-4c6e-8f2a-0b1c3d5e7f90");
  if (!TestDevice().is_cuda()) GTEST_SKIP() << "needs ZBPP_TEST_DEVICE=cuda:N";
  absl::StatusOr<std::string> id = GpuIdentity(TestDevice().index());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(*id, ::testing::MatchesRegex(
                       "GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"));
}

class NcclRanksTest : public ::testing::TestWithParam<int> {};

// Per pair (low, high), in one order both ranks know: low→high, high→low,
// low→high again (another shape), all issued before any Wait, each sent
// tensor the result of queued GPU work. Then a host tensor each way, an
// all-reduce of a device and of a host tensor, and a barrier.
TEST_P(NcclRanksTest, ExchangesInPairOrderAndReduces) {
  if (!TestDevice().is_cuda()) GTEST_SKIP() << "NCCL needs ZBPP_TEST_DEVICE=cuda:N";
  const int size = GetParam();
  const std::optional<RankProcess> me = CurrentRankProcess();
  if (!me.has_value()) {
    absl::Status ran = RunTestAsRankProcesses(size, absl::Seconds(120));
    EXPECT_TRUE(ran.ok()) << ran;
    return;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      JoinTestGroup(TestTransport::kNccl, *me, "nccl-ranks", me->rank, size);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const c10::Device device = TestDevice();
  const auto on_device = at::TensorOptions().dtype(at::kFloat).device(device);
  // value(from, to, k): what message k of the pair from `from` holds.
  auto value = [](int from, int to, int k) { return double(1000 * k + 10 * from + to); };
  // A tensor of `value` that the GPU is still computing when it is sent.
  auto produced = [&](double v, int64_t n) {
    at::Tensor big = at::ones({512, 512}, on_device);
    for (int i = 0; i < 20; ++i) big = at::mm(big, big) / 512.0;  // Stays all ones.
    return at::full({n}, v, on_device) * big[0][0];
  };
  struct Expect {
    at::Tensor tensor;
    double value;
  };
  std::vector<std::unique_ptr<PendingOp>> ops;
  std::vector<Expect> expected;
  std::vector<at::Tensor> keep;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me->rank) continue;
    const int low = std::min(peer, me->rank), high = std::max(peer, me->rank);
    const int from_of[3] = {low, high, low};
    const int64_t length[3] = {1024, 1024, 4096};
    for (int k = 0; k < 3; ++k) {
      const int from = from_of[k], to = from == low ? high : low;
      absl::StatusOr<std::unique_ptr<PendingOp>> op;
      if (from == me->rank) {
        at::Tensor t = produced(value(from, to, k), length[k]);
        op = (*comm)->Send(t, to, k);
        keep.push_back(t);
      } else {
        at::Tensor t = at::zeros({length[k]}, on_device);
        op = (*comm)->Recv(t, from, k);
        expected.push_back({t, value(from, to, k)});
      }
      ASSERT_TRUE(op.ok()) << op.status();
      ops.push_back(*std::move(op));
    }
  }
  for (auto& op : ops) ASSERT_TRUE(op->Wait(kPatience).ok());
  for (const Expect& e : expected) {
    EXPECT_TRUE(at::equal(e.tensor.cpu(), at::full(e.tensor.sizes(), e.value)))
        << "rank " << me->rank << " expected " << e.value << ", got "
        << e.tensor.cpu().min().item<double>() << ".." << e.tensor.cpu().max().item<double>();
  }
  // Host tensors: rank 0 and rank 1 swap a double vector, in pair order.
  if (me->rank <= 1) {
    const int peer = 1 - me->rank;
    at::Tensor mine = at::full({3}, 7.5 + me->rank, at::kDouble);
    at::Tensor theirs = at::zeros({3}, at::kDouble);
    auto first = me->rank == 0 ? (*comm)->Send(mine, peer, 0) : (*comm)->Recv(theirs, peer, 0);
    auto second = me->rank == 0 ? (*comm)->Recv(theirs, peer, 0) : (*comm)->Send(mine, peer, 0);
    ASSERT_TRUE(first.ok() && second.ok());
    ASSERT_TRUE((*first)->Wait(kPatience).ok());
    ASSERT_TRUE((*second)->Wait(kPatience).ok());
    EXPECT_TRUE(at::equal(theirs, at::full({3}, 7.5 + peer, at::kDouble)));
  }
  at::Tensor sum = at::full({5}, double(me->rank + 1), on_device);
  ASSERT_TRUE((*comm)->AllReduceSum(sum, kPatience).ok());
  EXPECT_TRUE(at::equal(sum.cpu(), at::full({5}, size * (size + 1) / 2.0)));
  at::Tensor host = at::tensor({double(me->rank), 1.0}, at::kDouble);
  ASSERT_TRUE((*comm)->AllReduceSum(host, kPatience).ok());
  EXPECT_EQ(host[0].item<double>(), size * (size - 1) / 2.0);
  EXPECT_EQ(host[1].item<double>(), size);
  EXPECT_TRUE((*comm)->Barrier(kPatience).ok());
}

// Rank 1 posts a receive from rank 0, then sends to rank 2. Rank 0 sends
// only once rank 2 has the message (they meet through the store). Were
// rank 1's operations queued on one stream, the send would wait behind the
// receive and the three would deadlock; on its pairs' own communicators and
// streams the send goes at once. Reports how long rank 2 waited.
TEST(NcclPairsTest, ASendIsNotHeldBehindAReceiveFromAnotherPeer) {
  if (!TestDevice().is_cuda()) GTEST_SKIP() << "NCCL needs ZBPP_TEST_DEVICE=cuda:N";
  const std::optional<RankProcess> me = CurrentRankProcess();
  if (!me.has_value()) {
    absl::Status ran = RunTestAsRankProcesses(3, absl::Seconds(120));
    EXPECT_TRUE(ran.ok()) << ran;
    return;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      JoinTestGroup(TestTransport::kNccl, *me, "nccl-pairs", me->rank, 3);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const auto on_device = at::TensorOptions().dtype(at::kFloat).device(TestDevice());
  c10::intrusive_ptr<c10d::Store> store = RunStore(*me);
  const std::string delivered = "rank 2 received rank 1's message";
  if (me->rank == 0) {
    store->wait({delivered}, std::chrono::seconds(60));
    auto send = (*comm)->Send(at::full({1 << 20}, 3.0, on_device), 1, 0);
    ASSERT_TRUE(send.ok());
    ASSERT_TRUE((*send)->Wait(kPatience).ok());
  } else if (me->rank == 1) {
    at::Tensor from_0 = at::zeros({1 << 20}, on_device);
    auto recv = (*comm)->Recv(from_0, 0, 0);
    auto send = (*comm)->Send(at::full({1 << 20}, 5.0, on_device), 2, 0);
    ASSERT_TRUE(recv.ok() && send.ok());
    ASSERT_TRUE((*send)->Wait(kPatience).ok());
    ASSERT_TRUE((*recv)->Wait(kPatience).ok());
    EXPECT_TRUE(at::equal(from_0.cpu(), at::full({1 << 20}, 3.0)));
  } else {
    const absl::Time start = absl::Now();
    at::Tensor from_1 = at::zeros({1 << 20}, on_device);
    auto recv = (*comm)->Recv(from_1, 1, 0);
    ASSERT_TRUE(recv.ok());
    ASSERT_TRUE((*recv)->Wait(kPatience).ok());
    EXPECT_TRUE(at::equal(from_1.cpu(), at::full({1 << 20}, 5.0)));  // Synchronises.
    std::printf("%s rank 2 had rank 1's 4 MiB message %.1f ms after posting its receive, rank 1's "
                "receive from rank 0 still pending\n",
                kRankReport, absl::ToDoubleMilliseconds(absl::Now() - start));
    store->set(delivered, std::vector<uint8_t>{1});
  }
  EXPECT_TRUE((*comm)->Barrier(kPatience).ok());
}

INSTANTIATE_TEST_SUITE_P(Sizes, NcclRanksTest, ::testing::Values(2, 4),
                         [](const auto& info) { return absl::StrCat("P", info.param); });

}  // namespace
}  // namespace zbpp::worker
