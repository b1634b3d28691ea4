#include "client/job_spec_yaml.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/job_limits.h"
#include "common/read_file.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace zbpp::client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using zbpp::v1::JobSpec;

TEST(Examples, EachParsesAndValidates) {
  std::vector<std::filesystem::path> examples;
  for (const auto& entry :
       std::filesystem::directory_iterator(ZBPP_EXAMPLES_DIR)) {
    if (entry.path().extension() == ".yaml") examples.push_back(entry.path());
  }
  EXPECT_GE(examples.size(), 3u);
  for (const std::filesystem::path& path : examples) {
    SCOPED_TRACE(path.string());
    absl::StatusOr<JobSpec> spec = JobSpecFromYaml(ReadFileToString(path).value_or(""));
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->name(), path.stem().string());  // Named after the file.
    EXPECT_TRUE(coordinator::ValidateJobSpec(*spec).ok())
        << coordinator::ValidateJobSpec(*spec);
  }
}

TEST(Examples, MainJobIsTheBibleOnTwoStages) {
  absl::StatusOr<JobSpec> spec = JobSpecFromYaml(
      ReadFileToString(ZBPP_EXAMPLES_DIR "/gpt-bible-cpu.yaml").value_or(""));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->model().architecture(), "gpt");
  EXPECT_EQ(spec->dataset().builtin(), "bible-kjv");
  EXPECT_EQ(spec->model().vocab(), 256);
  EXPECT_EQ(spec->pipeline().stages(), 2);
  EXPECT_EQ(spec->precision(), zbpp::v1::PRECISION_BF16) << "precision: bf16 read as the enum";
}

TEST(JobSpecFromYaml, EveryKindOfFieldIsRead) {
  absl::StatusOr<JobSpec> spec = JobSpecFromYaml(R"(
name: all-fields
model:
  architecture: gpt
  layers: 8
  hidden: 64
  heads: 4
  vocab: 256
  seq_len: 128
  ffn_hidden: 200
dataset: {text_file: /data/corpus.txt}
pipeline: {stages: 2, chunks: 2, microbatches: 8, microbatch_size: 4, data_parallel: 3}
schedule:
  name: auto
  memory_limit_bytes: 18446744073709551615
  resolve: {disabled: yes, min_improvement: 0.05, window_steps: 4}
optimizer:
  learning_rate: 3e-4
  beta1: 0.8
  beta2: .95
  epsilon: 1.0e-8
  weight_decay: 0
  max_grad_norm: .inf
  warmup_steps: 10
validation: SYNCHRONOUS
steps: 100
checkpoint: {interval_steps: 10, directory: "/ckpt dir"}
seed: 0
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  JobSpec want;
  want.set_name("all-fields");
  zbpp::v1::ModelSpec* model = want.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(8);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_vocab(256);
  model->set_seq_len(128);
  model->set_ffn_hidden(200);
  want.mutable_dataset()->set_text_file("/data/corpus.txt");
  zbpp::v1::PipelineSpec* pipeline = want.mutable_pipeline();
  pipeline->set_stages(2);
  pipeline->set_chunks(2);
  pipeline->set_microbatches(8);
  pipeline->set_microbatch_size(4);
  pipeline->set_data_parallel(3);
  zbpp::v1::SchedulePolicy* schedule = want.mutable_schedule();
  schedule->set_name("auto");
  schedule->set_memory_limit_bytes(18446744073709551615u);
  schedule->mutable_resolve()->set_disabled(true);
  schedule->mutable_resolve()->set_min_improvement(0.05);
  schedule->mutable_resolve()->set_window_steps(4);
  zbpp::v1::OptimizerSpec* opt = want.mutable_optimizer();
  opt->set_learning_rate(3e-4);
  opt->set_beta1(0.8);
  opt->set_beta2(0.95);
  opt->set_epsilon(1e-8);
  opt->set_weight_decay(0);
  opt->set_max_grad_norm(INFINITY);
  opt->set_warmup_steps(10);
  want.set_validation(zbpp::v1::VALIDATION_MODE_SYNCHRONOUS);
  want.set_steps(100);
  want.mutable_checkpoint()->set_interval_steps(10);
  want.mutable_checkpoint()->set_directory("/ckpt dir");
  want.set_seed(0);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*spec, want))
      << spec->DebugString() << "\nwant:\n"
      << want.DebugString();
  // Presence survives: explicit zeros are set, not left out.
  EXPECT_TRUE(spec->optimizer().has_weight_decay());
}

TEST(JobSpecFromYaml, EnumSpellings) {
  for (const char* text : {"post", "POST", "Post", "VALIDATION_MODE_POST"}) {
    absl::StatusOr<JobSpec> spec =
        JobSpecFromYaml(std::string("validation: ") + text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->validation(), zbpp::v1::VALIDATION_MODE_POST) << text;
  }
}

// `transport: auto|gloo|nccl`, in YAML and in JSON (which YAML reads),
// each spelling to its enum value; AUTO (the value 0) is a choice of its
// own, offered in the error for an unknown one.
TEST(JobSpecFromYaml, TransportIsReadAndAnUnknownOneNamed) {
  const std::vector<std::pair<std::string, zbpp::v1::Transport>> cases = {
      {"transport: auto", zbpp::v1::TRANSPORT_AUTO},
      {"transport: gloo", zbpp::v1::TRANSPORT_GLOO},
      {"transport: NCCL", zbpp::v1::TRANSPORT_NCCL},
      {"transport: TRANSPORT_NCCL", zbpp::v1::TRANSPORT_NCCL},
      {"{\"transport\": \"gloo\"}", zbpp::v1::TRANSPORT_GLOO},
      {"name: no-transport", zbpp::v1::TRANSPORT_AUTO},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<JobSpec> spec = JobSpecFromYaml(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->transport(), want) << text;
  }
  absl::StatusOr<JobSpec> bad = JobSpecFromYaml("transport: infiniband");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "transport: expected one of auto, gloo, nccl; got \"infiniband\" "
            "(line 1, column 12)");
}

// Protobuf cannot carry a string that is not UTF-8: a Latin-1 name is
// refused here, naming the key, the byte and where it is, instead of
// reaching the coordinator as a request it cannot parse.
TEST(JobSpecFromYaml, StringThatIsNotUtf8IsRefused) {
  absl::StatusOr<JobSpec> spec = JobSpecFromYaml("name: Andr\xE9\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            "name: not valid UTF-8 (byte 0xE9 at offset 4) (line 1, column 7)");

  spec = JobSpecFromYaml("dataset:\n  text_file: /data/caf\xE9.txt\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("dataset.text_file: not valid UTF-8 (byte 0xE9 at "
                        "offset 9) (line 2"));

  spec = JobSpecFromYaml("name: Andr\xC3\xA9\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "Andr\xC3\xA9");
}

TEST(JobSpecFromYaml, EmptyMappingSetsAMessageField) {
  for (const char* text :
       {"dataset: {synthetic: {}}", "dataset:\n  synthetic:\n"}) {
    absl::StatusOr<JobSpec> spec = JobSpecFromYaml(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_TRUE(spec->dataset().has_synthetic()) << text;
    EXPECT_FALSE(spec->dataset().synthetic().has_sequences());
  }
}

struct BadYaml {
  const char* name;
  const char* text;
  /// The message must start with this (key path first, then where).
  std::string prefix;
};

TEST(JobSpecFromYaml, BadInputNamesTheKeyAndLine) {
  const BadYaml cases[] = {
      {"not YAML", "model: {layers: 4\nsteps: [", "yaml: not YAML (line "},
      {"tab-indented garbage", "model:\n\t- ]", "yaml: not YAML (line 2"},
      {"empty", "", "yaml: empty"},
      {"comments only", "# nothing\n", "yaml: empty"},
      {"a scalar document", "hello world",
       "yaml: expected a mapping of job spec fields"},
      {"a list document", "- model\n- dataset",
       "yaml: expected a mapping of job spec fields (model, dataset, "
       "pipeline, ...), got a list (line 1, column 1)"},
      {"two documents", "steps: 1\n---\nsteps: 2",
       "yaml: 2 YAML documents; a job spec is one"},
      {"unknown top-level key", "steps: 1\nepochs: 3",
       "epochs: unknown key (line 2, column 1); known: name, model, dataset, "
       "pipeline, schedule, optimizer, validation, steps, checkpoint, seed"},
      {"unknown nested key", "model:\n  architecture: gpt\n  vocab_size: 256",
       "model.vocab_size: unknown key (line 3, column 3); known in model: "
       "architecture, layers, hidden, heads, vocab, seq_len, ffn_hidden"},
      {"unknown deep key", "schedule:\n  resolve:\n    every: 3",
       "schedule.resolve.every: unknown key (line 3, column 5)"},
      {"word for an integer", "pipeline:\n  microbatches: many",
       "pipeline.microbatches: expected an integer (int32), got \"many\" "
       "(line 2, column 17)"},
      {"fraction for an integer", "steps: 1.5",
       "steps: expected an integer (int64), got \"1.5\""},
      {"int32 overflow", "model: {layers: 3000000000}",
       "model.layers: expected an integer (int32), got \"3000000000\""},
      {"negative seed", "seed: -1",
       "seed: expected a non-negative integer (uint64), got \"-1\""},
      {"word for a number", "optimizer: {learning_rate: fast}",
       "optimizer.learning_rate: expected a number, got \"fast\""},
      {"word for a bool", "schedule: {resolve: {disabled: maybe}}",
       "schedule.resolve.disabled: expected true or false, got \"maybe\""},
      {"unknown enum value", "validation: sometimes",
       "validation: expected one of synchronous, post, auto; got "
       "\"sometimes\" (line 1, column 13)"},
      {"mapping for a number", "steps: {n: 3}",
       "steps: expected a scalar, got a mapping (line 1, column 8)"},
      {"list for a string", "name: [a, b]",
       "name: expected a scalar, got a list"},
      {"scalar for a mapping", "model: gpt",
       "model: expected a mapping, got a scalar (line 1, column 8)"},
      {"missing value", "optimizer:\n  learning_rate:\n",
       "optimizer.learning_rate: needs a value"},
      {"key given twice", "steps: 1\nsteps: 2",
       "steps: given twice (line 2, column 1)"},
      {"two sources of one oneof",
       "dataset:\n  builtin: bible-kjv\n  text_file: /x",
       "dataset.text_file: conflicts with dataset.builtin; set one of "
       "builtin, text_file, synthetic, tokens (line 3, column 3)"},
      {"two memory limits",
       "schedule: {name: auto, memory_limit_m_b: 4, memory_limit_bytes: 9}",
       "schedule.memory_limit_bytes: conflicts with "
       "schedule.memory_limit_m_b"},
      {"a mapping as a key", "{a: 1}: 2",
       "job spec: keys must be plain names, got a mapping"},
  };
  for (const BadYaml& bad : cases) {
    SCOPED_TRACE(bad.name);
    absl::StatusOr<JobSpec> spec = JobSpecFromYaml(bad.text);
    ASSERT_FALSE(spec.ok());
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()), StartsWith(bad.prefix));
  }
}

// Malformed specs end to end from the YAML a user writes: the parser
// accepts each spec, the coordinator's check names the field.
TEST(JobSpecFromYaml, MalformedSpecsAreRefusedByTheCheck) {
  const std::string base =
      "model: {architecture: gpt, layers: 8, hidden: 64, heads: 4, vocab: "
      "256, seq_len: 64}\n"
      "optimizer: {learning_rate: 1.0e-3}\nsteps: 10\n";
  const std::string dataset = "dataset: {builtin: bible-kjv}\n";
  const std::string pipeline =
      "pipeline: {stages: 2, microbatches: 8, microbatch_size: 2}\n";
  const struct {
    std::string text;
    std::string prefix;
  } cases[] = {
      {base + dataset +
           "pipeline: {stages: 2, microbatches: -1, microbatch_size: 2}\n"
           "schedule: {name: 1f1b}",
       "pipeline.microbatches: must be >= 1, got -1"},
      {base + dataset +
           "pipeline: {stages: 2, microbatches: 0, microbatch_size: 2}\n"
           "schedule: {name: 1f1b}",
       "pipeline.microbatches: must be >= 1, got 0"},
      {base + dataset +
           "pipeline: {stages: 3, microbatches: 8, microbatch_size: 2, "
           "layout_policy: even}\n"
           "schedule: {name: 1f1b}",
       "model.layers: 8 layers do not divide into pipeline.stages*chunks = 3 "
       "virtual stages"},
      {base + dataset +
           "pipeline: {stages: 9, microbatches: 18, microbatch_size: 2}\n"
           "schedule: {name: 1f1b}",
       "model.layers: 8 layers cannot give each of the 9 virtual stages"},
      {base + dataset + pipeline + "schedule: {name: zb-h3}",
       "schedule.name: unknown schedule \"zb-h3\"; known: auto "},
      {base + dataset + pipeline +
           "schedule: {name: zb-2p, memory_limit_m_b: 0.5}",
       "schedule.memory_limit_m_b: 0.5 is below one microbatch (1 M_B)"},
      {base + pipeline + "schedule: {name: zb-2p}", "dataset: required"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.text);
    absl::StatusOr<JobSpec> spec = JobSpecFromYaml(bad.text);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const absl::Status status = coordinator::ValidateJobSpec(*spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), StartsWith(bad.prefix));
  }
}

}  // namespace
}  // namespace zbpp::client

namespace zbpp::client {
namespace {

// A directory with a spec and the schedule file it names.
class ScheduleFileLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/zbpp_schedule_fileXXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    std::ofstream(dir_ + "/s.csv") << "0F0,0B0\n";
    spec_.mutable_schedule()->set_file("s.csv");
  }

  std::string dir_;
  zbpp::v1::JobSpec spec_;
};

TEST_F(ScheduleFileLoadTest, ReadsTheFileNextToTheSpec) {
  ASSERT_TRUE(LoadScheduleFile(dir_ + "/job.yaml", spec_).ok());
  EXPECT_EQ(spec_.schedule().file_text(), "0F0,0B0\n");
  EXPECT_EQ(spec_.schedule().file(), "s.csv");
  zbpp::v1::JobSpec absolute;
  absolute.mutable_schedule()->set_file(dir_ + "/s.csv");
  ASSERT_TRUE(LoadScheduleFile("elsewhere/job.yaml", absolute).ok());
  EXPECT_EQ(absolute.schedule().file_text(), "0F0,0B0\n");
}

TEST_F(ScheduleFileLoadTest, MissingFileOrTextAlreadyThereIsRefused) {
  const absl::Status missing = LoadScheduleFile("/nonexistent/job.yaml", spec_);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()),
              StartsWith("schedule.file: cannot read \"/nonexistent/s.csv\": "));
  EXPECT_TRUE(spec_.schedule().file_text().empty());
  spec_.mutable_schedule()->set_file_text("x");
  EXPECT_THAT(std::string(LoadScheduleFile(dir_ + "/job.yaml", spec_).message()),
              StartsWith("schedule.file_text: "));
  EXPECT_EQ(spec_.schedule().file_text(), "x");
}

TEST_F(ScheduleFileLoadTest, OversizedFileOrDirectoryIsRefused) {
  std::ofstream(dir_ + "/s.csv") << std::string(kMaxScheduleFileBytes + 1, ' ');
  const absl::Status big = LoadScheduleFile(dir_ + "/job.yaml", spec_);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.message()), HasSubstr("\" is over "));
  spec_.mutable_schedule()->set_file(dir_);
  const absl::Status directory = LoadScheduleFile(dir_ + "/job.yaml", spec_);
  EXPECT_EQ(directory.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(directory.message()),
              StartsWith("schedule.file: cannot read \"" + dir_ + "\": "));
  EXPECT_TRUE(spec_.schedule().file_text().empty());
}

TEST_F(ScheduleFileLoadTest, NoFileChangesNothing) {
  zbpp::v1::JobSpec spec;
  spec.mutable_schedule()->set_name("zb-v");
  ASSERT_TRUE(LoadScheduleFile(dir_ + "/job.yaml", spec).ok());
  EXPECT_FALSE(spec.schedule().has_resolve());
  EXPECT_TRUE(spec.schedule().file_text().empty());
}

}  // namespace
}  // namespace zbpp::client
