// The proof that the B/W split, the communication, every schedule and the
// data-parallel gradient reduction are correct (tests/worker/runtime/
// equivalence.h), with ranks as threads. The pipelines talk through the
// order-strict communicator, which matches messages by their order between
// two ranks as NCCL does and fails on any mismatch or a message left
// unmatched: the executor issues every pair's messages in the one order
// derived from the schedule, discarded speculative ones included.

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "tests/worker/runtime/equivalence.h"
#include "tests/worker/test_device.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/order_strict_communicator.h"
#include "worker/model/gpt.h"

namespace zbpp::worker {
namespace {
using Case = std::tuple<std::string, int, int>;  // schedule, p, d

class PipelineEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalenceTest, ParametersMatchSingleProcessAfterThreeSteps) {
  const auto& [name, p, d] = GetParam();
  absl::StatusOr<sched::Schedule> schedule = ScheduleFor(name, p, d);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  const int v = schedule->chunks;
  const int m = schedule->microbatches;
  int reductions = 0;
  for (const auto& actions : schedule->actions) {
    for (const sched::Action& a : actions) reductions += sched::IsStageReduction(a);
  }
  ASSERT_EQ(reductions, d > 1 ? p * v : 0)
      << "one REDUCE_GRAD (or one set of partial ones) per virtual stage";
  v1::JobSpec spec = TinySpec(p, v, m);
  spec.mutable_pipeline()->set_data_parallel(d);
  // Worker w = replica·p + rank; pipelines per replica, replica groups per
  // rank.
  const int workers = p * d;
  std::vector<OrderStrictGroup> pipelines;
  std::vector<std::vector<std::unique_ptr<Communicator>>> replicas;
  for (int r = 0; r < d; ++r) pipelines.push_back(CreateOrderStrictGroup(p));
  for (int r = 0; r < p; ++r) replicas.push_back(CreateInProcessGroup(d));
  std::vector<absl::StatusOr<std::map<std::string, at::Tensor>>> params(workers);
  std::vector<std::thread> ranks;
  for (int w = 0; w < workers; ++w) {
    ranks.emplace_back([&, w] {
      params[w] = TrainWorker(*schedule, spec, w, pipelines[w / p].ranks[w % p].get(),
                              d > 1 ? replicas[w % p][w / p].get() : nullptr);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int w = 0; w < workers; ++w) {
    ASSERT_TRUE(params[w].ok()) << "worker " << w << ": " << params[w].status();
  }
  for (const OrderStrictGroup& pipeline : pipelines) {
    EXPECT_TRUE(pipeline.check_idle().ok()) << pipeline.check_idle();
  }

  std::map<std::string, at::Tensor> reference = Reference(spec, d);
  GptConfig config = *GptConfigFromSpec(spec.model());
  auto initial = *GptChunk::Create(config, 0, 1, spec.seed(), TestDevice());
  size_t compared = 0;
  double worst = 0;
  for (int w = 0; w < workers; ++w) {
    worst = std::max(worst, ExpectNearReference(*params[w], reference,
                                                absl::StrCat(name, " p=", p, " d=", d, " rank ",
                                                             w % p, " replica ", w / p)));
    compared += params[w]->size();
  }
  EXPECT_EQ(compared, d * reference.size())
      << "every parameter lives on exactly one rank of each replica";
  // Training moved the weights: equality is not the trivial one.
  for (const auto& [pname, t] : initial->parameters()) {
    EXPECT_FALSE(at::allclose(t, reference[pname])) << pname << " did not change";
  }
  RecordProperty("max_relative_error", std::to_string(worst));
}

// The data-parallel cases above cover partial W passes and reductions (the
// solver's gradient buckets) as well as whole ones.
TEST(PipelineEquivalenceCoverage, DataParallelCasesRunWholeAndPartialReductions) {
  int whole = 0, partial = 0;
  for (const sched::ScheduleTraits& t : sched::AllSchedules()) {
    absl::StatusOr<sched::Schedule> schedule = ScheduleFor(t.name, 2, 2);
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    bool bucketed = false;
    for (const auto& actions : schedule->actions) {
      for (const sched::Action& a : actions) bucketed |= a.bucket != sched::kAllBuckets;
    }
    ++(bucketed ? partial : whole);
  }
  EXPECT_GT(whole, 0);
  EXPECT_GT(partial, 0);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const sched::ScheduleTraits& t : sched::AllSchedules()) {
    for (int p : {2, 3, 4, 8}) cases.emplace_back(t.name, p, 1);
    cases.emplace_back(t.name, 2, 2);
    // One stage, two replicas: plain data parallelism, where a schedule
    // can run on one rank.
    if (sched::Generate(t.name, sched::Problem::Uniform(1, t.default_chunks, 4,
                                                         sched::StageCost{}, 0.0))
            .ok()) {
      cases.emplace_back(t.name, 1, 2);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, PipelineEquivalenceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = std::get<0>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           n += "_p" + std::to_string(std::get<1>(info.param));
                           const int d = std::get<2>(info.param);
                           return d == 1 ? n : n + "_d" + std::to_string(d);
                         });

}  // namespace
}  // namespace zbpp::worker
