// GradientReducer: the average over the replicas lands in every replica's
// .grad, reductions run one at a time in issue order, a parameter without a
// gradient counts as zeros, and a replica that never joins fails WaitAll
// with DeadlineExceeded instead of hanging.

#include "worker/runtime/gradient_reducer.h"

#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "scheduler/schedule.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/model/gpt.h"
#include "worker/model/weight_grad_store.h"
#include "worker/runtime/executor.h"
#include "tests/worker/tiny_gpt.h"

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

// The executor refuses, before any pass runs, a schedule whose reductions
// do not match the job: REDUCE_GRAD with one replica, none (or a stage
// missing one) with two, and more gradient buckets than the chunk has
// linear layers.
TEST(GradientReducerTest, ExecutorRefusesReductionsThatDoNotMatchTheJob) {
  auto chunk = GptChunk::Create(TinyGptConfig(), 0, 1, 3);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  WeightGradStore store;
  std::vector<std::unique_ptr<Communicator>> pipeline = CreateInProcessGroup(1);
  std::vector<std::unique_ptr<Communicator>> replicas = CreateInProcessGroup(2);
  GradientReducer reducer(replicas[0].get(), absl::Seconds(1));
  auto executor = [&](GradientReducer* r) {
    ExecutorOptions o;
    o.communicator = pipeline[0].get();
    o.reducer = r;
    o.chunks[0] = {chunk->get(), &store};
    return PipelineExecutor(std::move(o));
  };
  auto schedule = [](std::vector<std::string> texts) {
    sched::Schedule s;
    s.name = "hand";
    s.stages = 1;
    s.microbatches = 1;
    s.stage_of = {0};
    s.actions.resize(1);
    for (const std::string& t : texts) s.actions[0].push_back(*sched::ParseAction(t));
    return s;
  };
  const sched::Schedule whole = schedule({"0F0", "0I0", "0W0", "0REDUCE_GRAD"});
  const sched::Schedule bare = schedule({"0F0", "0I0", "0W0"});
  // Two blocks of 4 linear layers and the LM head: 9.
  std::vector<std::string> ten = {"0F0", "0I0"};
  for (int b = 0; b < 10; ++b) ten.push_back("0W0@" + std::to_string(b));
  for (int b = 0; b < 10; ++b) ten.push_back("0REDUCE_GRAD@" + std::to_string(b));

  EXPECT_TRUE(executor(&reducer).Validate(whole).ok());
  EXPECT_TRUE(executor(nullptr).Validate(bare).ok());
  absl::Status one_replica = executor(nullptr).Validate(whole);
  EXPECT_EQ(one_replica.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(one_replica.message()), testing::HasSubstr("the job has one replica"));
  absl::Status none = executor(&reducer).Validate(bare);
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(none.message()), testing::HasSubstr("the schedule has 0"));
  absl::Status too_many = executor(&reducer).Validate(schedule(ten));
  EXPECT_EQ(too_many.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(too_many.message()),
              testing::HasSubstr("9 linear layers: it cannot be split into 10 gradient buckets"));
}

}  // namespace
}  // namespace zbpp::worker
