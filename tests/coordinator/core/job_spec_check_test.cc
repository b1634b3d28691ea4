#include "coordinator/core/job_spec_check.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/core/spec_refusal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/spec_testing.h"

namespace zbpp::coordinator {
namespace {

using testing::ExpectRefusal;
using testing::RefusedSpec;
using testing::TinySpec;
using zbpp::v1::JobSpec;

// The field rules alone (no scheduler); how a spec fits its schedule is
// planning's (tests/coordinator/core/planning_test.cc).

TEST(CheckJobSpecFields, TinySpecPasses) {
  EXPECT_TRUE(CheckJobSpecFields(TinySpec()).ok()) << CheckJobSpecFields(TinySpec());
}

TEST(CheckJobSpecFields, OptionalFieldsWithinRangePass) {
  JobSpec spec = TinySpec();
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
  EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << CheckJobSpecFields(spec);
  spec.mutable_loss_scale()->set_initial_scale(4294967296.0);  // 2^32
  EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << CheckJobSpecFields(spec);
  // Every transport is valid in a spec: whether the workers can run it is
  // decided when they are chosen (transport_choice_test.cc).
  for (zbpp::v1::Transport transport :
       {zbpp::v1::TRANSPORT_AUTO, zbpp::v1::TRANSPORT_GLOO, zbpp::v1::TRANSPORT_NCCL}) {
    spec.set_transport(transport);
    EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << zbpp::v1::Transport_Name(transport);
  }
}

TEST(CheckJobSpecFields, TokenFilesOfEitherWidthPass) {
  JobSpec spec = TinySpec();
  zbpp::v1::TokenFileDataset* tokens = spec.mutable_dataset()->mutable_tokens();
  tokens->set_path("/data/kjv/train.bin");
  spec.mutable_model()->set_vocab(100);  // Token files are not byte-level.
  EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << CheckJobSpecFields(spec);
  tokens->set_eval_fraction(0.05);
  EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << CheckJobSpecFields(spec);
  tokens->clear_eval_fraction();
  tokens->set_eval_path("/data/kjv/val.bin");
  spec.mutable_model()->set_vocab(65536);  // the largest uint16 ids reach
  EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << CheckJobSpecFields(spec);
  tokens->set_dtype(zbpp::v1::TOKEN_DTYPE_UINT32);
  spec.mutable_model()->set_vocab(128256);
  EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << CheckJobSpecFields(spec);
}

std::vector<RefusedSpec> BadCases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      // Inconsistent shapes and values, one field at a time.
      {"zero microbatches",
       [](JobSpec& s) { s.mutable_pipeline()->set_microbatches(0); },
       "pipeline.microbatches: must be >= 1, got 0"},
      {"negative microbatches",
       [](JobSpec& s) { s.mutable_pipeline()->set_microbatches(-3); },
       "pipeline.microbatches: must be >= 1, got -3"},
      {"unknown schedule name",
       [](JobSpec& s) { s.mutable_schedule()->set_name("zb-h3"); },
       "schedule.name: unknown schedule \"zb-h3\"; known: auto gpipe 1f1b "},
      {"memory limit below one microbatch (M_B units)",
       [](JobSpec& s) { s.mutable_schedule()->set_memory_limit_m_b(0.5); },
       "schedule.memory_limit_m_b: 0.5 is below one microbatch (1 M_B)"},
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
      {"an even split with a layout",
       [](JobSpec& s) {
         s.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
         for (int blocks : {5, 3}) s.mutable_pipeline()->add_layout(blocks);
       },
       "pipeline.layout_policy: even splits the blocks itself"},
      {"an unknown layout policy",
       [](JobSpec& s) {
         s.mutable_pipeline()->set_layout_policy(static_cast<zbpp::v1::LayoutPolicy>(7));
       },
       "pipeline.layout_policy: unknown value 7"},
      {"vocabulary parallelism over more stages than tokens",
       [](JobSpec& s) {
         s.mutable_dataset()->mutable_tokens()->set_path("/data/kjv/train.bin");
         s.mutable_model()->set_vocab(1);  // Token files are not byte-level.
         s.mutable_pipeline()->set_vocab_parallel(true);
       },
       "pipeline.vocab_parallel: needs model.vocab (1) >= pipeline.stages (2)"},
      {"vocabulary parallelism with data parallelism",
       [](JobSpec& s) {
         s.mutable_pipeline()->set_data_parallel(2);
         s.mutable_pipeline()->set_vocab_parallel(true);
       },
       "pipeline.vocab_parallel: needs pipeline.data_parallel 1, got 2"},
      {"vocabulary parallelism with a schedule file",
       [](JobSpec& s) {
         s.mutable_schedule()->clear_name();
         s.mutable_schedule()->set_file("s.csv");
         s.mutable_schedule()->set_file_text("0F0\n");
         s.mutable_pipeline()->set_vocab_parallel(true);
       },
       "pipeline.vocab_parallel: needs a registry schedule (schedule.name), not schedule.file"},
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
      {"negative snapshot interval",
       [](JobSpec& s) { s.mutable_checkpoint()->set_snapshot_interval_steps(-3); },
       "checkpoint.snapshot_interval_steps: must be >= 0, got -3"},
      {"snapshots without a directory",
       [](JobSpec& s) { s.mutable_checkpoint()->set_snapshot_interval_steps(1); },
       "checkpoint.directory: required when checkpoint.snapshot_interval_steps > 0"},
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

TEST(CheckJobSpecFields, MalformedSpecsNameTheFieldAsData) {
  for (const RefusedSpec& bad : BadCases()) {
    SCOPED_TRACE(bad.name);
    JobSpec spec = TinySpec();
    bad.mutate(spec);
    ExpectRefusal(CheckJobSpecFields(spec), bad.prefix);
  }
}

TEST(SpecRefusal, TravelsAsThePayloadOfItsStatus) {
  const absl::Status status =
      RefuseField("pipeline.chunks", "zb-v needs chunks = 2, got ", 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "pipeline.chunks: zb-v needs chunks = 2, got 3");
  const std::optional<SpecRefusal> refusal = SpecRefusalOf(status);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->field, "pipeline.chunks");
  EXPECT_EQ(refusal->reason, "zb-v needs chunks = 2, got 3");
  // A reason may hold newlines (a scheduler's message); the field may not.
  EXPECT_EQ(SpecRefusalOf(RefusalStatus({"schedule.file_text", "a\nb"}))->reason, "a\nb");
  EXPECT_EQ(SpecRefusalOf(absl::OkStatus()), std::nullopt);
  EXPECT_EQ(SpecRefusalOf(absl::InvalidArgumentError("pipeline.chunks: too many")),
            std::nullopt)
      << "a message that looks like a refusal is not one";
}

TEST(CheckPlanningFields, ChecksWhatPlanningReadsAndNothingElse) {
  JobSpec spec = TinySpec();
  spec.clear_dataset();
  spec.clear_optimizer();
  EXPECT_TRUE(CheckPlanningFields(spec).ok()) << CheckPlanningFields(spec);
  EXPECT_FALSE(CheckJobSpecFields(spec).ok());
  for (const auto& [field, mutate] :
       std::vector<std::pair<std::string, std::function<void(JobSpec&)>>>{
           {"model.heads", [](JobSpec& s) { s.mutable_model()->set_heads(0); }},
           {"pipeline.stages", [](JobSpec& s) { s.mutable_pipeline()->set_stages(0); }},
           {"schedule.name", [](JobSpec& s) { s.mutable_schedule()->set_name("zb-h3"); }}}) {
    JobSpec broken = TinySpec();
    mutate(broken);
    EXPECT_EQ(SpecRefusalOf(CheckPlanningFields(broken))->field, field);
  }
}

TEST(LimitField, IsTheFieldThatHoldsTheLimit) {
  zbpp::v1::SchedulePolicy schedule;
  EXPECT_EQ(LimitField(schedule), "schedule.name");
  schedule.set_memory_limit_m_b(2);
  EXPECT_EQ(LimitField(schedule), "schedule.memory_limit_m_b");
  schedule.set_memory_limit_bytes(1 << 30);
  EXPECT_EQ(LimitField(schedule), "schedule.memory_limit_bytes");
}

}  // namespace
}  // namespace zbpp::coordinator
