// One suite for every Communicator backend, so that all of them behave the
// same, thread-per-rank: the in-process fake; Gloo over c10d::HashStore; Gloo
// over the RendezvousStore talking to a real coordinator on 127.0.0.1:0. Each
// case runs at p = 2 and p = 4.

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/comm/coordinator_harness.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/latency_probe.h"
#include "worker/comm/rendezvous_store.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;

/// Long enough for any operation that should succeed on a loaded machine.
constexpr absl::Duration kPatience = absl::Seconds(20);
/// For the cases that must time out: short, so the suite stays fast.
constexpr absl::Duration kShort = absl::Milliseconds(200);

enum class Backend { kInProcess, kGlooHashStore, kGlooRendezvous };

struct Param {
  Backend backend;
  int size;
};

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const char* backend = info.param.backend == Backend::kInProcess ? "InProcess"
                        : info.param.backend == Backend::kGlooHashStore
                            ? "GlooHashStore"
                            : "GlooRendezvous";
  return absl::StrCat(backend, "P", info.param.size);
}

/// Runs `fn(rank)` on one thread per rank and joins them.
void OnEveryRank(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

/// A tensor whose every element depends on `seed`, so a message delivered to
/// the wrong receive shows.
at::Tensor Filled(at::IntArrayRef shape, double seed) {
  return at::arange(c10::multiply_integers(shape), at::kFloat)
      .reshape(shape)
      .add(seed);
}

/// Waits on `op`, expecting success.
void ExpectDone(absl::StatusOr<std::unique_ptr<PendingOp>> op) {
  ASSERT_TRUE(op.ok()) << op.status();
  absl::Status s = (*op)->Wait(kPatience);
  EXPECT_TRUE(s.ok()) << s;
}

class CommunicatorTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const int size = GetParam().size;
    if (GetParam().backend == Backend::kInProcess) {
      group_ = CreateInProcessGroup(size);
      return;
    }
    std::vector<c10::intrusive_ptr<c10d::Store>> stores;
    if (GetParam().backend == Backend::kGlooHashStore) {
      stores.assign(size, c10::make_intrusive<c10d::HashStore>());
    } else {
      auto harness = testing::CoordinatorHarness::Start();
      ASSERT_TRUE(harness.ok()) << harness.status();
      coordinator_ = *std::move(harness);
      auto ranks = coordinator_->AssignJob(size);
      ASSERT_TRUE(ranks.ok()) << ranks.status();
      for (const testing::RendezvousIdentity& id : *ranks) {
        stores.push_back(CreateRendezvousStore(coordinator_->channel(),
                                               id.worker_id, id.scope,
                                               kPatience, id.metadata));
      }
    }
    group_.resize(size);
    OnEveryRank(size, [&](int r) {
      GlooOptions options;
      options.store = stores[r];
      options.rank = r;
      options.size = size;
      options.timeout = kPatience;
      options.hostname = "127.0.0.1";
      auto comm = CreateGlooCommunicator(options);
      ASSERT_TRUE(comm.ok()) << comm.status();
      group_[r] = *std::move(comm);
    });
    for (const auto& comm : group_) ASSERT_NE(comm, nullptr);
  }

  void TearDown() override {
    // Last rank first: a Gloo rank blocked in a collective that a test left
    // unfinished ends when its peers' connections close, not after Gloo's
    // timeout.
    while (!group_.empty()) group_.pop_back();
  }

  int size() const { return GetParam().size; }

  /// Declared first so it outlives the communicators that use its service.
  std::unique_ptr<testing::CoordinatorHarness> coordinator_;
  std::vector<std::unique_ptr<Communicator>> group_;
};

TEST_P(CommunicatorTest, RanksAndSize) {
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(group_[r]->rank(), r);
    EXPECT_EQ(group_[r]->size(), size());
  }
}

TEST_P(CommunicatorTest, SendRecvRoundTripOfSeveralShapes) {
  const std::vector<std::vector<int64_t>> shapes = {
      {1}, {7}, {3, 5}, {2, 4, 8}, {64, 256}};
  // Along the chain 0 -> 1 -> ... -> p-1, every shape in turn.
  OnEveryRank(size(), [&](int r) {
    Communicator& comm = *group_[r];
    for (size_t i = 0; i < shapes.size(); ++i) {
      const uint32_t tag = MakeTag(0, MessageKind::kActivation, r + 1, i);
      at::Tensor out = Filled(shapes[i], 100 * r + i);
      absl::StatusOr<std::unique_ptr<PendingOp>> send;
      if (r + 1 < size()) {
        send = comm.Send(out, r + 1, tag);
        ASSERT_TRUE(send.ok()) << send.status();
      }
      if (r > 0) {
        at::Tensor in = at::zeros(shapes[i]);
        ExpectDone(comm.Recv(in, r - 1,
                             MakeTag(0, MessageKind::kActivation, r, i)));
        EXPECT_TRUE(at::equal(in, Filled(shapes[i], 100 * (r - 1) + i)))
            << "rank " << r << " shape " << i;
      }
      if (r + 1 < size()) {
        EXPECT_TRUE((*send)->Wait(kPatience).ok());
      }
    }
  });
}

TEST_P(CommunicatorTest, TagsMatchWhenReceivedInTheOppositeOrder) {
  const uint32_t first = MakeTag(3, MessageKind::kActivation, 1, 0);
  const uint32_t second = MakeTag(3, MessageKind::kActivation, 1, 1);
  OnEveryRank(2, [&](int r) {
    Communicator& comm = *group_[r];
    if (r == 0) {
      at::Tensor a = Filled({4}, 1), b = Filled({4}, 2);
      auto send_a = comm.Send(a, 1, first);
      auto send_b = comm.Send(b, 1, second);
      ASSERT_TRUE(send_a.ok() && send_b.ok());
      EXPECT_TRUE((*send_a)->Wait(kPatience).ok());
      EXPECT_TRUE((*send_b)->Wait(kPatience).ok());
    } else {
      at::Tensor b = at::zeros({4}), a = at::zeros({4});
      ExpectDone(comm.Recv(b, 0, second));
      ExpectDone(comm.Recv(a, 0, first));
      EXPECT_TRUE(at::equal(a, Filled({4}, 1)));
      EXPECT_TRUE(at::equal(b, Filled({4}, 2)));
    }
  });
}

TEST_P(CommunicatorTest, ManyMicrobatchesInFlightBothWays) {
  // A pipeline's traffic: activations flow 0 -> p-1, the last rank returns
  // each microbatch's gradient at once, gradients flow back to rank 0 while
  // later activations are still on their way. Every receive is posted up
  // front; sends are waited on at the end.
  constexpr int kMicrobatches = 16;
  const int p = size();
  const std::vector<int64_t> shape = {8, 32};
  OnEveryRank(p, [&](int r) {
    Communicator& comm = *group_[r];
    std::vector<at::Tensor> acts, grads, sent;
    std::vector<std::unique_ptr<PendingOp>> act_ops, grad_ops, send_ops;
    auto post = [&](MessageKind kind, int peer,
                    std::vector<at::Tensor>* into,
                    std::vector<std::unique_ptr<PendingOp>>* ops) {
      for (int mb = 0; mb < kMicrobatches; ++mb) {
        into->push_back(at::zeros(shape));
        auto op = comm.Recv(into->back(), peer, MakeTag(1, kind, r, mb));
        ASSERT_TRUE(op.ok()) << op.status();
        ops->push_back(*std::move(op));
      }
    };
    auto send = [&](at::Tensor t, MessageKind kind, int peer, int mb) {
      sent.push_back(t);
      auto op = comm.Send(t, peer, MakeTag(1, kind, peer, mb));
      ASSERT_TRUE(op.ok()) << op.status();
      send_ops.push_back(*std::move(op));
    };
    if (r > 0) post(MessageKind::kActivation, r - 1, &acts, &act_ops);
    if (r + 1 < p) post(MessageKind::kGradient, r + 1, &grads, &grad_ops);
    for (int mb = 0; mb < kMicrobatches; ++mb) {
      at::Tensor act = Filled(shape, mb);
      if (r > 0) {
        ASSERT_TRUE(act_ops[mb]->Wait(kPatience).ok()) << "mb " << mb;
        act = acts[mb];
        EXPECT_TRUE(at::equal(act, Filled(shape, mb + r))) << "mb " << mb;
      }
      if (r + 1 < p) {
        send(act + 1, MessageKind::kActivation, r + 1, mb);
      } else {
        send(act * 2, MessageKind::kGradient, r - 1, mb);
      }
    }
    if (r + 1 < p) {
      const at::Tensor expected_base = Filled(shape, p - 1).mul(2);
      for (int mb = 0; mb < kMicrobatches; ++mb) {
        ASSERT_TRUE(grad_ops[mb]->Wait(kPatience).ok()) << "mb " << mb;
        EXPECT_TRUE(at::equal(grads[mb], expected_base + 2 * mb))
            << "rank " << r << " mb " << mb;
        if (r > 0) send(grads[mb], MessageKind::kGradient, r - 1, mb);
      }
    }
    for (auto& op : send_ops) EXPECT_TRUE(op->Wait(kPatience).ok());
  });
}

TEST_P(CommunicatorTest, RecvTimesOutNamingPeerAndTag) {
  const uint32_t tag = MakeTag(2, MessageKind::kGradient, 0, 5);
  at::Tensor t = at::zeros({3});
  auto op = group_[0]->Recv(t, 1, tag);
  ASSERT_TRUE(op.ok()) << op.status();
  const absl::Time start = absl::Now();
  absl::Status s = (*op)->Wait(kShort);
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("peer 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("tag ", tag)));
  EXPECT_GE(waited, kShort - absl::Milliseconds(20));
  EXPECT_LT(waited, absl::Seconds(2));
}

TEST_P(CommunicatorTest, AbortReleasesAWaitingRecvAndRefusesLaterOps) {
  const uint32_t tag = MakeTag(3, MessageKind::kActivation, 1, 0);
  at::Tensor t = at::zeros({3});
  auto op = group_[1]->Recv(t, 0, tag);
  ASSERT_TRUE(op.ok()) << op.status();
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    group_[1]->Abort();
  });
  const absl::Time start = absl::Now();
  // Without Abort this would wait the whole (long) timeout.
  absl::Status s = (*op)->Wait(kPatience);
  const absl::Duration waited = absl::Now() - start;
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_LT(waited, absl::Seconds(5));
  auto later = group_[1]->Send(at::ones({2}), 0, tag);
  EXPECT_EQ(later.status().code(), absl::StatusCode::kAborted) << later.status();
  group_[1]->Abort();  // Idempotent.
}

TEST_P(CommunicatorTest, AllReduceSumsDistinctValuesRepeatedly) {
  const int p = size();
  OnEveryRank(p, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      at::Tensor t = Filled({3, 4}, 10 * r + round);
      absl::Status s = group_[r]->AllReduceSum(t, kPatience);
      ASSERT_TRUE(s.ok()) << s;
      // Sum over ranks of (arange + 10 r + round).
      const at::Tensor expected =
          Filled({3, 4}, 0).mul(p).add(10.0 * p * (p - 1) / 2 + p * round);
      EXPECT_TRUE(at::equal(t, expected)) << "rank " << r << " round " << round;
    }
  });
}

TEST_P(CommunicatorTest, BarrierWaitsForEveryRank) {
  const int p = size();
  std::vector<std::atomic<int>> arrived(3);
  OnEveryRank(p, [&](int r) {
    for (int round = 0; round < 3; ++round) {
      // The last rank comes late: nobody may leave before it arrived.
      if (r == p - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++arrived[round];
      absl::Status s = group_[r]->Barrier(kPatience);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(arrived[round].load(), p) << "rank " << r << " round " << round;
    }
  });
}

TEST_P(CommunicatorTest, CollectiveTimesOutWhenARankStaysAway) {
  // Every rank but the last joins.
  OnEveryRank(size() - 1, [&](int r) {
    at::Tensor t = at::ones({2});
    const absl::Time start = absl::Now();
    absl::Status s = group_[r]->AllReduceSum(t, kShort);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  });
}

TEST_P(CommunicatorTest, BadPeersAndTensorsAreInvalidArguments) {
  Communicator& comm = *group_[1];
  at::Tensor t = at::zeros({2, 3});
  for (int peer : {1, -1, size()}) {
    auto send = comm.Send(t, peer, 7);
    EXPECT_EQ(send.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(send.status().message()),
                HasSubstr(absl::StrCat("peer ", peer)));
    EXPECT_EQ(comm.Recv(t, peer, 7).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  at::Tensor strided = t.t();
  EXPECT_EQ(comm.Send(strided, 0, 7).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.Recv(at::Tensor(), 0, 7).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(CommunicatorTest, LatencyProbeIsFiniteAndPositive) {
  std::vector<absl::StatusOr<double>> latency(2, 0.0);
  OnEveryRank(2, [&](int r) {
    latency[r] = MeasureOneWayLatency(*group_[r], 1 - r, r == 0, 20, kPatience, at::zeros({1}));
  });
  ASSERT_TRUE(latency[0].ok()) << latency[0].status();
  ASSERT_TRUE(latency[1].ok()) << latency[1].status();
  EXPECT_GT(*latency[0], 0);
  EXPECT_TRUE(std::isfinite(*latency[0]));
  EXPECT_LT(*latency[0], 0.1);  // Loopback: well under 100 ms.
  EXPECT_EQ(*latency[1], 0);
}

// The probe sends messages like the one it is given, so that a job's T_comm
// carries its activations' size: 16 MiB one way costs more than 4 bytes on
// every transport (a copy at the least), measured side by side.
TEST_P(CommunicatorTest, LatencyProbeSendsMessagesOfTheGivenSize) {
  std::vector<absl::StatusOr<double>> small(2, 0.0);
  std::vector<absl::StatusOr<double>> large(2, 0.0);
  OnEveryRank(2, [&](int r) {
    small[r] = MeasureOneWayLatency(*group_[r], 1 - r, r == 0, 5, kPatience, at::zeros({1}));
    large[r] = MeasureOneWayLatency(*group_[r], 1 - r, r == 0, 5, kPatience,
                                    at::zeros({4, 1024, 1024}));
  });
  ASSERT_TRUE(small[0].ok()) << small[0].status();
  ASSERT_TRUE(large[0].ok()) << large[0].status();
  ASSERT_TRUE(large[1].ok()) << large[1].status();
  EXPECT_GT(*large[0], *small[0]);
  EXPECT_EQ(MeasureOneWayLatency(*group_[0], 1, true, 5, kPatience, at::Tensor()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Backends, CommunicatorTest,
    ::testing::Values(Param{Backend::kInProcess, 2},
                      Param{Backend::kInProcess, 4},
                      Param{Backend::kGlooHashStore, 2},
                      Param{Backend::kGlooHashStore, 4},
                      Param{Backend::kGlooRendezvous, 2},
                      Param{Backend::kGlooRendezvous, 4}),
    ParamName);

}  // namespace
}  // namespace zbpp::worker
