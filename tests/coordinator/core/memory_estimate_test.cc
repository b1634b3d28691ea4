#include "coordinator/core/memory_estimate.h"

#include <string>
#include <vector>

#include "coordinator/core/data_parallel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

v1::JobSpec Spec() {
  v1::JobSpec spec;
  auto* model = spec.mutable_model();
  model->set_architecture("gpt");
  model->set_layers(8);
  model->set_hidden(64);
  model->set_heads(4);
  model->set_vocab(256);
  model->set_seq_len(32);
  return spec;
}

// Two ranks, V placement (rank 0 holds virtual stages 0 and 3), with the
// predicted activation peaks 100 and 200 bytes.
v1::ScheduleVersion VVersion() {
  v1::ScheduleVersion version;
  v1::Schedule* schedule = version.mutable_schedule();
  schedule->set_stages(2);
  schedule->set_chunks(2);
  for (int rank : {0, 1, 1, 0}) schedule->add_stage_of(rank);
  version.mutable_predicted()->add_peak_memory_bytes(100);
  version.mutable_predicted()->add_peak_memory_bytes(200);
  return version;
}

TEST(MemoryEstimateTest, CountsEachRanksStagesStateAndActivations) {
  const v1::JobSpec spec = Spec();
  const std::vector<StageMemoryEstimate> ranks =
      EstimateStageMemory(spec, VVersion());
  ASSERT_EQ(ranks.size(), 2u);
  const double rank0 = StageParameterCount(spec.model(), spec.model().layers() / 4, 0, 4, false) +
                       StageParameterCount(spec.model(), spec.model().layers() / 4, 3, 4, false);
  const double rank1 = StageParameterCount(spec.model(), spec.model().layers() / 4, 1, 4, false) +
                       StageParameterCount(spec.model(), spec.model().layers() / 4, 2, 4, false);
  EXPECT_DOUBLE_EQ(ranks[0].parameters, rank0);
  EXPECT_DOUBLE_EQ(ranks[1].parameters, rank1);
  // Default: AUTO validation with exact rollback keeps its copy: 16 + 12.
  EXPECT_DOUBLE_EQ(ranks[0].state_bytes, 28 * rank0);
  // fp32 passes hold twice the paper's 16-bit activations.
  EXPECT_DOUBLE_EQ(ranks[0].activation_bytes, 200);
  EXPECT_DOUBLE_EQ(ranks[1].activation_bytes, 400);
  EXPECT_DOUBLE_EQ(ranks[1].total_bytes(), 28 * rank1 + 400);
}

// Under vocabulary parallelism every stage holds its rows of the embedding
// and of the head (one matrix when tied), and no stage the whole of either:
// the two stages here hold the same parameters but for GPT's position
// embedding and final norm, and the total is the unsharded model's less
// the tied model's one matrix.
TEST(MemoryEstimateTest, VocabularyParallelismSpreadsTheEmbeddingAndTheHead) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    v1::JobSpec spec = Spec();
    spec.mutable_model()->set_tie_embeddings(tied);
    spec.mutable_pipeline()->set_vocab_parallel(true);
    spec.mutable_pipeline()->set_microbatches(8);
    spec.mutable_pipeline()->set_microbatch_size(2);
    v1::ScheduleVersion version;
    version.mutable_schedule()->set_stages(2);
    version.mutable_schedule()->set_chunks(1);
    for (int rank : {0, 1}) version.mutable_schedule()->add_stage_of(rank);
    const std::vector<StageMemoryEstimate> ranks = EstimateStageMemory(spec, version);
    ASSERT_EQ(ranks.size(), 2u);
    const double h = spec.model().hidden(), rows = spec.model().vocab() / 2;
    const double blocks = StageParameterCount(spec.model(), 4, 1, 3, false);  // A middle stage's.
    const double matrices = tied ? 1 : 2;
    // Stage 0: its blocks, the position embedding, its rows.
    EXPECT_DOUBLE_EQ(ranks[0].parameters, blocks + spec.model().seq_len() * h + matrices * rows * h);
    // Stage 1: its blocks, the final LayerNorm, its rows.
    EXPECT_DOUBLE_EQ(ranks[1].parameters, blocks + 2 * h + matrices * rows * h);
    // Stage 0 holds the step's gathered lookup and its gradient.
    const double lookup = 4.0 * spec.pipeline().microbatches() *
                          spec.pipeline().microbatch_size() * spec.model().seq_len() * h;
    ASSERT_GT(lookup, 0);
    EXPECT_DOUBLE_EQ(ranks[0].embedding_bytes, 2 * lookup);
    EXPECT_DOUBLE_EQ(ranks[1].embedding_bytes, 0);
    EXPECT_THAT(DescribeStageMemory(0, ranks[0]), HasSubstr(" of gathered token embedding)"));
    EXPECT_DOUBLE_EQ(ranks[0].total_bytes(), ranks[0].state_bytes + ranks[0].activation_bytes +
                                                 ranks[0].logits_bytes + 2 * lookup);
  }
  EXPECT_DOUBLE_EQ(EstimateStageMemory(Spec(), VVersion())[0].embedding_bytes, 0)
      << "the first stage's own embedding is a parameter, not a gathered lookup";
}

TEST(MemoryEstimateTest, NoRollbackCopyWhenNothingIsRolledBackOrItIsInverted) {
  v1::JobSpec spec = Spec();
  spec.set_validation(v1::VALIDATION_MODE_SYNCHRONOUS);
  const double params = StageParameterCount(spec.model(), spec.model().layers() / 4, 0, 4, false) +
                        StageParameterCount(spec.model(), spec.model().layers() / 4, 3, 4, false);
  EXPECT_DOUBLE_EQ(EstimateStageMemory(spec, VVersion())[0].state_bytes,
                   16 * params);
  spec.set_validation(v1::VALIDATION_MODE_POST);
  spec.mutable_optimizer()->set_rollback(v1::ROLLBACK_MODE_IN_PLACE_INVERSE);
  EXPECT_DOUBLE_EQ(EstimateStageMemory(spec, VVersion())[0].state_bytes,
                   16 * params);
}

TEST(MemoryEstimateTest, SixteenBitPassesHoldThePapersActivations) {
  v1::JobSpec spec = Spec();
  spec.set_precision(v1::PRECISION_BF16);
  EXPECT_DOUBLE_EQ(EstimateStageMemory(spec, VVersion())[1].activation_bytes,
                   200);
}

TEST(MemoryEstimateTest, DescriptionNamesStageTotalAndParts) {
  StageMemoryEstimate estimate;
  estimate.parameters = 1e6;
  estimate.state_bytes = 3.0 * (1 << 30);
  estimate.activation_bytes = 1024.0 * (1 << 30);
  EXPECT_EQ(DescribeStageMemory(2, estimate),
            "stage 2 needs about 1.00 TiB (3.00 GiB of weights and "
            "optimizer state for 1e+06 parameters, 1.00 TiB of activations)");
}

}  // namespace
}  // namespace zbpp::coordinator
