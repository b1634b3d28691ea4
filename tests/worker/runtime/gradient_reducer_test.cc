// GradientReducer: the average over the replicas lands in every replica's
// .grad, reductions run one at a time in issue order, a parameter without a
// gradient counts as zeros, and a replica that never joins fails WaitAll
// with DeadlineExceeded instead of hanging.

#include "worker/runtime/gradient_reducer.h"

#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "worker/comm/in_process_communicator.h"

namespace zbpp::worker {
namespace {

at::Tensor Leaf(std::vector<int64_t> shape) {
  return at::zeros(shape).requires_grad_(true);
}

TEST(GradientReducerTest, AveragesOverReplicasInIssueOrder) {
  constexpr int kReplicas = 3;
  std::vector<std::unique_ptr<Communicator>> group = CreateInProcessGroup(kReplicas);
  std::vector<std::vector<at::Tensor>> params(kReplicas);
  std::vector<std::vector<GradientReducer::Timing>> timings(kReplicas);
  std::vector<absl::Status> errors(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    // Replica r's gradients: r+1 everywhere in the first chunk's tensors;
    // the second chunk has one tensor with a gradient of 10·r and one with
    // none.
    params[r] = {Leaf({2, 3}), Leaf({4}), Leaf({5}), Leaf({2})};
    params[r][0].mutable_grad() = at::full({2, 3}, r + 1.0);
    params[r][1].mutable_grad() = at::full({4}, r + 1.0);
    params[r][2].mutable_grad() = at::full({5}, 10.0 * r);
    threads.emplace_back([&, r] {
      GradientReducer reducer(group[r].get(), absl::Seconds(10));
      EXPECT_EQ(reducer.replicas(), kReplicas);
      reducer.Issue({params[r][0], params[r][1]});
      reducer.Issue({params[r][2], params[r][3]});
      absl::StatusOr<std::vector<GradientReducer::Timing>> t = reducer.WaitAll();
      if (!t.ok()) {
        errors[r] = t.status();
        return;
      }
      timings[r] = *t;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kReplicas; ++r) {
    ASSERT_TRUE(errors[r].ok()) << errors[r];
    // Mean of 1, 2, 3 and of 0, 10, 20.
    EXPECT_TRUE(at::allclose(params[r][0].grad(), at::full({2, 3}, 2.0))) << r;
    EXPECT_TRUE(at::allclose(params[r][1].grad(), at::full({4}, 2.0))) << r;
    EXPECT_TRUE(at::allclose(params[r][2].grad(), at::full({5}, 10.0))) << r;
    ASSERT_TRUE(params[r][3].grad().defined()) << "a missing gradient is reduced as zeros";
    EXPECT_TRUE(at::equal(params[r][3].grad(), at::zeros({2})));
    ASSERT_EQ(timings[r].size(), 2u);
    EXPECT_LE(timings[r][0].start, timings[r][0].end);
    EXPECT_LE(timings[r][0].end, timings[r][1].start) << "one reduction at a time, in order";
  }
}

TEST(GradientReducerTest, AMissingReplicaFailsWithDeadlineExceeded) {
  std::vector<std::unique_ptr<Communicator>> group = CreateInProcessGroup(2);
  at::Tensor p = Leaf({3});
  p.mutable_grad() = at::ones({3});
  GradientReducer reducer(group[0].get(), absl::Milliseconds(200));
  reducer.Issue({p});
  absl::StatusOr<std::vector<GradientReducer::Timing>> t = reducer.WaitAll();
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded) << t.status();
}

}  // namespace
}  // namespace zbpp::worker
