// Every way a pipeline step can wait forever ends within the configured timeout
// with an error naming the action (docs/faults.md): a peer that never
// answers, ranks running different schedule versions, a tensor of the wrong
// shape. Thread-per-rank over the in-process communicator: the failure is the
// executor's, whatever the transport.

#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kStep = 3;
const absl::Duration kTimeout = absl::Milliseconds(500);
// What a rank may spend besides its one timed-out wait (model build and a
// few tiny passes).
const absl::Duration kSlack = absl::Seconds(2);

v1::JobSpec TinySpec(int chunks, int seq_len) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(4);
  model->set_hidden(16);
  model->set_heads(2);
  model->set_vocab(32);
  model->set_seq_len(seq_len);
  spec.mutable_pipeline()->set_stages(2);
  spec.mutable_pipeline()->set_chunks(chunks);
  spec.mutable_pipeline()->set_microbatches(4);
  spec.mutable_pipeline()->set_microbatch_size(2);
  spec.mutable_optimizer()->set_learning_rate(1e-2);
  spec.set_seed(3);
  return spec;
}

BatchFn Batches(int seq_len) {
  return [seq_len](int64_t step, int microbatch) {
    at::Generator gen = at::detail::createCPUGenerator(100 * step + microbatch);
    at::Tensor tokens = at::randint(32, {2, seq_len + 1}, gen, at::kLong);
    return MicrobatchData{tokens.narrow(1, 0, seq_len).contiguous(),
                          tokens.narrow(1, 1, seq_len).contiguous()};
  };
}

sched::Schedule Generate(const std::string& name, int chunks) {
  sched::Problem problem = sched::Problem::Uniform(2, chunks, 4, sched::VirtualStageCost{}, 0.0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return *schedule;
}

/// What one rank runs: its view of the job and the schedule it follows.
struct RankPlan {
  v1::JobSpec spec;
  sched::Schedule schedule;
  bool runs = true;  ///< false: the rank never starts the step (a dead peer).
};

/// How the step ended on one rank, and how long it took.
struct RankOutcome {
  absl::Status status;
  absl::Duration elapsed;
};

/// Runs step kStep on both ranks, each after its own plan, with kTimeout
/// as the communication timeout.
std::vector<RankOutcome> RunStep(const std::vector<RankPlan>& plans) {
  std::vector<std::unique_ptr<Communicator>> comms = CreateInProcessGroup(2);
  std::vector<RankOutcome> outcomes(plans.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(plans.size()); ++r) {
    if (!plans[r].runs) continue;
    threads.emplace_back([&, r] {
      const RankPlan& plan = plans[r];
      StageTrainerOptions o;
      o.spec = plan.spec;
      o.stage = r;
      for (int s = 0; s < plan.schedule.num_virtual_stages(); ++s) {
        if (plan.schedule.stage_of[s] == r) o.virtual_stages.push_back(s);
      }
      o.communicator = comms[r].get();
      o.train_batches = Batches(plan.spec.model().seq_len());
      o.eval_batches = o.train_batches;
      o.timeout = kTimeout;
      absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(o);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      ASSERT_TRUE((*trainer)->ValidateSchedule(plan.schedule).ok());
      const absl::Time start = absl::Now();
      outcomes[r].status = (*trainer)->RunStep(kStep, plan.schedule).status();
      outcomes[r].elapsed = absl::Now() - start;
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

void ExpectEndedInTime(const RankOutcome& outcome) {
  EXPECT_LT(outcome.elapsed, kTimeout + kSlack) << outcome.status;
}

// Rank 1 waits for the activation of its first forward from rank 0, which
// never runs: DeadlineExceeded naming the peer, the step, the microbatch
// and the pass.
TEST(ExecutorHangTest, PeerThatNeverAnswersTimesOutNamingPeerStepMicrobatchAndPass) {
  const sched::Schedule schedule = Generate("zb-h1", 1);
  const std::vector<RankOutcome> outcomes =
      RunStep({{TinySpec(1, 8), schedule, /*runs=*/false}, {TinySpec(1, 8), schedule}});
  const absl::Status& st = outcomes[1].status;
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(st.message(), AllOf(HasSubstr("step 3"), HasSubstr("peer 0"),
                                  HasSubstr("pass F"), HasSubstr("microbatch 0")));
  ExpectEndedInTime(outcomes[1]);
}

// The ranks follow two versions that place the virtual stages differently
// (ZB-V's V against interleaved 1F1B's round robin): each waits for an
// input the other sends elsewhere or computes locally. Both give up within
// the timeout naming the action they were stuck at.
TEST(ExecutorHangTest, RanksOnDifferentScheduleVersionsTimeOutNamingTheAction) {
  const sched::Schedule v = Generate("zb-v", 2);
  const sched::Schedule interleaved = Generate("1f1b-interleaved", 2);
  ASSERT_NE(v.stage_of, interleaved.stage_of);
  const std::vector<RankOutcome> outcomes =
      RunStep({{TinySpec(2, 8), v}, {TinySpec(2, 8), interleaved}});
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "stage " << r);
    const absl::Status& st = outcomes[r].status;
    EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
    EXPECT_THAT(st.message(), AllOf(HasSubstr("step 3, action #"), HasSubstr("pass "),
                                    HasSubstr("microbatch "), HasSubstr("peer ")));
    ExpectEndedInTime(outcomes[r]);
  }
}

// Rank 1 believes in a shorter sequence: the activation rank 0 sends does
// not fit its receive buffer. Rank 1 fails at once naming both shapes and
// its forward; rank 0, left waiting for the gradient, times out naming its
// backward.
TEST(ExecutorHangTest, TensorOfTheWrongShapeFailsNamingTheActionAndTheShapes) {
  const sched::Schedule schedule = Generate("1f1b", 1);
  const std::vector<RankOutcome> outcomes =
      RunStep({{TinySpec(1, 8), schedule}, {TinySpec(1, 4), schedule}});
  const absl::Status& receiver = outcomes[1].status;
  EXPECT_EQ(receiver.code(), absl::StatusCode::kInvalidArgument) << receiver;
  EXPECT_THAT(receiver.message(),
              AllOf(HasSubstr("step 3"), HasSubstr("pass F"), HasSubstr("microbatch 0"),
                    HasSubstr("peer 0"), HasSubstr("[2, 8, 16]"), HasSubstr("[2, 4, 16]")));
  const absl::Status& sender = outcomes[0].status;
  EXPECT_EQ(sender.code(), absl::StatusCode::kDeadlineExceeded) << sender;
  EXPECT_THAT(sender.message(),
              AllOf(HasSubstr("step 3"), HasSubstr("pass B"), HasSubstr("peer 1")));
  ExpectEndedInTime(outcomes[0]);
  ExpectEndedInTime(outcomes[1]);
}

}  // namespace
}  // namespace zbpp::worker
