// The proof that the B/W split, the communication and every schedule are
// correct (issue 4 §3): after 3 optimizer steps, the parameters of a
// pipelined run equal those of one process training the whole model with
// plain autograd (at::linear's fused backward), within 1e-5 relative.

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/model/gpt.h"
#include "worker/runtime/adamw.h"
#include "worker/runtime/rank_trainer.h"
#include "tests/worker/test_device.h"

namespace zbpp::worker {
namespace {

constexpr int kSteps = 3;

v1::JobSpec TinySpec(int stages, int chunks, int microbatches) {
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(8);
  model->set_hidden(32);
  model->set_heads(4);
  model->set_vocab(64);
  model->set_seq_len(16);
  spec.mutable_pipeline()->set_stages(stages);
  spec.mutable_pipeline()->set_chunks(chunks);
  spec.mutable_pipeline()->set_microbatches(microbatches);
  spec.mutable_pipeline()->set_microbatch_size(2);
  v1::OptimizerSpec* opt = spec.mutable_optimizer();
  opt->set_learning_rate(1e-2);
  opt->set_warmup_steps(2);
  opt->set_weight_decay(0.1);
  // Small enough that every step is clipped: the global norm must be right.
  opt->set_max_grad_norm(0.5);
  spec.set_seed(42);
  return spec;
}

MicrobatchData Batch(int64_t step, int microbatch) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * step + microbatch);
  at::Tensor tokens = at::randint(64, {2, 17}, gen, at::kLong);
  return {tokens.narrow(1, 0, 16).contiguous(), tokens.narrow(1, 1, 16).contiguous()};
}

// Single process, no pipeline, no split: the reference parameters.
std::map<std::string, at::Tensor> Reference(const v1::JobSpec& spec) {
  GptConfig config = *GptConfigFromSpec(spec.model());
  auto model = *GptChunk::Create(config, 0, 1, spec.seed(), TestDevice());
  AdamW optimizer(model->parameters(), AdamWOptions::FromSpec(spec.optimizer()));
  const int m = spec.pipeline().microbatches();
  for (int step = 0; step < kSteps; ++step) {
    optimizer.ZeroGrad();
    for (int mb = 0; mb < m; ++mb) {
      MicrobatchData data = Batch(step, mb);
      (LanguageModelLoss(model->Forward(data.inputs.to(TestDevice())),
                         data.targets.to(TestDevice())) /
       double(m))
          .backward();
    }
    bool inf_nan = false;
    const double norm = std::sqrt(optimizer.LocalGradNormSquared(&inf_nan));
    const double max_norm = spec.optimizer().max_grad_norm();
    optimizer.Step(step, norm > max_norm ? max_norm / (norm + 1e-6) : 1.0);
  }
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : model->parameters()) out[name] = t.detach().clone();
  return out;
}

using Case = std::tuple<std::string, int>;  // schedule, p

class PipelineEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalenceTest, ParametersMatchSingleProcessAfterThreeSteps) {
  const auto& [name, p] = GetParam();
  const sched::ScheduleTraits traits = *sched::FindSchedule(name);
  const int v = traits.default_chunks;
  const int m = 2 * p;
  sched::Problem problem = sched::Problem::Uniform(p, v, m, sched::StageCost{}, 0.0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  const v1::JobSpec spec = TinySpec(p, v, m);

  std::vector<std::unique_ptr<Communicator>> comms = CreateInProcessGroup(p);
  std::vector<std::map<std::string, at::Tensor>> params(p);
  std::vector<absl::Status> errors(p);
  std::vector<int> steps_run(p, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < p; ++r) {
    ranks.emplace_back([&, r] {
      RankTrainerOptions o;
      o.spec = spec;
      o.rank = r;
      for (int s = 0; s < schedule->num_stages(); ++s) {
        if (schedule->worker_of_stage[s] == r) o.virtual_stages.push_back(s);
      }
      o.communicator = comms[r].get();
      o.device = TestDevice();
      o.train_batches = Batch;
      o.eval_batches = Batch;
      o.timeout = absl::Seconds(20);
      absl::StatusOr<std::unique_ptr<RankTrainer>> trainer = RankTrainer::Create(o);
      if (!trainer.ok()) {
        errors[r] = trainer.status();
        return;
      }
      if (errors[r] = (*trainer)->ValidateSchedule(*schedule); !errors[r].ok()) return;
      for (int step = 0; step < kSteps; ++step) {
        absl::StatusOr<StepResult> result = (*trainer)->RunStep(step, *schedule);
        if (!result.ok()) {
          errors[r] = result.status();
          return;
        }
        ++steps_run[r];
      }
      for (const auto& [pname, t] : (*trainer)->Parameters()) params[r][pname] = t.detach();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < p; ++r) {
    ASSERT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
    ASSERT_EQ(steps_run[r], kSteps);
  }

  std::map<std::string, at::Tensor> reference = Reference(spec);
  GptConfig config = *GptConfigFromSpec(spec.model());
  auto initial = *GptChunk::Create(config, 0, 1, spec.seed(), TestDevice());
  size_t compared = 0;
  double worst = 0;
  for (int r = 0; r < p; ++r) {
    for (const auto& [pname, t] : params[r]) {
      ASSERT_EQ(reference.count(pname), 1u) << pname;
      const at::Tensor& want = reference[pname];
      const double scale = want.abs().max().item<double>();
      const double error = (t - want).abs().max().item<double>() / scale;
      worst = std::max(worst, error);
      EXPECT_LE(error, 1e-5) << name << " p=" << p << " rank " << r << " " << pname;
      ++compared;
    }
  }
  EXPECT_EQ(compared, reference.size()) << "every parameter lives on exactly one rank";
  // Training moved the weights: equality is not the trivial one.
  for (const auto& [pname, t] : initial->parameters()) {
    EXPECT_FALSE(at::allclose(t, reference[pname])) << pname << " did not change";
  }
  RecordProperty("max_relative_error", std::to_string(worst));
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const sched::ScheduleTraits& t : sched::AllSchedules()) {
    for (int p : {2, 4}) cases.emplace_back(t.name, p);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, PipelineEquivalenceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = std::get<0>(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n + "_p" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace zbpp::worker
