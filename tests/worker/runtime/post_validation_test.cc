// Post-update validation (paper §4): optimistic optimizer steps
// validated during the next step's warm-up, rolled back when the fully
// reduced state demands clipping or a skip, with the speculative forwards
// replayed. Ranks run as threads over the in-process communicator.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "scheduler/comm_order.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/order_strict_communicator.h"
#include "worker/model/gpt.h"
#include "worker/runtime/adamw.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/stage_trainer.h"
#include "tests/worker/test_device.h"

namespace zbpp::worker {
namespace {

using TensorMap = std::map<std::string, at::Tensor>;

struct RunOptions {
  std::string schedule = "zb-h1";
  int p = 2;
  v1::ValidationMode mode = v1::VALIDATION_MODE_POST;
  v1::RollbackMode rollback = v1::ROLLBACK_MODE_EXACT;
  std::optional<double> max_grad_norm;
  int64_t nan_step = -1;
  /// FaultInjection::clip_step.
  int64_t clip_step = -1;
  /// Microbatches per step; 0: 2p.
  int microbatches = 0;
  int steps = 5;
  v1::Precision precision = v1::PRECISION_FP32;
  /// LossScaleSpec.initial_scale for FP16; unset: the default.
  std::optional<double> initial_loss_scale;
  /// Steps after which every rank settles and records its state.
  std::set<int64_t> settle_after;
};

struct RankRun {
  TensorMap initial_state;                // Before the first step.
  TensorMap final_state;                  // Parameters, moments, step count.
  std::map<int64_t, TensorMap> settled;   // State after each settle_after step.
  std::vector<StepValidation> validations;
  std::vector<double> losses;             // Last rank only.
  std::vector<double> local_norm_sq;      // This rank's Σ‖g‖², by step.
};

MicrobatchData Batch(int64_t step, int microbatch) {
  at::Generator gen = at::detail::createCPUGenerator(1000 * step + microbatch);
  at::Tensor tokens = at::randint(64, {2, 17}, gen, at::kLong);
  return {tokens.narrow(1, 0, 16).contiguous(), tokens.narrow(1, 1, 16).contiguous()};
}

TensorMap Copy(const std::vector<NamedTensor>& tensors) {
  TensorMap out;
  for (const auto& [name, t] : tensors) out[name] = t.detach().clone();
  return out;
}

// The schedule of `run` and the job it trains.
std::pair<sched::Schedule, v1::JobSpec> Job(const RunOptions& run) {
  const sched::ScheduleTraits traits = *sched::FindSchedule(run.schedule);
  const int v = traits.default_chunks;
  const int m = run.microbatches > 0 ? run.microbatches : 2 * run.p;
  absl::StatusOr<sched::Schedule> generated =
      sched::Generate(run.schedule, sched::Problem::Uniform(run.p, v, m, sched::VirtualStageCost{}, 0.0));
  if (!generated.ok()) return {sched::Schedule{}, v1::JobSpec{}};
  sched::Schedule schedule = *std::move(generated);
  v1::JobSpec spec;
  v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  // 4 layers per chunk where p divides 4, else p (a multiple of p·v).
  model->set_layers(v * run.p * ((4 + run.p - 1) / run.p));
  model->set_hidden(32);
  model->set_heads(4);
  model->set_vocab(64);
  model->set_seq_len(16);
  spec.mutable_pipeline()->set_stages(run.p);
  spec.mutable_pipeline()->set_chunks(v);
  spec.mutable_pipeline()->set_microbatches(m);
  spec.mutable_pipeline()->set_microbatch_size(2);
  v1::OptimizerSpec* opt = spec.mutable_optimizer();
  opt->set_learning_rate(1e-2);
  opt->set_warmup_steps(2);
  if (run.max_grad_norm.has_value()) opt->set_max_grad_norm(*run.max_grad_norm);
  opt->set_rollback(run.rollback);
  spec.set_seed(7);
  spec.set_precision(run.precision);
  if (run.initial_loss_scale.has_value()) {
    spec.mutable_loss_scale()->set_initial_scale(*run.initial_loss_scale);
  }
  return {std::move(schedule), std::move(spec)};
}

std::vector<RankRun> Train(const RunOptions& run) {
  const auto [schedule, spec] = Job(run);
  // NCCL's matching: every pair's messages, discarded speculative ones
  // included, in the derived order.
  OrderStrictGroup group = CreateOrderStrictGroup(run.p);
  std::vector<std::unique_ptr<Communicator>>& comms = group.ranks;
  std::vector<RankRun> out(run.p);
  std::vector<absl::Status> errors(run.p);
  std::vector<std::thread> ranks;
  for (int r = 0; r < run.p; ++r) {
    ranks.emplace_back([&, r] {
      StageTrainerOptions o;
      o.spec = spec;
      o.stage = r;
      for (int s = 0; s < schedule.num_virtual_stages(); ++s) {
        if (schedule.stage_of[s] == r) o.virtual_stages.push_back(s);
      }
      o.communicator = comms[r].get();
      o.device = TestDevice();
      o.train_batches = Batch;
      o.eval_batches = Batch;
      o.timeout = absl::Seconds(30);
      o.faults.nan_step = run.nan_step;
      o.faults.clip_step = run.clip_step;
      absl::StatusOr<std::unique_ptr<StageTrainer>> trainer = StageTrainer::Create(o);
      if (!trainer.ok()) {
        errors[r] = trainer.status();
        return;
      }
      out[r].initial_state = Copy((*trainer)->OptimizerState());
      auto settle = [&]() -> absl::Status {
        absl::StatusOr<std::optional<StepValidation>> settled = (*trainer)->Settle();
        if (!settled.ok()) return settled.status();
        if (settled->has_value()) out[r].validations.push_back(**settled);
        return absl::OkStatus();
      };
      for (int64_t step = 0; step < run.steps; ++step) {
        absl::StatusOr<StepResult> result = (*trainer)->RunStep(step, schedule, run.mode);
        if (!result.ok()) {
          errors[r] = result.status();
          return;
        }
        for (const StepValidation& v : result->validations) out[r].validations.push_back(v);
        if (result->loss.has_value()) out[r].losses.push_back(*result->loss);
        out[r].local_norm_sq.push_back(result->local_grad_norm_sq);
        if (run.settle_after.count(step) == 1) {
          if (errors[r] = settle(); !errors[r].ok()) return;
          out[r].settled[step] = Copy((*trainer)->OptimizerState());
        }
      }
      if (errors[r] = settle(); !errors[r].ok()) return;
      out[r].final_state = Copy((*trainer)->OptimizerState());
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < run.p; ++r) {
    EXPECT_TRUE(errors[r].ok()) << run.schedule << " rank " << r << ": " << errors[r];
  }
  EXPECT_TRUE(group.check_idle().ok()) << run.schedule << ": " << group.check_idle();
  return out;
}

// Largest |a - b| / max|b| over the tensors of every rank.
double MaxRelativeError(const std::vector<RankRun>& a, const std::vector<RankRun>& b) {
  double worst = 0;
  for (size_t r = 0; r < b.size(); ++r) {
    EXPECT_EQ(a[r].final_state.size(), b[r].final_state.size());
    for (const auto& [name, want] : b[r].final_state) {
      auto it = a[r].final_state.find(name);
      if (it == a[r].final_state.end()) {
        ADD_FAILURE() << "stage " << r << " lacks " << name;
        continue;
      }
      const double scale = std::max(want.abs().max().item<double>(), 1e-30);
      worst = std::max(worst, (it->second - want).abs().max().item<double>() / scale);
    }
  }
  return worst;
}

// What the validations of one rank say happened.
struct Tally {
  int clipped = 0, skipped = 0, rolled_back = 0, replays = 0;
  std::set<int64_t> steps;
};

Tally Count(const RankRun& run) {
  Tally t;
  for (const StepValidation& v : run.validations) {
    t.steps.insert(v.step);
    if (v.clip_coefficient == 0) ++t.skipped;
    if (v.clip_coefficient > 0 && v.clip_coefficient < 1) ++t.clipped;
    if (v.rolled_back) ++t.rolled_back;
    if (v.replayed_forwards > 0) ++t.replays;
  }
  return t;
}

// The global gradient norms the synchronous run saw, step by step.
std::vector<double> Norms(const RankRun& run) {
  std::vector<double> norms;
  for (const StepValidation& v : run.validations) norms.push_back(std::sqrt(v.global_grad_norm_sq));
  return norms;
}

// A clipping threshold under which step 0 is clipped although rank 0's own
// norm is below it: rank 0 steps optimistically and must roll back, and
// step 1's forwards are replayed.
double SpeculativeThreshold(const std::vector<RankRun>& unclipped) {
  return (std::sqrt(unclipped[0].local_norm_sq[0]) +
          std::sqrt(unclipped[0].validations[0].global_grad_norm_sq)) /
         2;
}

class PostValidationTest : public ::testing::TestWithParam<std::pair<std::string, int>> {};

// (a) With post-validation the parameters and moments equal the synchronous
// path's within 1e-6 relative: without clipping, with every step clipped
// (each rolled back, redone and its successor's forwards replayed), and
// with a threshold between the steps' norms (some clipped, some not).
TEST_P(PostValidationTest, EqualsSynchronousWithAndWithoutClipping) {
  const auto& [schedule, p] = GetParam();
  const sched::ScheduleTraits traits = *sched::FindSchedule(schedule);
  const sched::Schedule generated = *sched::Generate(
      schedule, sched::Problem::Uniform(p, traits.default_chunks, 2 * p, sched::VirtualStageCost{}, 0.0));
  ASSERT_TRUE(sched::CheckSpeculativePrefixes(generated, *sched::DerivePairOrders(generated)).ok())
      << "the schedule must allow speculation, or this test exercises nothing";
  RunOptions run;
  run.schedule = schedule;
  run.p = p;
  run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  const std::vector<RankRun> free_sync = Train(run);
  const std::vector<double> norms = Norms(free_sync[0]);
  ASSERT_EQ(norms.size(), static_cast<size_t>(run.steps));
  std::vector<double> sorted = norms;
  std::sort(sorted.begin(), sorted.end());

  int replays_seen = 0;
  for (const double threshold :
       {-1.0, SpeculativeThreshold(free_sync), sorted.front() / 2, (sorted[1] + sorted[2]) / 2}) {
    SCOPED_TRACE(::testing::Message() << schedule << " p=" << p << " max_grad_norm "
                                      << threshold);
    run.max_grad_norm.reset();
    if (threshold > 0) run.max_grad_norm = threshold;
    run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
    const std::vector<RankRun> sync = Train(run);
    run.mode = v1::VALIDATION_MODE_POST;
    const std::vector<RankRun> post = Train(run);
    const double error = MaxRelativeError(post, sync);
    EXPECT_LE(error, 1e-6);
    // What the protocol must have done, from the synchronous run's norms:
    // rank r steps optimistically when the partial norm over ranks 0..r is
    // under the threshold, and rolls back when the global one is not; the
    // next step's forwards are replayed everywhere when rank 0 had stepped
    // (not after the last step: it is settled with nothing speculative).
    const std::vector<double> step_norms = Norms(sync[0]);
    int clipped = 0;
    int replays = 0;
    std::vector<int> rolled_back(p, 0);
    for (int step = 0; step < run.steps; ++step) {
      if (!(threshold > 0 && step_norms[step] > threshold)) continue;
      ++clipped;
      double partial = 0;
      for (int r = 0; r < p; ++r) {
        partial += sync[r].local_norm_sq[step];
        if (std::sqrt(partial) <= threshold) ++rolled_back[r];
      }
      if (std::sqrt(sync[0].local_norm_sq[step]) <= threshold &&
          step + 1 < run.steps) {
        ++replays;
      }
    }
    replays_seen += replays;
    for (int r = 0; r < p; ++r) {
      const Tally t = Count(post[r]);
      EXPECT_EQ(t.steps.size(), static_cast<size_t>(run.steps)) << "stage " << r;
      EXPECT_EQ(t.clipped, clipped) << "stage " << r;
      EXPECT_EQ(t.skipped, 0);
      EXPECT_EQ(t.rolled_back, rolled_back[r]) << "stage " << r;
      EXPECT_EQ(t.replays, replays) << "stage " << r;
    }
    RecordProperty("max_relative_error_" + std::to_string(clipped), std::to_string(error));
  }
  EXPECT_GT(replays_seen, 0) << "no rollback with replay was exercised";
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PostValidationTest,
    ::testing::Values(std::make_pair(std::string("1f1b"), 2), std::make_pair(std::string("zb-h1"), 2),
                      std::make_pair(std::string("zb-h2"), 4), std::make_pair(std::string("zb-v"), 2),
                      std::make_pair(std::string("zb-2p"), 4),
                      std::make_pair(std::string("dualpipe-v"), 2)),
    [](const auto& info) {
      std::string n = info.param.first;
      std::replace(n.begin(), n.end(), '-', '_');
      return n + "_p" + std::to_string(info.param.second);
    });

bool Equal(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || !at::equal(t, it->second)) return false;
  }
  return true;
}

// (b) A NaN in the last rank's gradient at step k: every rank's parameters
// and optimizer state after step k equal those before it bit for bit
// (exact rollback on the ranks that stepped optimistically, no update on the
// last), training goes on with finite losses, and a NaN met at the next
// step's first B (rollback + replay path) ends where the synchronous run
// ends.
TEST(PostValidationNanTest, RollsBackBitForBitAndContinues) {
  RunOptions run;
  run.p = 4;
  run.schedule = "zb-h1";
  run.steps = 6;
  run.nan_step = 2;
  run.settle_after = {1, 2};
  const std::vector<RankRun> post = Train(run);
  for (int r = 0; r < run.p; ++r) {
    ASSERT_EQ(post[r].settled.count(1), 1u);
    EXPECT_TRUE(Equal(post[r].settled.at(1), post[r].settled.at(2)))
        << "stage " << r << ": step 2 (NaN) changed the state";
    const Tally t = Count(post[r]);
    EXPECT_EQ(t.skipped, 1) << "stage " << r;
    EXPECT_EQ(t.rolled_back, r < run.p - 1 ? 1 : 0)
        << "stage " << r << ": ranks before the NaN step optimistically, the last never";
  }
  ASSERT_EQ(post[run.p - 1].losses.size(), static_cast<size_t>(run.steps));
  for (double loss : post[run.p - 1].losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  // Step 3 trained on: the state after the run differs from step 2's.
  EXPECT_FALSE(Equal(post[0].final_state, post[0].settled.at(2)));

  // The same NaN found at the next step's check (no settle around it):
  // rolled back, skipped, forwards replayed; the result is the synchronous
  // run's.
  run.settle_after.clear();
  const std::vector<RankRun> speculative = Train(run);
  run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  const std::vector<RankRun> sync = Train(run);
  EXPECT_LE(MaxRelativeError(speculative, sync), 1e-6);
  for (int r = 0; r < run.p; ++r) {
    const Tally t = Count(speculative[r]);
    EXPECT_EQ(t.skipped, 1);
    EXPECT_EQ(t.replays, 1) << "stage " << r;
  }
}

// (b') Every schedule of the registry at p = 2, 3, 4, 8 and m = p, 2p
// (where its generator takes them), over the order-strict communicator
// (NCCL's matching): a step forced to be clipped at step 3 (the ranks that
// stepped optimistically roll back, step 4's speculative forwards are
// discarded and replayed) and a NaN at step 5 (rolled back, skipped) end
// bit-identical to synchronous validation on every rank.
TEST(PostValidationNanTest, EveryScheduleRollsBackAndSkipsLikeSynchronous) {
  int cases = 0;
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    for (int p : {2, 3, 4, 8}) {
      for (int m : {p, 2 * p}) {
        RunOptions run;
        run.schedule = traits.name;
        run.p = p;
        run.microbatches = m;
        run.steps = 6;
        run.clip_step = 3;
        run.nan_step = 5;
        // Above every natural norm of the tiny model, far below the
        // forced step's.
        run.max_grad_norm = 100;
        if (Job(run).first.stages == 0) continue;  // The generator refuses (p, m).
        SCOPED_TRACE(::testing::Message() << traits.name << " p=" << p << " m=" << m);
        const std::vector<RankRun> post = Train(run);
        run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
        const std::vector<RankRun> sync = Train(run);
        ++cases;
        for (int r = 0; r < p; ++r) {
          EXPECT_TRUE(Equal(post[r].final_state, sync[r].final_state)) << "stage " << r;
          const Tally t = Count(post[r]);
          EXPECT_EQ(t.clipped, 1) << "stage " << r;
          EXPECT_EQ(t.skipped, 1) << "stage " << r;
          // Every rank but the last steps optimistically at both steps.
          EXPECT_EQ(t.rolled_back, r < p - 1 ? 2 : 0) << "stage " << r;
          EXPECT_EQ(t.replays, 1) << "stage " << r << ": step 4's forwards, after step 3";
        }
      }
    }
  }
  EXPECT_GE(cases, 80) << "most of the registry's (schedule, p, m) should run";
}

// (c) The in-place inverse of AdamW instead of the saved copy, on steps
// rolled back after clipping. Its error against the synchronous run is
// measured and reported. It is rounding, amplified: recovering
// v = (v' - (1-beta2) g^2) / beta2 cancels where g^2 dominates v, and Adam
// divides by sqrt(v), so parameters whose gradient is rounding noise (the
// attention key bias, mathematically gradient-free) drift by ~1e-4 of their
// (tiny) magnitude within a few steps, where the exact copy gives 0.
TEST(PostValidationInverseTest, InPlaceInverseErrorIsRoundingOnly) {
  RunOptions run;
  run.p = 2;
  run.schedule = "zb-h1";
  run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  run.max_grad_norm = SpeculativeThreshold(Train(run));
  const std::vector<RankRun> sync = Train(run);
  run.mode = v1::VALIDATION_MODE_POST;
  const std::vector<RankRun> exact = Train(run);
  run.rollback = v1::ROLLBACK_MODE_IN_PLACE_INVERSE;
  const std::vector<RankRun> inverse = Train(run);
  const int rolled_back = Count(inverse[0]).rolled_back;
  EXPECT_GE(rolled_back, 1);
  const double exact_error = MaxRelativeError(exact, sync);
  const double inverse_error = MaxRelativeError(inverse, sync);
  std::printf("after %d steps, %d rolled back: exact copy %.3g, in-place inverse %.3g "
              "(max relative error vs synchronous)\n",
              run.steps, rolled_back, exact_error, inverse_error);
  RecordProperty("inverse_max_relative_error", std::to_string(inverse_error));
  EXPECT_LE(exact_error, 1e-6);
  EXPECT_LE(inverse_error, 1e-3);
}

// The inverse alone, on one AdamW: Snapshot / Step / InvertStep against the
// snapshot, entry by entry.
TEST(AdamWInverseTest, InvertStepUndoesStepUpToRounding) {
  at::manual_seed(3);
  at::Tensor w = at::randn({64, 32}).requires_grad_(true);
  at::Tensor b = at::randn({32}).requires_grad_(true);
  AdamWOptions options;
  options.learning_rate = 1e-2;
  AdamW adam({{"w", w}, {"b", b}}, options);
  for (int step = 0; step < 3; ++step) {
    w.mutable_grad() = at::randn({64, 32});
    b.mutable_grad() = at::randn({32});
    adam.Step(step, 1.0);
  }
  w.mutable_grad() = at::randn({64, 32});
  b.mutable_grad() = at::randn({32});
  const TensorMap before = Copy(adam.StateForCheckpoint());
  adam.Snapshot();
  adam.Step(3, 0.5);
  EXPECT_FALSE(Equal(Copy(adam.StateForCheckpoint()), before));
  adam.RestoreSnapshot();
  EXPECT_TRUE(Equal(Copy(adam.StateForCheckpoint()), before)) << "exact rollback";
  adam.Step(3, 0.5);
  adam.InvertStep(3, 0.5);
  const TensorMap inverted = Copy(adam.StateForCheckpoint());
  for (const auto& [name, want] : before) {
    const double scale = std::max(want.abs().max().item<double>(), 1e-30);
    const double error = (inverted.at(name) - want).abs().max().item<double>() / scale;
    EXPECT_LE(error, 1e-5) << name;
  }
}

// One Step (LibTorch's fused kernel) against AdamW written out in float64
// (Loshchilov & Hutter, Algorithm 2, with bias correction; decay on 2-D
// parameters only) over three steps with a clipping coefficient, and the
// version counters the compute-type weight copies rely on.
TEST(AdamWTest, StepIsAdamWAndBumpsTheParametersVersions) {
  at::manual_seed(5);
  at::Tensor w = at::randn({16, 8}).requires_grad_(true);
  at::Tensor b = at::randn({8}).requires_grad_(true);
  AdamWOptions options;
  options.learning_rate = 1e-2;
  options.weight_decay = 0.1;
  options.warmup_steps = 2;
  AdamW adam({{"w", w}, {"b", b}}, options);
  TensorMap param = {{"w", w.detach().to(at::kDouble)}, {"b", b.detach().to(at::kDouble)}};
  TensorMap m = {{"w", at::zeros({16, 8}, at::kDouble)}, {"b", at::zeros({8}, at::kDouble)}};
  TensorMap v = m;
  for (int64_t step = 0; step < 3; ++step) {
    w.mutable_grad() = at::randn({16, 8});
    b.mutable_grad() = at::randn({8});
    const int64_t w_version = w._version(), b_version = b._version();
    const double scale = 0.5;
    adam.Step(step, scale);
    EXPECT_GT(w._version(), w_version);
    EXPECT_GT(b._version(), b_version);
    const double lr = options.LearningRateAt(step), t = double(step + 1);
    for (auto& [name, p] : param) {
      const at::Tensor g = (name == "w" ? w : b).grad().to(at::kDouble) * scale;
      if (p.dim() >= 2) p = p * (1 - lr * options.weight_decay);
      m[name] = options.beta1 * m[name] + (1 - options.beta1) * g;
      v[name] = options.beta2 * v[name] + (1 - options.beta2) * g * g;
      const at::Tensor m_hat = m[name] / (1 - std::pow(options.beta1, t));
      const at::Tensor v_hat = v[name] / (1 - std::pow(options.beta2, t));
      p = p - lr * m_hat / (v_hat.sqrt() + options.epsilon);
    }
    const TensorMap state = Copy(adam.StateForCheckpoint());
    for (const auto& [name, want] : param) {
      for (const auto& [got, ref] : {std::pair{state.at(name), want},
                                     std::pair{state.at(name + ".exp_avg"), m.at(name)},
                                     std::pair{state.at(name + ".exp_avg_sq"), v.at(name)}}) {
        const double error = (got.to(at::kDouble) - ref).abs().max().item<double>() /
                             std::max(ref.abs().max().item<double>(), 1e-30);
        EXPECT_LE(error, 1e-5) << name << " after step " << step;
      }
    }
  }
  // The gradients are left as they were (the clipping scale is applied to
  // a copy): InvertStep and a re-step after a rollback read them again.
  const at::Tensor grad = w.grad().clone();
  adam.Step(3, 0.25);
  EXPECT_TRUE(at::equal(w.grad(), grad));
}

// (d) FP16's overflow rides post-update validation: with a loss scale of
// 2^24 the float16 products overflow, the inf reaches every rank's check,
// each such step is skipped on every rank (the state after it equals the
// state before it bit for bit), the scale halves until a step fits, and
// training goes on. Every rank agrees on the scale at every step, and POST
// ends where SYNCHRONOUS ends.
TEST(MixedPrecisionTest, Fp16OverflowIsSkippedAndTheScaleHalves) {
  RunOptions run;
  run.p = 2;
  run.schedule = "zb-h1";
  run.steps = 12;
  run.precision = v1::PRECISION_FP16;
  run.initial_loss_scale = 16777216.0;  // 2^24
  run.settle_after = {0};
  run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  const std::vector<RankRun> sync = Train(run);
  run.mode = v1::VALIDATION_MODE_POST;
  const std::vector<RankRun> post = Train(run);
  for (const std::vector<RankRun>* runs : {&sync, &post}) {
    const std::vector<StepValidation>& first = (*runs)[0].validations;
    ASSERT_EQ(first.size(), static_cast<size_t>(run.steps));
    EXPECT_EQ(first[0].loss_scale, *run.initial_loss_scale);
    EXPECT_TRUE(first[0].global_found_inf_nan) << "2^24 must overflow float16";
    int skipped = 0;
    for (size_t i = 0; i < first.size(); ++i) {
      if (first[i].global_found_inf_nan) {
        ++skipped;
        EXPECT_EQ(first[i].clip_coefficient, 0) << "step " << i;
        if (i + 1 < first.size()) {
          EXPECT_EQ(first[i + 1].loss_scale, first[i].loss_scale / 2) << "step " << i;
        }
      } else if (i + 1 < first.size()) {
        EXPECT_EQ(first[i + 1].loss_scale, first[i].loss_scale) << "step " << i;
      }
    }
    std::printf("%s: loss scale by step:", v1::ValidationMode_Name(first[0].mode).c_str());
    for (const StepValidation& v : first) {
      std::printf(" %g%s", v.loss_scale, v.global_found_inf_nan ? " (skipped)" : "");
    }
    std::printf("\n");
    EXPECT_GE(skipped, 1);
    EXPECT_LT(skipped, run.steps) << "no step fitted in float16 after halving";
    for (int r = 0; r < run.p; ++r) {
      const std::vector<StepValidation>& mine = (*runs)[r].validations;
      ASSERT_EQ(mine.size(), first.size()) << "stage " << r;
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i].loss_scale, first[i].loss_scale) << "stage " << r << " step " << i;
        EXPECT_EQ(mine[i].clip_coefficient == 0, first[i].clip_coefficient == 0);
      }
      EXPECT_TRUE(Equal((*runs)[r].settled.at(0), (*runs)[r].initial_state))
          << "stage " << r << ": the overflowed step 0 changed the state";
      EXPECT_FALSE(Equal((*runs)[r].final_state, (*runs)[r].initial_state))
          << "stage " << r << ": nothing trained";
    }
    for (double loss : (*runs)[run.p - 1].losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  }
  EXPECT_LE(MaxRelativeError(post, sync), 1e-6);
}

// (e) bfloat16 and float16 (default loss scale) train like float32: the
// losses of every step within 2%, while the parameters do differ (the
// products really ran in 16 bits).
TEST(MixedPrecisionTest, Bf16AndFp16TrainLikeFp32) {
  RunOptions run;
  run.p = 2;
  run.schedule = "zb-h1";
  run.mode = v1::VALIDATION_MODE_SYNCHRONOUS;
  const std::vector<RankRun> fp32 = Train(run);
  for (v1::Precision precision : {v1::PRECISION_BF16, v1::PRECISION_FP16}) {
    SCOPED_TRACE(v1::Precision_Name(precision));
    run.precision = precision;
    const std::vector<RankRun> mixed = Train(run);
    const std::vector<double>& want = fp32[run.p - 1].losses;
    const std::vector<double>& got = mixed[run.p - 1].losses;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 0.02 * want[i]) << "step " << i;
    }
    EXPECT_EQ(Count(mixed[0]).skipped, 0) << "the default scale overflowed";
    EXPECT_GT(MaxRelativeError(mixed, fp32), 1e-6)
        << "no difference from float32: was the precision used?";
  }
}

// (f) Checkpoints are device-independent: a rank trained on the test device
// writes one, a rank on the CPU restores it bit for bit, and a rank on the
// test device restores that one's checkpoint bit for bit again.
TEST(CheckpointDeviceTest, ACheckpointMovesBetweenDevices) {
  RunOptions run;
  run.p = 1;
  run.schedule = "1f1b";
  const auto [schedule, spec] = Job(run);
  const std::string directory = ::testing::TempDir() + "zbpp-checkpoint-device";
  std::vector<std::unique_ptr<Communicator>> comms = CreateInProcessGroup(1);
  auto trainer = [&](c10::Device device) {
    StageTrainerOptions o;
    o.spec = spec;
    o.virtual_stages = {0};
    o.communicator = comms[0].get();
    o.device = device;
    o.train_batches = Batch;
    o.eval_batches = Batch;
    return *StageTrainer::Create(o);
  };
  auto on_cpu = [](const std::vector<NamedTensor>& state) {
    TensorMap out;
    for (const auto& [name, t] : state) out[name] = t.detach().cpu();
    return out;
  };
  std::unique_ptr<StageTrainer> trained = trainer(TestDevice());
  for (int64_t step = 0; step < 2; ++step) {
    ASSERT_TRUE(trained->RunStep(step, schedule).ok());
  }
  ASSERT_TRUE(trained->SaveCheckpoint(directory, 1).ok());
  std::unique_ptr<StageTrainer> cpu = trainer(c10::Device(c10::kCPU));
  EXPECT_FALSE(Equal(on_cpu(cpu->OptimizerState()), on_cpu(trained->OptimizerState())));
  ASSERT_TRUE(cpu->RestoreCheckpoint(directory, 1).ok());
  EXPECT_TRUE(Equal(on_cpu(cpu->OptimizerState()), on_cpu(trained->OptimizerState())));
  ASSERT_TRUE(cpu->SaveCheckpoint(directory, 2).ok());
  std::unique_ptr<StageTrainer> back = trainer(TestDevice());
  ASSERT_TRUE(back->RestoreCheckpoint(directory, 2).ok());
  EXPECT_TRUE(Equal(on_cpu(back->OptimizerState()), on_cpu(trained->OptimizerState())));
  for (const NamedTensor& t : back->Parameters()) EXPECT_EQ(t.second.device(), TestDevice());
}

}  // namespace
}  // namespace zbpp::worker
