// Synthetic compute (worker/runtime/synthetic_compute.h): the executor waits
// each pass's cost-model duration instead of computing, over the
// order-strict communicator (NCCL's matching), for every registry schedule
// at p = 4. Each measured pass lasts what was asked, and the step lasts
// about the simulator's makespan for those costs. Tolerances are generous:
// the test machine is shared and sleeps overshoot under load; speed goals
// belong to bench/pipeline_scale_bench, not here.

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/order_strict_communicator.h"
#include "worker/runtime/stage_trainer.h"
#include "worker/runtime/synthetic_compute.h"
#include "worker/runtime/synthetic_pipeline.h"

namespace zbpp::worker {
namespace {

constexpr int kWorkers = 4;
constexpr int kMicrobatches = 8;
constexpr int kSteps = 2;

// Per virtual stage: the last one slower, as a head with the loss is. A
// fused backward cheaper than B and W, so that merged pairs
// (sched::MergesWithNext) run, and wait, T_BW.
sched::Problem CostProblem(int chunks) {
  sched::VirtualStageCost cost;
  cost.f_seconds = 0.004;
  cost.b_seconds = 0.005;
  cost.w_seconds = 0.003;
  cost.bw_seconds = 0.007;
  sched::Problem problem = sched::Problem::Uniform(kWorkers, chunks, kMicrobatches, cost, 0.0);
  problem.virtual_stages.back().f_seconds = 0.006;
  return problem;
}

SyntheticCompute FromProblem(const sched::Problem& problem) {
  SyntheticCompute synthetic;
  synthetic.stages = problem.virtual_stages;
  synthetic.loss = 2.5;
  return synthetic;
}

class SyntheticComputeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticComputeTest, PassesAndStepTakeTheCostModelsTimes) {
  const sched::ScheduleTraits traits = *sched::FindSchedule(GetParam());
  const sched::Problem problem = CostProblem(traits.default_chunks);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(GetParam(), problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  absl::StatusOr<sched::SimulationResult> predicted = sched::Simulate(problem, *schedule);
  ASSERT_TRUE(predicted.ok()) << predicted.status();

  OrderStrictGroup group = CreateOrderStrictGroup(kWorkers);
  std::vector<Communicator*> ranks;
  for (auto& c : group.ranks) ranks.push_back(c.get());
  const SyntheticCompute synthetic = FromProblem(problem);
  absl::StatusOr<std::vector<std::vector<StepTimeline>>> steps =
      RunSyntheticPipeline(*schedule, synthetic, ranks, kSteps, SyntheticShape{2, 8, 16});
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_TRUE(group.check_idle().ok()) << group.check_idle();

  const std::vector<int> buckets = sched::BucketsPerVirtualStage(*schedule);
  std::vector<double> overshoots;
  for (int step = 0; step < kSteps; ++step) {
    double step_seconds = 0;
    for (int r = 0; r < kWorkers; ++r) {
      const StepTimeline& t = (*steps)[step][r];
      const std::vector<sched::Action>& actions = schedule->actions[r];
      ASSERT_EQ(t.action_start_seconds.size(), actions.size());
      for (size_t j = 0; j < actions.size(); ++j) {
        if (actions[j].kind == sched::PassKind::kReduce) continue;
        // The W part of a merged pair waits the rest of T_BW, as the
        // simulator times it.
        const sched::ActionTiming& sim = predicted->timings[r][j];
        const double asked = sched::MergedIntoPrevious(actions, j)
                                 ? sim.end_seconds - sim.start_seconds
                                 : SyntheticPassSeconds(synthetic, actions[j], step,
                                                        buckets[actions[j].virtual_stage.value()], r);
        const double took = t.action_end_seconds[j] - t.action_start_seconds[j];
        // A sleep never ends early; a loaded machine may wake it late.
        EXPECT_GE(took, asked - 1e-4) << GetParam() << " rank " << r << " action " << j;
        overshoots.push_back(took - asked);
      }
      // The last virtual stage's rank reports the constant loss per
      // microbatch.
      if (schedule->stage_of.back() == r) {
        EXPECT_EQ(t.loss_count, kMicrobatches);
        EXPECT_DOUBLE_EQ(t.loss_sum, 2.5 * kMicrobatches);
      }
      step_seconds = std::max(step_seconds, t.step_seconds);
    }
    // Ranks start their step within a thread start of each other, so the
    // longest rank's step is the makespan; never shorter than the
    // simulator's (passes cannot be shorter, dependencies are the same).
    EXPECT_GE(step_seconds, 0.97 * predicted->step_seconds) << GetParam();
    // Loose on purpose (the machine may be loaded; speed is measured by
    // bench/pipeline_scale_bench): passes run one after another across the
    // ranks would take about p = 4 times the busiest rank's time.
    EXPECT_LE(step_seconds, 2.5 * predicted->step_seconds + 0.05) << GetParam();
  }
  std::sort(overshoots.begin(), overshoots.end());
  EXPECT_LT(overshoots[overshoots.size() / 2], 0.005) << GetParam() << ": median overshoot";
}

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const sched::ScheduleTraits& t : sched::AllSchedules()) names.push_back(t.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, SyntheticComputeTest, ::testing::ValuesIn(Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(SyntheticComputeCheck, RefusesWrongStageCountsTimesAndNoise) {
  SyntheticCompute s;
  s.stages.resize(4);
  EXPECT_TRUE(CheckSyntheticCompute(s, 4).ok());
  EXPECT_FALSE(CheckSyntheticCompute(s, 8).ok());
  s.noise = 1;
  EXPECT_FALSE(CheckSyntheticCompute(s, 4).ok());
  s.noise = 0;
  s.stages[2].b_seconds = -1;
  EXPECT_FALSE(CheckSyntheticCompute(s, 4).ok());
}

TEST(SyntheticComputeNoise, IsDeterministicBoundedAndVaries) {
  SyntheticCompute s;
  s.stages.resize(2);
  s.noise = 0.2;
  s.seed = 7;
  double lo = 10, hi = 0;
  for (int mb = 0; mb < 200; ++mb) {
    const sched::Action a{sched::PassKind::kF, VirtualStage(1), mb};
    const double t = SyntheticPassSeconds(s, a, 3, 1, 0);
    EXPECT_EQ(t, SyntheticPassSeconds(s, a, 3, 1, 0));
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  EXPECT_GE(lo, 0.8);
  EXPECT_LE(hi, 1.2);
  EXPECT_GT(hi - lo, 0.2);
  // A fused BW waits T_B + T_W; a partial W its share.
  s.noise = 0;
  EXPECT_DOUBLE_EQ(SyntheticPassSeconds(s, {sched::PassKind::kBW, VirtualStage(0), 0}, 0, 1, 0), 2.0);
  sched::Action w{sched::PassKind::kW, VirtualStage(0), 0};
  w.bucket = 1;
  EXPECT_DOUBLE_EQ(SyntheticPassSeconds(s, w, 0, 4, 0), 0.25);
}

TEST(SyntheticComputeFromCostModel, ScalesTheVersionsCosts) {
  v1::CostModel model;
  for (int s = 0; s < 2; ++s) {
    v1::VirtualStageCost* c = model.add_virtual_stages();
    c->set_f_seconds(0.001 * (s + 1));
    c->set_b_seconds(0.002);
    c->set_w_seconds(0.003);
  }
  absl::StatusOr<SyntheticCompute> synthetic =
      SyntheticFromCostModel(model, 2, SyntheticComputeSource{10, 0.1, 5});
  ASSERT_TRUE(synthetic.ok()) << synthetic.status();
  EXPECT_DOUBLE_EQ(synthetic->stages[1].f_seconds, 0.02);
  EXPECT_DOUBLE_EQ(synthetic->stages[0].w_seconds, 0.03);
  EXPECT_EQ(synthetic->noise, 0.1);
  EXPECT_EQ(synthetic->seed, 5u);
  EXPECT_FALSE(SyntheticFromCostModel(model, 4, SyntheticComputeSource{}).ok());
  EXPECT_FALSE(SyntheticFromCostModel(model, 2, SyntheticComputeSource{0, 0, 0}).ok());
}

// The rank trainer around synthetic passes: post-update validation settles
// every step (zero gradients: nothing clipped or skipped), the loss is the
// constant, and each step lasts at least the simulator's step.
TEST(SyntheticComputeStageTrainer, PostValidationStepsOnZeroGradients) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(4);
  model->set_hidden(16);
  model->set_heads(2);
  model->set_vocab(32);
  model->set_seq_len(8);
  spec.mutable_pipeline()->set_stages(2);
  spec.mutable_pipeline()->set_chunks(1);
  spec.mutable_pipeline()->set_microbatches(4);
  spec.mutable_pipeline()->set_microbatch_size(2);
  spec.mutable_optimizer()->set_learning_rate(1e-2);
  spec.mutable_optimizer()->set_max_grad_norm(1.0);
  spec.set_seed(3);
  sched::VirtualStageCost cost;
  cost.f_seconds = 0.003;
  cost.b_seconds = 0.004;
  cost.w_seconds = 0.002;
  const sched::Problem problem = sched::Problem::Uniform(2, 1, 4, cost, 0.0);
  const sched::Schedule schedule = *sched::Generate("zb-h1", problem);
  const double predicted = sched::Simulate(problem, schedule)->step_seconds;
  SyntheticCompute synthetic;
  synthetic.stages = problem.virtual_stages;
  synthetic.loss = 1.25;

  std::vector<std::unique_ptr<Communicator>> comms = CreateInProcessGroup(2);
  constexpr int kTrainerSteps = 3;
  std::vector<std::vector<StepResult>> results(2);
  std::vector<absl::Status> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      StageTrainerOptions o;
      o.spec = spec;
      o.stage = r;
      o.virtual_stages = {r};
      o.communicator = comms[r].get();
      o.train_batches = [](int64_t, int) {
        return MicrobatchData{at::zeros({2, 8}, at::kLong), at::zeros({2, 8}, at::kLong)};
      };
      o.eval_batches = o.train_batches;
      o.timeout = absl::Seconds(20);
      o.synthetic = synthetic;
      absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(o);
      if (!trainer.ok()) {
        errors[r] = trainer.status();
        return;
      }
      for (int step = 0; step < kTrainerSteps; ++step) {
        absl::StatusOr<StepResult> result =
            (*trainer)->RunStep(step, schedule, v1::VALIDATION_MODE_POST);
        if (!result.ok()) {
          errors[r] = result.status();
          return;
        }
        results[r].push_back(*std::move(result));
      }
      absl::StatusOr<std::optional<StepValidation>> last = (*trainer)->Settle();
      if (!last.ok()) errors[r] = last.status();
    });
  }
  for (std::thread& t : threads) t.join();
  // Each step's makespan, the longest of its ranks' steps (a rank that
  // starts late, its input already there, has a shorter step of its own).
  std::vector<double> makespans(kTrainerSteps, 0.0);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r].ok()) << "stage " << r << ": " << errors[r];
    ASSERT_EQ(results[r].size(), static_cast<size_t>(kTrainerSteps));
    for (size_t step = 0; step < results[r].size(); ++step) {
      const StepResult& result = results[r][step];
      makespans[step] = std::max(makespans[step], result.timeline.step_seconds);
      EXPECT_EQ(result.local_grad_norm_sq, 0);
      EXPECT_FALSE(result.found_inf_nan);
      for (const StepValidation& v : result.validations) {
        EXPECT_EQ(v.clip_coefficient, 1);
        EXPECT_FALSE(v.rolled_back);
      }
      if (r == 1) {
        ASSERT_TRUE(result.loss.has_value());
        EXPECT_DOUBLE_EQ(*result.loss, 1.25);
      }
    }
  }
  for (double makespan : makespans) EXPECT_GE(makespan, 0.97 * predicted);
}

}  // namespace
}  // namespace zbpp::worker
