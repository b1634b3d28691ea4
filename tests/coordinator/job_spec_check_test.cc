#include "coordinator/core/job_spec_check.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "coordinator/core/data_parallel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using zbpp::v1::JobSpec;

/// A small job every rule accepts: 8 GPT blocks on 2 stages with 1F1B.
JobSpec ValidSpec() {
  JobSpec spec;
  spec.set_name("tiny-gpt");
  zbpp::v1::ModelSpec* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(8);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_vocab(256);
  model->set_seq_len(128);
  spec.mutable_dataset()->set_builtin("bible-kjv");
  zbpp::v1::PipelineSpec* pipeline = spec.mutable_pipeline();
  pipeline->set_stages(2);
  pipeline->set_microbatches(8);
  pipeline->set_microbatch_size(4);
  spec.mutable_schedule()->set_name("1f1b");
  spec.mutable_optimizer()->set_learning_rate(3e-4);
  spec.set_steps(100);
  return spec;
}

TEST(ValidateJobSpec, ValidSpecPasses) {
  EXPECT_TRUE(ValidateJobSpec(ValidSpec()).ok())
      << ValidateJobSpec(ValidSpec());
}

TEST(ValidateJobSpec, EveryRegistryScheduleAcceptsASuitableSpec) {
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    JobSpec spec = ValidSpec();
    spec.mutable_schedule()->set_name(traits.name);
    EXPECT_TRUE(ValidateJobSpec(spec).ok())
        << traits.name << ": " << ValidateJobSpec(spec);
  }
}

TEST(ValidateJobSpec, OptionalFieldsWithinRangePass) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  spec.mutable_schedule()->mutable_resolve()->set_min_improvement(0);
  spec.mutable_schedule()->mutable_resolve()->set_window_steps(1);
  spec.mutable_model()->set_ffn_hidden(100);
  spec.mutable_dataset()->mutable_synthetic()->set_sequences(1);
  spec.mutable_model()->set_vocab(16);  // Synthetic data is not byte-level.
  zbpp::v1::OptimizerSpec* opt = spec.mutable_optimizer();
  opt->set_beta1(0);
  opt->set_beta2(0.999);
  opt->set_epsilon(1e-12);
  opt->set_weight_decay(0);
  opt->set_max_grad_norm(1);
  opt->set_warmup_steps(0);
  spec.set_validation(zbpp::v1::VALIDATION_MODE_POST);
  spec.mutable_checkpoint()->set_interval_steps(10);
  spec.mutable_checkpoint()->set_directory("/tmp/ckpt/");  // One trailing slash is fine.
  spec.set_seed(0);
  spec.set_precision(zbpp::v1::PRECISION_FP16);
  spec.mutable_loss_scale()->set_initial_scale(1);
  spec.mutable_loss_scale()->set_growth_interval_steps(1);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  spec.mutable_loss_scale()->set_initial_scale(4294967296.0);  // 2^32
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  // Every transport is valid in a spec: whether the workers can run it is
  // decided when they are chosen (transport_choice_test.cc).
  for (zbpp::v1::Transport transport :
       {zbpp::v1::TRANSPORT_AUTO, zbpp::v1::TRANSPORT_GLOO, zbpp::v1::TRANSPORT_NCCL}) {
    spec.set_transport(transport);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << zbpp::v1::Transport_Name(transport);
  }
}

TEST(ValidateJobSpec, TokenFilesOfEitherWidthPass) {
  JobSpec spec = ValidSpec();
  zbpp::v1::TokenFileDataset* tokens = spec.mutable_dataset()->mutable_tokens();
  tokens->set_path("/data/kjv/train.bin");
  spec.mutable_model()->set_vocab(100);  // Token files are not byte-level.
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  tokens->set_eval_fraction(0.05);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  tokens->clear_eval_fraction();
  tokens->set_eval_path("/data/kjv/val.bin");
  spec.mutable_model()->set_vocab(65536);  // the largest uint16 ids reach
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
  tokens->set_dtype(zbpp::v1::TOKEN_DTYPE_UINT32);
  spec.mutable_model()->set_vocab(128256);
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

struct BadCase {
  const char* name;
  std::function<void(JobSpec&)> mutate;
  /// The message must start with this (field path first).
  std::string prefix;
};

std::vector<BadCase> BadCases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      // Inconsistent shapes and values, one field at a time.
      {"zero microbatches",
       [](JobSpec& s) { s.mutable_pipeline()->set_microbatches(0); },
       "pipeline.microbatches: must be >= 1, got 0"},
      {"negative microbatches",
       [](JobSpec& s) { s.mutable_pipeline()->set_microbatches(-3); },
       "pipeline.microbatches: must be >= 1, got -3"},
      {"stages do not divide layers",
       [](JobSpec& s) { s.mutable_pipeline()->set_stages(3); },
       "model.layers: 8 layers do not divide into pipeline.stages*chunks = 3 "
       "virtual stages"},
      {"virtual stages do not divide layers",
       [](JobSpec& s) {
         s.mutable_model()->set_layers(10);
         s.mutable_schedule()->set_name("zb-v");
       },
       "model.layers: 10 layers do not divide into pipeline.stages*chunks = 4 "
       "virtual stages"},
      {"unknown schedule name",
       [](JobSpec& s) { s.mutable_schedule()->set_name("zb-h3"); },
       "schedule.name: unknown schedule \"zb-h3\"; known: auto gpipe 1f1b "},
      {"memory limit below one microbatch (M_B units)",
       [](JobSpec& s) { s.mutable_schedule()->set_memory_limit_m_b(0.5); },
       "schedule.memory_limit_m_b: 0.5 is below one microbatch (1 M_B)"},
      {"memory limit below one microbatch (bytes)",
       [](JobSpec& s) { s.mutable_schedule()->set_memory_limit_bytes(1000); },
       "schedule.memory_limit_bytes: 1000 is below one microbatch (1 M_B = "
       "9699328 bytes on stage 0)"},
      {"missing dataset", [](JobSpec& s) { s.clear_dataset(); },
       "dataset: required"},
      // Model.
      {"missing model", [](JobSpec& s) { s.clear_model(); }, "model: required"},
      {"unknown architecture",
       [](JobSpec& s) { s.mutable_model()->set_architecture("rnn"); },
       "model.architecture: unknown architecture \"rnn\"; known: gpt"},
      {"zero layers", [](JobSpec& s) { s.mutable_model()->set_layers(0); },
       "model.layers: must be >= 1, got 0"},
      {"hidden not divisible by heads",
       [](JobSpec& s) { s.mutable_model()->set_heads(5); },
       "model.hidden: 64 is not divisible by model.heads = 5"},
      {"zero heads", [](JobSpec& s) { s.mutable_model()->set_heads(0); },
       "model.heads: must be >= 1, got 0"},
      {"zero seq_len", [](JobSpec& s) { s.mutable_model()->set_seq_len(0); },
       "model.seq_len: must be >= 1, got 0"},
      {"zero ffn_hidden",
       [](JobSpec& s) { s.mutable_model()->set_ffn_hidden(0); },
       "model.ffn_hidden: must be >= 1, got 0"},
      {"vocab too small for bytes",
       [](JobSpec& s) { s.mutable_model()->set_vocab(100); },
       "model.vocab: a byte-level dataset needs >= 256, got 100"},
      // Dataset.
      {"unknown builtin corpus",
       [](JobSpec& s) { s.mutable_dataset()->set_builtin("wiki"); },
       "dataset.builtin: unknown corpus \"wiki\"; known: bible-kjv"},
      {"empty text file",
       [](JobSpec& s) { s.mutable_dataset()->set_text_file(""); },
       "dataset.text_file: must not be empty"},
      {"zero synthetic sequences",
       [](JobSpec& s) {
         s.mutable_dataset()->mutable_synthetic()->set_sequences(0);
       },
       "dataset.synthetic.sequences: must be >= 1, got 0"},
      {"token file path relative",
       [](JobSpec& s) { s.mutable_dataset()->mutable_tokens()->set_path("train.bin"); },
       "dataset.tokens.path: must be an absolute path, got \"train.bin\""},
      {"token file eval path and fraction",
       [](JobSpec& s) {
         s.mutable_dataset()->mutable_tokens()->set_path("/data/train.bin");
         s.mutable_dataset()->mutable_tokens()->set_eval_path("/data/val.bin");
         s.mutable_dataset()->mutable_tokens()->set_eval_fraction(0.1);
       },
       "dataset.tokens.eval_fraction: must be unset when eval_path is set"},
      {"token file eval fraction of 1",
       [](JobSpec& s) {
         s.mutable_dataset()->mutable_tokens()->set_path("/data/train.bin");
         s.mutable_dataset()->mutable_tokens()->set_eval_fraction(1);
       },
       "dataset.tokens.eval_fraction: must be in (0, 1), got 1"},
      {"uint16 ids below the vocabulary",
       [](JobSpec& s) {
         s.mutable_dataset()->mutable_tokens()->set_path("/data/train.bin");
         s.mutable_model()->set_vocab(65537);
       },
       "dataset.tokens.dtype: uint16 ids cannot reach model.vocab = 65537"},
      // Pipeline.
      {"missing pipeline", [](JobSpec& s) { s.clear_pipeline(); },
       "pipeline: required"},
      {"zero stages", [](JobSpec& s) { s.mutable_pipeline()->set_stages(0); },
       "pipeline.stages: must be >= 1, got 0"},
      {"too many stages",
       [](JobSpec& s) { s.mutable_pipeline()->set_stages(kMaxStages + 1); },
       "pipeline.stages: must be <= 128, got 129"},
      {"too many microbatches",
       [](JobSpec& s) {
         s.mutable_pipeline()->set_microbatches(kMaxMicrobatches + 1);
       },
       "pipeline.microbatches: must be <= 1024, got 1025"},
      {"zero chunks", [](JobSpec& s) { s.mutable_pipeline()->set_chunks(0); },
       "pipeline.chunks: must be >= 1, got 0"},
      {"too many virtual stages",
       [](JobSpec& s) {
         s.mutable_schedule()->set_name("1f1b-interleaved");
         s.mutable_pipeline()->set_stages(128);
         s.mutable_pipeline()->set_chunks(8);
       },
       "pipeline.chunks: pipeline.stages*chunks = 1024 virtual stages; at "
       "most 512"},
      {"zero microbatch size",
       [](JobSpec& s) { s.mutable_pipeline()->set_microbatch_size(0); },
       "pipeline.microbatch_size: must be >= 1, got 0"},
      {"negative data parallelism",
       [](JobSpec& s) { s.mutable_pipeline()->set_data_parallel(-1); },
       "pipeline.data_parallel: must be >= 0, got -1"},
      {"more workers than a job may take",
       [](JobSpec& s) {
         s.mutable_model()->set_layers(128);
         s.mutable_pipeline()->set_stages(128);
         s.mutable_pipeline()->set_data_parallel(33);
       },
       "pipeline.data_parallel: pipeline.stages*data_parallel = 4224 workers; at most 4096"},
      {"data parallelism of 2^31 - 1",
       [](JobSpec& s) { s.mutable_pipeline()->set_data_parallel(2147483647); },
       "pipeline.data_parallel: pipeline.stages*data_parallel = 4294967294 workers; at "
       "most 4096"},
      // Schedule / chunks compatibility (registry traits).
      {"zb-v with 3 chunks",
       [](JobSpec& s) {
         s.mutable_schedule()->set_name("zb-v");
         s.mutable_model()->set_layers(6);
         s.mutable_pipeline()->set_chunks(3);
       },
       "pipeline.chunks: zb-v needs chunks = 2, got 3"},
      {"1f1b with 2 chunks",
       [](JobSpec& s) { s.mutable_pipeline()->set_chunks(2); },
       "pipeline.chunks: 1f1b needs chunks = 1, got 2"},
      // What the scheduler itself refuses (asked through Generate).
      {"zb-h2 with m < 2p",
       [](JobSpec& s) {
         s.mutable_schedule()->set_name("zb-h2");
         s.mutable_pipeline()->set_microbatches(3);
       },
       "pipeline.microbatches: zb-h2 needs microbatches >= 2 * stages (4)"},
      {"interleaved with m % p != 0",
       [](JobSpec& s) {
         s.mutable_schedule()->set_name("1f1b-interleaved");
         s.mutable_pipeline()->set_microbatches(7);
       },
       "pipeline.microbatches: 1f1b-interleaved needs microbatches to be a "
       "multiple of stages (2), got 7"},
      {"interleaved with one chunk",
       [](JobSpec& s) {
         s.mutable_schedule()->set_name("1f1b-interleaved");
         s.mutable_pipeline()->set_chunks(1);
       },
       "pipeline.chunks: 1f1b-interleaved needs chunks >= 2, got 1"},
      {"1f1b above a limit of 1.5 M_B",
       [](JobSpec& s) { s.mutable_schedule()->set_memory_limit_m_b(1.5); },
       "schedule.memory_limit_m_b: 1f1b needs "},
      // Schedule policy fields.
      {"missing schedule", [](JobSpec& s) { s.clear_schedule(); },
       "schedule: required"},
      {"empty schedule name",
       [](JobSpec& s) { s.mutable_schedule()->set_name(""); },
       "schedule.name: required; known: auto gpipe"},
      {"auto without a limit",
       [](JobSpec& s) { s.mutable_schedule()->set_name("auto"); },
       "schedule.memory_limit: required by schedule \"auto\""},
      {"zero bytes limit",
       [](JobSpec& s) { s.mutable_schedule()->set_memory_limit_bytes(0); },
       "schedule.memory_limit_bytes: must be >= 1, got 0"},
      {"NaN M_B limit",
       [nan](JobSpec& s) { s.mutable_schedule()->set_memory_limit_m_b(nan); },
       "schedule.memory_limit_m_b: must be a finite number >= 1, got nan"},
      {"min_improvement of 1",
       [](JobSpec& s) {
         s.mutable_schedule()->mutable_resolve()->set_min_improvement(1);
       },
       "schedule.resolve.min_improvement: must be in [0, 1), got 1"},
      {"zero re-solve window",
       [](JobSpec& s) {
         s.mutable_schedule()->mutable_resolve()->set_window_steps(0);
       },
       "schedule.resolve.window_steps: must be >= 1, got 0"},
      // Optimizer.
      {"missing optimizer", [](JobSpec& s) { s.clear_optimizer(); },
       "optimizer: required"},
      {"zero learning rate",
       [](JobSpec& s) { s.mutable_optimizer()->set_learning_rate(0); },
       "optimizer.learning_rate: must be > 0, got 0"},
      {"NaN learning rate",
       [nan](JobSpec& s) { s.mutable_optimizer()->set_learning_rate(nan); },
       "optimizer.learning_rate: must be > 0, got nan"},
      {"beta1 of 1", [](JobSpec& s) { s.mutable_optimizer()->set_beta1(1); },
       "optimizer.beta1: must be in [0, 1), got 1"},
      {"negative beta2",
       [](JobSpec& s) { s.mutable_optimizer()->set_beta2(-0.1); },
       "optimizer.beta2: must be in [0, 1), got -0.1"},
      {"zero epsilon",
       [](JobSpec& s) { s.mutable_optimizer()->set_epsilon(0); },
       "optimizer.epsilon: must be > 0, got 0"},
      {"negative weight decay",
       [](JobSpec& s) { s.mutable_optimizer()->set_weight_decay(-1); },
       "optimizer.weight_decay: must be >= 0, got -1"},
      {"unknown rollback mode",
       [](JobSpec& s) {
         s.mutable_optimizer()->set_rollback(static_cast<zbpp::v1::RollbackMode>(9));
       },
       "optimizer.rollback: unknown mode 9"},
      {"in-place inverse with beta1 0",
       [](JobSpec& s) {
         s.mutable_optimizer()->set_rollback(zbpp::v1::ROLLBACK_MODE_IN_PLACE_INVERSE);
         s.mutable_optimizer()->set_beta1(0);
       },
       "optimizer.rollback: IN_PLACE_INVERSE divides by beta1 and beta2: both must be > 0"},
      {"in-place inverse with lr * weight_decay >= 1",
       [](JobSpec& s) {
         s.mutable_optimizer()->set_rollback(zbpp::v1::ROLLBACK_MODE_IN_PLACE_INVERSE);
         s.mutable_optimizer()->set_learning_rate(2);
         s.mutable_optimizer()->set_weight_decay(0.5);
       },
       "optimizer.rollback: IN_PLACE_INVERSE divides by 1 - learning_rate * weight_decay, "
       "which is <= 0 here (1)"},
      {"zero clipping norm",
       [](JobSpec& s) { s.mutable_optimizer()->set_max_grad_norm(0); },
       "optimizer.max_grad_norm: must be > 0, got 0"},
      {"negative warm-up",
       [](JobSpec& s) { s.mutable_optimizer()->set_warmup_steps(-1); },
       "optimizer.warmup_steps: must be >= 0, got -1"},
      {"hidden that would overflow 4·hidden on a worker",
       [](JobSpec& s) {
         s.mutable_model()->set_hidden(2147483520);
         s.mutable_model()->set_heads(1);
       },
       "model.hidden: must be <= 65536, got 2147483520"},
      {"vocab of 2^31 - 1",
       [](JobSpec& s) { s.mutable_model()->set_vocab(2147483647); },
       "model.vocab: must be <= 1048576, got 2147483647"},
      {"huge ffn", [](JobSpec& s) { s.mutable_model()->set_ffn_hidden(1 << 30); },
       "model.ffn_hidden: must be <= 262144, got 1073741824"},
      {"huge microbatch size",
       [](JobSpec& s) { s.mutable_pipeline()->set_microbatch_size(1 << 20); },
       "pipeline.microbatch_size: must be <= 65536, got 1048576"},
      {"INT64_MAX steps",
       [](JobSpec& s) { s.set_steps(std::numeric_limits<int64_t>::max()); },
       "steps: must be <= 1000000000, got 9223372036854775807"},
      {"relative corpus path",
       [](JobSpec& s) { s.mutable_dataset()->set_text_file("corpus.txt"); },
       "dataset.text_file: must be an absolute path, got \"corpus.txt\""},
      {"corpus path climbing with ..",
       [](JobSpec& s) { s.mutable_dataset()->set_text_file("/data/../../etc/passwd"); },
       "dataset.text_file: must be a normal path"},
      {"checkpoint directory with an empty component",
       [](JobSpec& s) {
         s.mutable_checkpoint()->set_interval_steps(10);
         s.mutable_checkpoint()->set_directory("/data//ckpt");
       },
       "checkpoint.directory: must be a normal path"},
      {"checkpoint directory of 4 MB",
       [](JobSpec& s) {
         s.mutable_checkpoint()->set_interval_steps(10);
         s.mutable_checkpoint()->set_directory("/" + std::string(4 << 20, 'a'));
       },
       "checkpoint.directory: must be at most 4095 bytes, got 4194305"},
      {"unknown precision",
       [](JobSpec& s) { s.set_precision(static_cast<zbpp::v1::Precision>(8)); },
       "precision: unknown precision 8"},
      {"unknown transport",
       [](JobSpec& s) { s.set_transport(static_cast<zbpp::v1::Transport>(7)); },
       "transport: unknown transport 7; known: auto, gloo, nccl"},
      {"loss scale not a power of two",
       [](JobSpec& s) { s.mutable_loss_scale()->set_initial_scale(1000); },
       "loss_scale.initial_scale: must be a power of two in [1, 2^32], got 1000"},
      {"loss scale below 1",
       [](JobSpec& s) { s.mutable_loss_scale()->set_initial_scale(0.5); },
       "loss_scale.initial_scale: must be a power of two in [1, 2^32], got 0.5"},
      {"loss scale above 2^32",
       [](JobSpec& s) { s.mutable_loss_scale()->set_initial_scale(8589934592.0); },
       "loss_scale.initial_scale: must be a power of two in [1, 2^32], got 8589934592"},
      {"NaN loss scale",
       [nan](JobSpec& s) { s.mutable_loss_scale()->set_initial_scale(nan); },
       "loss_scale.initial_scale: must be a power of two in [1, 2^32], got nan"},
      {"zero growth interval",
       [](JobSpec& s) { s.mutable_loss_scale()->set_growth_interval_steps(0); },
       "loss_scale.growth_interval_steps: must be >= 1, got 0"},
      // The rest.
      {"unknown validation mode",
       [](JobSpec& s) {
         s.set_validation(static_cast<zbpp::v1::ValidationMode>(7));
       },
       "validation: unknown mode 7"},
      {"zero steps", [](JobSpec& s) { s.set_steps(0); },
       "steps: must be >= 1, got 0"},
      {"negative checkpoint interval",
       [](JobSpec& s) { s.mutable_checkpoint()->set_interval_steps(-1); },
       "checkpoint.interval_steps: must be >= 0, got -1"},
      {"negative checkpoint.keep_last",
       [](JobSpec& s) { s.mutable_checkpoint()->set_keep_last(-2); },
       "checkpoint.keep_last: must be >= 0, got -2"},
      {"checkpoints without a directory",
       [](JobSpec& s) { s.mutable_checkpoint()->set_interval_steps(10); },
       "checkpoint.directory: required when checkpoint.interval_steps > 0"},
      {"resume without a directory",
       [](JobSpec& s) { s.mutable_checkpoint()->set_resume_step(3); },
       "checkpoint.directory: required with checkpoint.resume_step"},
      {"resume beyond the last step",
       [](JobSpec& s) {
         s.set_steps(10);
         s.mutable_checkpoint()->set_directory("/tmp/ckpt");
         s.mutable_checkpoint()->set_resume_step(9);
       },
       "checkpoint.resume_step: must be in [0, steps - 1) = [0, 9), got 9"},
      {"long name", [](JobSpec& s) { s.set_name(std::string(129, 'x')); },
       "name: must be at most 128 bytes, got 129"},
  };
}

TEST(ValidateJobSpec, MalformedSpecsNameTheField) {
  for (const BadCase& bad : BadCases()) {
    SCOPED_TRACE(bad.name);
    JobSpec spec = ValidSpec();
    bad.mutate(spec);
    const absl::Status status = ValidateJobSpec(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), StartsWith(bad.prefix));
  }
}

TEST(ValidateJobSpec, AutoReportsWhenNoScheduleFits) {
  // Every schedule needs at least 1 M_B; with chunks = 3 only
  // 1f1b-interleaved may run, and it refuses m % p != 0.
  JobSpec spec = ValidSpec();
  spec.mutable_model()->set_layers(6);
  spec.mutable_pipeline()->set_chunks(3);
  spec.mutable_pipeline()->set_microbatches(7);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(4);
  const absl::Status status = ValidateJobSpec(spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("schedule.memory_limit_m_b: schedule \"auto\" found "
                         "no schedule that runs this job (gpipe: "));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("1f1b-interleaved: 1f1b-interleaved needs "
                        "microbatches to be a multiple of stages"));
}

// The simulated step of the registry schedule `name` for `spec` as auto's
// candidate, computed here without ChooseAutoSchedule; +infinity when the
// schedule cannot run it.
double CandidateStep(const JobSpec& spec, const std::string& name) {
  absl::StatusOr<sched::Problem> problem =
      InitialProblem(AutoCandidateSpec(spec, name));
  if (!problem.ok()) return std::numeric_limits<double>::infinity();
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, *problem);
  if (!schedule.ok()) return std::numeric_limits<double>::infinity();
  absl::StatusOr<sched::SimulationResult> sim =
      sched::Simulate(*problem, *schedule);
  return sim.ok() ? sim->step_seconds : std::numeric_limits<double>::infinity();
}

TEST(ChooseAutoSchedule, PicksAVScheduleWhereItIsShortest) {
  // p = 2, m = 8, 8 layers, T_W = 2/3 T_F, limit 2 M_B (1F1B's). Loop
  // schedules within 2 M_B keep part of 1F1B's bubble (ZB-H1/ZB-1p:
  // (p-1)(T_F+T_B-T_W) with T per stage); ZB-V's V brings its second chunk
  // back to worker 0, so it runs with a smaller bubble at the same memory
  // (Zero Bubble paper §6). V-Half and V-Min get the same 2 M_B here and
  // tie with it; DualPipeV needs p + 1/2 M_B and is refused.
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  absl::StatusOr<ScheduleChoice> choice = ChooseAutoSchedule(spec);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->name, "zb-v");
  EXPECT_EQ(choice->schedule.name, "zb-v");
  EXPECT_EQ(choice->problem.chunks, 2);
  EXPECT_EQ(choice->schedule.stage_of,
            sched::PlaceVirtualStages(sched::Placement::kV, 2, 2));
  EXPECT_DOUBLE_EQ(choice->simulation.step_seconds, CandidateStep(spec, "zb-v"));
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    if (traits.placement == sched::Placement::kLoop) {
      EXPECT_LT(choice->simulation.step_seconds, CandidateStep(spec, traits.name))
          << traits.name;
    } else {
      EXPECT_LE(choice->simulation.step_seconds, CandidateStep(spec, traits.name))
          << traits.name;
    }
  }
  EXPECT_TRUE(std::isinf(CandidateStep(spec, "dualpipe-v")));
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(ChooseAutoSchedule, PicksALoopScheduleWhereNoVScheduleRuns) {
  // 6 layers on p = 2: 3 per stage for a loop schedule, but the V
  // schedules' 2p = 4 virtual stages cannot divide them.
  JobSpec spec = ValidSpec();
  spec.mutable_model()->set_layers(6);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  for (const char* v_schedule : {"zb-v", "v-half", "v-min", "dualpipe-v"}) {
    EXPECT_TRUE(std::isinf(CandidateStep(spec, v_schedule))) << v_schedule;
  }
  absl::StatusOr<ScheduleChoice> choice = ChooseAutoSchedule(spec);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(sched::FindSchedule(choice->name)->placement,
            sched::Placement::kLoop);
  EXPECT_EQ(choice->problem.chunks, 1);
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    EXPECT_LE(choice->simulation.step_seconds, CandidateStep(spec, traits.name))
        << traits.name;
  }
  // The same job with a limit DualPipeV's shape (p + 1/2 M_B) fits and 8
  // layers: every V schedule is a candidate again.
  spec.mutable_model()->set_layers(8);
  spec.mutable_schedule()->set_memory_limit_m_b(2.5);
  EXPECT_TRUE(std::isfinite(CandidateStep(spec, "dualpipe-v")));
}

TEST(ChooseAutoSchedule, PlacesReductionsWithDataParallelism) {
  JobSpec spec = ValidSpec();
  spec.mutable_pipeline()->set_data_parallel(2);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  absl::StatusOr<ScheduleChoice> choice = ChooseAutoSchedule(spec);
  ASSERT_TRUE(choice.ok()) << choice.status();
  int reductions = 0;
  for (const auto& actions : choice->schedule.actions) {
    for (const sched::Action& a : actions) reductions += sched::IsVirtualStageReduction(a);
  }
  EXPECT_EQ(reductions, choice->schedule.num_virtual_stages());
}

TEST(ChooseAutoSchedule, RefusesANamedSchedule) {
  EXPECT_EQ(ChooseAutoSchedule(ValidSpec()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChooseSchedule, ANamedScheduleIsItsGeneratorsWithTheReductionsPlaced) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("zb-h1");
  spec.mutable_pipeline()->set_data_parallel(2);
  absl::StatusOr<ScheduleChoice> choice = ChooseSchedule(spec);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->name, "zb-h1");
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(choice->problem.virtual_stages[0].reduce_seconds,
            problem->virtual_stages[0].reduce_seconds);
  absl::StatusOr<sched::Schedule> expected =
      GenerateSchedule("zb-h1", *problem, 2);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(choice->schedule.actions, expected->actions);
  int reductions = 0;
  for (const auto& row : choice->schedule.actions) {
    for (const sched::Action& a : row) {
      reductions += a.kind == sched::PassKind::kReduce;
    }
  }
  EXPECT_GT(reductions, 0) << "d = 2 places each stage's reduction";
  // The simulation is of that schedule, reductions included.
  absl::StatusOr<sched::SimulationResult> sim =
      sched::Simulate(*problem, *expected);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_DOUBLE_EQ(choice->simulation.step_seconds, sim->step_seconds);
  EXPECT_DOUBLE_EQ(choice->simulation.exposed_reduce_seconds,
                   sim->exposed_reduce_seconds);
}

TEST(ChooseSchedule, ARefusalNamesTheFieldTheUserCanChange) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("zb-h2");
  spec.mutable_pipeline()->set_microbatches(3);  // ZB-H2 needs m >= 2p.
  const absl::Status refused = ChooseSchedule(spec).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), StartsWith("pipeline.microbatches: "));
  EXPECT_EQ(refused, ValidateJobSpec(spec)) << "the check is the choice";
}

TEST(ChooseSchedule, AutoIsChooseAutoSchedulesPick) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  absl::StatusOr<ScheduleChoice> choice = ChooseSchedule(spec);
  absl::StatusOr<ScheduleChoice> pick = ChooseAutoSchedule(spec);
  ASSERT_TRUE(choice.ok() && pick.ok()) << choice.status() << pick.status();
  EXPECT_EQ(choice->name, pick->name);
  EXPECT_EQ(choice->schedule.actions, pick->schedule.actions);
  EXPECT_DOUBLE_EQ(choice->simulation.step_seconds, pick->simulation.step_seconds);
}

TEST(AutoCandidateSpec, GivesEachScheduleItsOwnChunksUnlessTheSpecSetsThem) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("auto");
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-v").pipeline().chunks(), 2);
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-1p").pipeline().chunks(), 1);
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-v").schedule().name(), "zb-v");
  spec.mutable_pipeline()->set_chunks(1);
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-v").pipeline().chunks(), 1);
}

TEST(ValidateJobSpec, LargestAcceptedShapeIsChecked) {
  // The caps' worst case for the solver: ZB-V at p = 128, m = 1024.
  JobSpec spec = ValidSpec();
  spec.mutable_model()->set_layers(2 * kMaxStages);
  spec.mutable_pipeline()->set_stages(kMaxStages);
  spec.mutable_pipeline()->set_microbatches(kMaxMicrobatches);
  spec.mutable_schedule()->set_name("zb-v");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

// ValidSpec: s = 128, b = 4, h = 64, a = 4, f = 4h = 256, 8 layers.
// Per layer: forward FLOPs 2sb(4h^2 + 2hf) + 4s^2bh
//   = 1024 * (16384 + 32768) + 4 * 16384 * 256 = 50331648 + 16777216
//   = 67108864;
// M_B = sb(34h + 5as) = 512 * (2176 + 2560) = 2424832 bytes;
// M_W = 32sbh = 32 * 512 * 64 = 1048576 bytes.
constexpr double kLayerFlops = 67108864;
constexpr double kLayerMb = 2424832;
constexpr double kLayerMw = 1048576;

TEST(ValidateJobSpec, DataParallelismUpToTheWorkerCapPasses) {
  for (int d : {0, 1, 2, kMaxWorkersPerJob / 2}) {
    JobSpec spec = ValidSpec();
    spec.mutable_pipeline()->set_data_parallel(d);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << d << ": " << ValidateJobSpec(spec);
  }
}

// ValidSpec's parameters per stage of 2: 4 blocks of 4h^2 + 2hf + 9h + f =
// 16384 + 32768 + 576 + 256 = 49984; stage 0 adds the embeddings
// (256 + 128) * 64 = 24576, stage 1 the final LayerNorm and head
// 128 + 256 * 64 = 16512.
TEST(InitialProblem, ReplicasCostARingAllReduceOfEachStagesGradients) {
  JobSpec spec = ValidSpec();
  EXPECT_DOUBLE_EQ(StageParameterCount(spec.model(), 0, 2), 4 * 49984 + 24576);
  EXPECT_DOUBLE_EQ(StageParameterCount(spec.model(), 1, 2), 4 * 49984 + 16512);
  for (int d : {0, 1}) {
    spec.mutable_pipeline()->set_data_parallel(d);
    for (const sched::VirtualStageCost& cost : InitialProblem(spec)->virtual_stages) {
      EXPECT_EQ(cost.reduce_seconds, 0) << "d = " << d;
    }
  }
  spec.mutable_pipeline()->set_data_parallel(4);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  for (int s = 0; s < 2; ++s) {
    const double bytes = 4 * StageParameterCount(spec.model(), s, 2);
    // 2(d-1)/d of the bytes at 1 GB/s, and 2(d-1) hops of 50 us.
    EXPECT_DOUBLE_EQ(problem->virtual_stages[s].reduce_seconds, 1.5 * bytes / 1e9 + 6 * 50e-6)
        << "stage " << s;
  }
  EXPECT_GT(problem->virtual_stages[0].reduce_seconds, problem->virtual_stages[1].reduce_seconds)
      << "the embeddings outweigh the head";
  EXPECT_EQ(RingAllReduceSeconds(1e9, 1), 0);
}

TEST(InitialProblem, OneF1BHasFourLayersPerStageAndNoLimit) {
  absl::StatusOr<sched::Problem> problem = InitialProblem(ValidSpec());
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->stages, 2);
  EXPECT_EQ(problem->chunks, 1);
  EXPECT_EQ(problem->microbatches, 8);
  ASSERT_EQ(problem->virtual_stages.size(), 2u);
  for (const sched::VirtualStageCost& cost : problem->virtual_stages) {
    EXPECT_DOUBLE_EQ(cost.f_seconds, 4 * kLayerFlops / 1e12);  // 2.68e-4 s
    EXPECT_DOUBLE_EQ(cost.b_seconds, cost.f_seconds);
    EXPECT_DOUBLE_EQ(cost.w_seconds, cost.f_seconds * 2 / 3);
    EXPECT_DOUBLE_EQ(cost.m_b_bytes, 4 * kLayerMb);  // 9699328
    EXPECT_DOUBLE_EQ(cost.m_w_bytes, 4 * kLayerMw);  // 4194304
  }
  EXPECT_DOUBLE_EQ(problem->comm_seconds, 0);
  EXPECT_TRUE(problem->memory_limit_bytes.empty());  // 1F1B has no own limit.
}

TEST(InitialProblem, Zb2pTakesItsOwnLimitOf2pMb) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("zb-2p");
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  // 2p = 4 M_B of a worker's 4 layers.
  EXPECT_THAT(problem->memory_limit_bytes,
              ::testing::ElementsAre(4 * 4 * kLayerMb, 4 * 4 * kLayerMb));
}

TEST(InitialProblem, ZbVSplitsIntoTwoChunksAndScalesTheMbLimit) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("zb-v");
  spec.mutable_schedule()->set_memory_limit_m_b(3);
  spec.mutable_model()->set_ffn_hidden(128);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chunks, 2);
  ASSERT_EQ(problem->virtual_stages.size(), 4u);
  // 2 layers per virtual stage; f = 128: 1024 * (16384 + 16384) + 16777216
  // = 50331648 FLOPs per layer.
  EXPECT_DOUBLE_EQ(problem->virtual_stages[3].f_seconds, 2 * 50331648 / 1e12);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[3].m_b_bytes, 2 * kLayerMb);
  // One M_B of a worker = its two chunks = 4 layers; 3 of them.
  EXPECT_THAT(problem->memory_limit_bytes,
              ::testing::ElementsAre(3 * 4 * kLayerMb, 3 * 4 * kLayerMb));
}

TEST(InitialProblem, BytesLimitIsTakenAsGiven) {
  JobSpec spec = ValidSpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_bytes(123456789);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chunks, 1);  // "auto" plans one chunk unless told more.
  EXPECT_THAT(problem->memory_limit_bytes,
              ::testing::ElementsAre(123456789, 123456789));
}

TEST(InitialProblem, RefusesWhatValidateRefuses) {
  JobSpec spec = ValidSpec();
  spec.mutable_pipeline()->set_stages(3);
  EXPECT_THAT(std::string(InitialProblem(spec).status().message()),
              StartsWith("model.layers: "));
}

}  // namespace
}  // namespace zbpp::coordinator
