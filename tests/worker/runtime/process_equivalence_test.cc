// The pipeline equivalence (equivalence.h) with ranks as processes, over a
// real transport: Gloo on loopback (in CI), NCCL on a GPU machine
// (ZBPP_TEST_DEVICE=cuda:N; the ranks share the GPU under the shared-GPU
// test setting). Each child trains its worker and compares its own
// parameters with the single-process reference.

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/registry.h"
#include "tests/worker/rank_processes.h"
#include "tests/worker/runtime/equivalence.h"
#include "tests/worker/runtime/rank_groups.h"

namespace zbpp::worker {
namespace {

// transport, schedule, p, d, architecture
using Case = std::tuple<TestTransport, std::string, int, int, std::string>;

class ProcessEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ProcessEquivalenceTest, ParametersMatchSingleProcess) {
  const auto& [transport, name, p, d, architecture] = GetParam();
  if (!TransportAvailable(transport)) {
    GTEST_SKIP() << TransportName(transport) << " needs ZBPP_TEST_DEVICE=cuda:N";
  }
  const std::optional<RankProcess> me = CurrentRankProcess();
  if (!me.has_value()) {
    absl::Status ran = RunTestAsRankProcesses(p * d, absl::Seconds(240));
    EXPECT_TRUE(ran.ok()) << ran;
    return;
  }
  absl::StatusOr<sched::Schedule> schedule = ScheduleFor(name, p, d);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  v1::JobSpec spec = TinySpec(p, schedule->chunks, schedule->microbatches, architecture);
  spec.mutable_pipeline()->set_data_parallel(d);
  const int w = me->rank;
  // Every process joins its pipeline group first, then its replica group.
  absl::StatusOr<std::unique_ptr<Communicator>> pipeline =
      JoinTestGroup(transport, *me, absl::StrCat("pipeline", w / p), w % p, p);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  std::unique_ptr<Communicator> replicas;
  if (d > 1) {
    absl::StatusOr<std::unique_ptr<Communicator>> joined =
        JoinTestGroup(transport, *me, absl::StrCat("replicas", w % p), w / p, d);
    ASSERT_TRUE(joined.ok()) << joined.status();
    replicas = *std::move(joined);
  }
  absl::StatusOr<std::map<std::string, at::Tensor>> params =
      TrainWorker(*schedule, spec, w, pipeline->get(), replicas.get());
  ASSERT_TRUE(params.ok()) << "worker " << w << ": " << params.status();
  EXPECT_FALSE(params->empty());
  ExpectNearReference(*params, Reference(spec, d),
                      absl::StrCat(architecture, " ", name, " p=", p, " d=", d, " worker ", w));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  // Gloo (CI): a loop schedule, a V schedule, and data parallelism; llama's
  // tied embeddings across two processes (its data-parallel cases, four
  // processes and over a minute here, run as threads in
  // pipeline_equivalence_test.cc).
  cases.emplace_back(TestTransport::kGloo, "zb-h1", 2, 1, "gpt");
  cases.emplace_back(TestTransport::kGloo, "zb-v", 2, 1, "gpt");
  cases.emplace_back(TestTransport::kGloo, "zb-2p", 2, 2, "gpt");
  cases.emplace_back(TestTransport::kGloo, "zb-h1", 2, 1, "llama");
  // NCCL (a GPU machine): every schedule at p = 2, some at p = 4, and data
  // parallelism (a second NCCL communicator on the device); llama as on Gloo.
  for (const sched::ScheduleTraits& t : sched::AllSchedules()) {
    cases.emplace_back(TestTransport::kNccl, t.name, 2, 1, "gpt");
  }
  for (const char* name : {"1f1b", "zb-h1", "zb-2p", "zb-v"}) {
    cases.emplace_back(TestTransport::kNccl, name, 4, 1, "gpt");
  }
  for (const char* name : {"1f1b", "zb-2p"}) {
    cases.emplace_back(TestTransport::kNccl, name, 2, 2, "gpt");
  }
  cases.emplace_back(TestTransport::kNccl, "zb-h1", 2, 1, "llama");
  cases.emplace_back(TestTransport::kNccl, "zb-v", 4, 1, "llama");
  cases.emplace_back(TestTransport::kNccl, "zb-2p", 2, 2, "llama");
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Transports, ProcessEquivalenceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = std::get<1>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return absl::StrCat(TransportName(std::get<0>(info.param)), "_",
                                               std::get<4>(info.param), "_", n, "_p",
                                               std::get<2>(info.param), "_d",
                                               std::get<3>(info.param));
                         });

}  // namespace
}  // namespace zbpp::worker
