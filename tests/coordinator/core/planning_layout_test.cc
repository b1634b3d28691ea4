// PlanJob's layout choice (job_spec.proto, LayoutPolicy): what AUTO
// writes into the job's spec, why, and that planning the planned spec again
// gives the same plan (a job re-planned after a recovery, or restored).
#include <numeric>
#include <string>
#include <vector>

#include "coordinator/core/model_costs.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/core/spec_testing.h"

namespace zbpp::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using testing::TinySpec;
using zbpp::v1::JobSpec;

// The demo's Llama (scripts/demo --model llama --bpe 8192): 8 blocks,
// h = 128, a vocabulary of 8192 tokens whose head costs about two blocks.
JobSpec DemoLlama() {
  JobSpec spec = TinySpec();
  zbpp::v1::ModelSpec& model = *spec.mutable_model();
  model.set_architecture("llama");
  model.set_hidden(128);
  model.set_heads(4);
  model.set_kv_heads(2);
  model.set_ffn_hidden(352);
  model.set_vocab(8192);
  model.set_tie_embeddings(true);
  spec.mutable_schedule()->set_name("zb-2p");
  return spec;
}

JobPlan Plan(const JobSpec& spec) {
  absl::StatusOr<JobPlan> plan = PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : JobPlan();
}

TEST(PlanJobLayout, AutoMovesBlocksOffTheHeadsStageAndSaysWhy) {
  const JobSpec spec = DemoLlama();
  const JobPlan plan = Plan(spec);
  const std::vector<int> layout(plan.spec.pipeline().layout().begin(),
                                plan.spec.pipeline().layout().end());
  ASSERT_EQ(layout.size(), 2u);
  EXPECT_GT(layout[0], layout[1]) << "the head's stage keeps fewer blocks";
  EXPECT_EQ(layout[0] + layout[1], 8);
  EXPECT_EQ(plan.layout, layout);
  EXPECT_THAT(plan.layout_reason, StartsWith("auto: [" + std::to_string(layout[0]) + ", "));
  EXPECT_THAT(plan.layout_reason, HasSubstr("shorter than the even split [4, 4]"));

  // The even split, asked for, predicts a longer step.
  JobSpec even = spec;
  even.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
  const JobPlan even_plan = Plan(even);
  EXPECT_THAT(even_plan.spec.pipeline().layout(), IsEmpty());
  EXPECT_THAT(even_plan.layout, ElementsAre(4, 4));
  EXPECT_EQ(even_plan.layout_reason, "even (layout_policy)");
  EXPECT_LT(plan.choice.simulation.step_seconds,
            0.99 * even_plan.choice.simulation.step_seconds);
}

TEST(PlanJobLayout, AGivenLayoutIsKept) {
  JobSpec spec = DemoLlama();
  for (int blocks : {4, 4}) spec.mutable_pipeline()->add_layout(blocks);
  const JobPlan plan = Plan(spec);
  EXPECT_THAT(plan.spec.pipeline().layout(), ElementsAre(4, 4));
  EXPECT_EQ(plan.layout_reason, "given");
}

// A small head (TinySpec's 256 tokens) leaves the even split, and the spec
// as submitted.
TEST(PlanJobLayout, AutoKeepsTheEvenSplitWhenNothingIsFaster) {
  const JobSpec spec = TinySpec();
  const JobPlan plan = Plan(spec);
  EXPECT_THAT(plan.spec.pipeline().layout(), IsEmpty());
  EXPECT_THAT(plan.layout, ElementsAre(4, 4));
  EXPECT_THAT(plan.layout_reason, StartsWith("auto: the even split [4, 4] (no other layout"));
}

// Blocks that do not divide: AUTO splits them (EVEN refuses, planning_test).
TEST(PlanJobLayout, AutoSplitsBlocksThatDoNotDivide) {
  JobSpec spec = TinySpec();
  spec.mutable_model()->set_layers(9);
  const JobPlan plan = Plan(spec);
  const auto& layout = plan.spec.pipeline().layout();
  ASSERT_EQ(layout.size(), 2);
  EXPECT_EQ(std::accumulate(layout.begin(), layout.end(), 0), 9);
  EXPECT_THAT(plan.layout_reason, HasSubstr("9 blocks do not split evenly over 2"));
}

// Planning the planned spec again (JobModel::Prepare re-plans a job that
// never ran; a restored job plans from its stored spec) gives the same
// schedule, layout and predicted step, for a named schedule and for
// "auto", whose chosen schedule's chunks the planned spec carries.
TEST(PlanJobLayout, ThePlannedSpecPlansTheSame) {
  JobSpec automatic = DemoLlama();
  automatic.mutable_schedule()->set_name("auto");
  automatic.mutable_schedule()->set_memory_limit_m_b(4);
  for (const JobSpec& spec : {DemoLlama(), automatic}) {
    SCOPED_TRACE(spec.schedule().name());
    const JobPlan first = Plan(spec);
    ASSERT_GT(first.spec.pipeline().layout_size(), 0);
    const JobPlan again = Plan(first.spec);
    EXPECT_EQ(again.choice.name, first.choice.name);
    EXPECT_EQ(again.layout, first.layout);
    EXPECT_EQ(again.spec.SerializeAsString(), first.spec.SerializeAsString());
    EXPECT_DOUBLE_EQ(again.choice.simulation.step_seconds,
                     first.choice.simulation.step_seconds);
    EXPECT_EQ(first.choice.problem.num_virtual_stages(),
              first.spec.pipeline().layout_size());
  }
}

// With "auto" each candidate schedule gets its own layout: the chosen plan
// is no slower than the best schedule under the even split.
TEST(PlanJobLayout, AutoChoosesLayoutAndScheduleTogether) {
  JobSpec spec = DemoLlama();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(4);
  JobSpec even = spec;
  even.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
  const JobPlan joint = Plan(spec);
  const JobPlan fixed = Plan(even);
  EXPECT_LT(joint.choice.simulation.step_seconds, fixed.choice.simulation.step_seconds);
  EXPECT_THAT(joint.layout_reason, StartsWith("auto: ["));
}

// Parts profiled as (T_F, T_B, T_W) = (1, 1, 1) a block, with the
// embedding and the head `embedding` and `head` blocks dear on each pass.
std::vector<StagePartCosts> Parts(int stages, double embedding, double head) {
  const sched::VirtualStageCost block{1, 1, 1, 1e6, 5e5};
  auto plus = [&block](double blocks) {
    sched::VirtualStageCost part = block;
    part.f_seconds += blocks;
    part.b_seconds += blocks;
    part.w_seconds += blocks;
    part.m_b_bytes += blocks * 1e6;
    return part;
  };
  return std::vector<StagePartCosts>(stages,
                                     PartCostsOf({plus(embedding), block, plus(head)}, 1));
}

// One block per virtual stage leaves no other layout: the reason says so
// rather than counting none simulated.
TEST(PlanJobLayout, ABlockPerVirtualStageLeavesNoOtherLayout) {
  JobSpec spec = DemoLlama();
  spec.mutable_model()->set_layers(2);
  EXPECT_EQ(Plan(spec).layout_reason,
            "auto: the even split [1, 1] (no other layout to simulate)");
}

TEST(PartCostsOf, TheEmbeddingAndTheHeadAreTheirPartsLessABlockNeverBelowZero) {
  sched::VirtualStageCost block{1, 2, 3, 100, 50};
  block.bw_seconds = 4;
  sched::VirtualStageCost first{1.5, 1.9, 3, 120, 50};
  first.bw_seconds = 4.2;
  sched::VirtualStageCost last{4, 5, 6, 300, 150};
  last.bw_seconds = 9;
  const StagePartCosts parts = PartCostsOf({first, block, last}, 1);
  EXPECT_DOUBLE_EQ(parts.block.b_seconds, 2);
  EXPECT_DOUBLE_EQ(parts.embedding.f_seconds, 0.5);
  EXPECT_DOUBLE_EQ(parts.embedding.b_seconds, 0) << "1.9 - 2 is noise, not a negative cost";
  EXPECT_DOUBLE_EQ(parts.embedding.m_b_bytes, 20);
  EXPECT_DOUBLE_EQ(parts.head.w_seconds, 3);
  EXPECT_DOUBLE_EQ(parts.head.bw_seconds, 5);
  EXPECT_DOUBLE_EQ(parts.head.m_w_bytes, 100);
  last.transient_bytes = 64;
  block.transient_bytes = 8;
  EXPECT_DOUBLE_EQ(PartCostsOf({first, block, last}, 1).head.transient_bytes, 64)
      << "a peak, not a difference";
  last.bw_seconds = 0;  // One part without T_BW: none is used.
  EXPECT_DOUBLE_EQ(PartCostsOf({first, block, last}, 1).block.bw_seconds, 0);
}

// Parts of two blocks each: a block is the middle part's times and held
// bytes halved (its working memory, a peak, is the part's); the embedding
// and the head are still their parts less the middle one.
TEST(PartCostsOf, ABlockIsTheMiddlePartOverItsBlocks) {
  sched::VirtualStageCost blocks{2, 4, 6, 200, 100};
  blocks.bw_seconds = 9;
  blocks.transient_bytes = 30;
  sched::VirtualStageCost first{2.5, 4, 6, 220, 100};
  sched::VirtualStageCost last{5, 7, 9, 500, 300};
  first.bw_seconds = 9.5;
  last.bw_seconds = 14;
  const StagePartCosts parts = PartCostsOf({first, blocks, last}, 2);
  EXPECT_DOUBLE_EQ(parts.block.f_seconds, 1);
  EXPECT_DOUBLE_EQ(parts.block.b_seconds, 2);
  EXPECT_DOUBLE_EQ(parts.block.w_seconds, 3);
  EXPECT_DOUBLE_EQ(parts.block.bw_seconds, 4.5);
  EXPECT_DOUBLE_EQ(parts.block.m_b_bytes, 100);
  EXPECT_DOUBLE_EQ(parts.block.m_w_bytes, 50);
  EXPECT_DOUBLE_EQ(parts.block.transient_bytes, 30);
  EXPECT_DOUBLE_EQ(parts.embedding.f_seconds, 0.5);
  EXPECT_DOUBLE_EQ(parts.head.f_seconds, 3);
  EXPECT_DOUBLE_EQ(parts.head.m_b_bytes, 300);
  // A head part built on those blocks costs the head, not the blocks, more.
  EXPECT_DOUBLE_EQ(PartsCost(parts, 2, false, true).f_seconds, last.f_seconds);
}

// The parts hold the blocks of an average virtual stage, 1 to 4.
TEST(LayoutPartBlocks, TheBlocksOfAnAverageVirtualStageFromOneToFour) {
  JobSpec spec = DemoLlama();  // 8 blocks.
  EXPECT_EQ(LayoutPartBlocks(spec, 2), 4);
  EXPECT_EQ(LayoutPartBlocks(spec, 4), 2);
  EXPECT_EQ(LayoutPartBlocks(spec, 3), 2) << "8 / 3, rounded down";
  EXPECT_EQ(LayoutPartBlocks(spec, 8), 1);
  EXPECT_EQ(LayoutPartBlocks(spec, 16), 1) << "at least one";
  spec.mutable_model()->set_layers(32);
  EXPECT_EQ(LayoutPartBlocks(spec, 2), kMaxLayoutPartBlocks);
}

// The demo's Llama planned [7, 1] analytically (its head costs 5.4 blocks
// by FLOPs); profiled at 3.5 blocks, [6, 2] is better, and a head that
// costs nothing brings the even split back.
TEST(ChooseProfiledLayout, PlansTheLayoutFromTheProfiledPartsOfEachStage) {
  const JobPlan plan = Plan(DemoLlama());
  ASSERT_EQ(plan.layout, (std::vector<int>{7, 1})) << plan.layout_reason;
  absl::StatusOr<ProfiledLayout> measured =
      ChooseProfiledLayout(kLayoutGain, plan.spec, "zb-2p", Parts(2, 0, 3.5), 0);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_TRUE(measured->changed);
  EXPECT_EQ(measured->layout, (std::vector<int>{6, 2}));
  EXPECT_THAT(measured->reason, StartsWith("calibration: [6, 2] predicts a step "));
  EXPECT_THAT(measured->reason, HasSubstr("x shorter than [7, 1] under the profiled costs"));
  EXPECT_THAT(measured->reason,
              HasSubstr("; profiled per microbatch: a block 3e+03 ms, the head 1.05e+04 ms "
                        "(3.5 blocks)"))
      << "what the layout was planned from";

  absl::StatusOr<ProfiledLayout> free_head =
      ChooseProfiledLayout(kLayoutGain, plan.spec, "zb-2p", Parts(2, 0, 0), 0);
  ASSERT_TRUE(free_head.ok()) << free_head.status();
  EXPECT_EQ(free_head->layout, (std::vector<int>{4, 4}));

  // The parts agree with the plan: kept, and said so.
  absl::StatusOr<ProfiledLayout> kept =
      ChooseProfiledLayout(kLayoutGain, plan.spec, "zb-2p", Parts(2, 0, 6), 0);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->changed);
  EXPECT_EQ(kept->layout, (std::vector<int>{7, 1}));
  EXPECT_THAT(kept->reason, StartsWith("calibration: [7, 1] kept (no other layout of "));
  EXPECT_THAT(kept->reason, HasSubstr("the best of them, [6, 2], predicts 1."))
      << "the runner-up and how much longer its step is";
}

// Stages profile on their own devices: a slower first stage takes fewer
// blocks than the same parts on equal devices give it.
TEST(ChooseProfiledLayout, ASlowerStageTakesFewerBlocks) {
  JobSpec spec = DemoLlama();
  spec.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_AUTO);
  std::vector<StagePartCosts> equal = Parts(2, 0, 0);
  std::vector<StagePartCosts> slow_first = equal;
  for (sched::VirtualStageCost* c : {&slow_first[0].block}) {
    c->f_seconds *= 2, c->b_seconds *= 2, c->w_seconds *= 2;
  }
  absl::StatusOr<ProfiledLayout> fair = ChooseProfiledLayout(kLayoutGain, spec, "zb-2p", equal, 0);
  absl::StatusOr<ProfiledLayout> slow = ChooseProfiledLayout(kLayoutGain, spec, "zb-2p", slow_first, 0);
  ASSERT_TRUE(fair.ok() && slow.ok()) << fair.status() << slow.status();
  EXPECT_EQ(fair->layout, (std::vector<int>{4, 4}));
  EXPECT_LT(slow->layout[0], 4);
}

// The drift report: the first calibration's parts (equal devices, a head of
// two blocks, [5, 3] under zb-2p) against the measured costs of the running
// layout. Costs as the parts predict: no report. The first stage's device
// twice as slow as profiled: a layout with fewer blocks on it, by more than
// 5 %.
TEST(BetterMeasuredLayout, NamesALayoutOnlyWhenTheMeasuredCostsMoveFarFromTheParts) {
  JobSpec spec = DemoLlama();
  for (int blocks : {5, 3}) spec.mutable_pipeline()->add_layout(blocks);
  const std::vector<StagePartCosts> parts = Parts(2, 0, 2);
  absl::StatusOr<sched::Problem> planned = PlannedProblem(spec, "zb-2p");
  ASSERT_TRUE(planned.ok()) << planned.status();
  const std::vector<int> stage_of = {0, 1};
  sched::Problem measured = *planned;
  // As the parts predict: 5 blocks of 3 s; 3 blocks and a head of 2 blocks.
  measured.virtual_stages[0].f_seconds = measured.virtual_stages[0].b_seconds =
      measured.virtual_stages[0].w_seconds = 5;
  measured.virtual_stages[1].f_seconds = measured.virtual_stages[1].b_seconds =
      measured.virtual_stages[1].w_seconds = 5;
  EXPECT_EQ(BetterMeasuredLayout(spec, "zb-2p", parts, measured, stage_of), std::nullopt);

  sched::Problem slow_first = measured;
  slow_first.virtual_stages[0].f_seconds = slow_first.virtual_stages[0].b_seconds =
      slow_first.virtual_stages[0].w_seconds = 10;
  const auto better = BetterMeasuredLayout(spec, "zb-2p", parts, slow_first, stage_of);
  ASSERT_TRUE(better.has_value());
  EXPECT_LT(better->first[0], 5);
  EXPECT_EQ(better->first[0] + better->first[1], 8);
  EXPECT_THAT(better->second, StartsWith("measured: [" + std::to_string(better->first[0])));
  EXPECT_THAT(better->second, HasSubstr("x shorter than the running [5, 3]"));
  // Parts of another number of stages: no report rather than a guess.
  EXPECT_EQ(BetterMeasuredLayout(spec, "zb-2p", Parts(3, 0, 2), slow_first, stage_of),
            std::nullopt);
}

// Vocabulary parallelism: the head is no virtual stage's, so its profiled
// cost does not push blocks off the last stage; the stages' S and T carry
// it, each its rows' share.
TEST(ChooseProfiledLayout, AHeadSplitByVocabularyLeavesTheEvenSplit) {
  JobSpec spec = DemoLlama();
  spec.mutable_pipeline()->set_vocab_parallel(true);
  absl::StatusOr<ProfiledLayout> layout =
      ChooseProfiledLayout(kLayoutGain, spec, "zb-2p", Parts(2, 0, 3.5), 0);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->layout, (std::vector<int>{4, 4})) << layout->reason;
}

TEST(PlanJobLayout, VocabularyParallelismPlansTheEvenSplitWithTheVocabularyPasses) {
  JobSpec spec = DemoLlama();
  spec.mutable_pipeline()->set_vocab_parallel(true);
  const JobPlan plan = Plan(spec);
  EXPECT_THAT(plan.layout, ElementsAre(4, 4)) << plan.layout_reason;
  const sched::Schedule& schedule = plan.choice.schedule;
  EXPECT_TRUE(sched::HoldsVocabularyPasses(schedule));
  ASSERT_EQ(plan.choice.problem.vocabulary.size(), 2u);
  // 8192 rows over 2 stages: half the head's GEMMs each, S one, T two.
  const std::vector<sched::VocabularyCost> costs = AnalyticVocabularyCosts(spec);
  EXPECT_DOUBLE_EQ(costs[0].t_seconds, 2 * costs[0].s_seconds);
  EXPECT_DOUBLE_EQ(costs[0].s_seconds, costs[1].s_seconds);
  EXPECT_DOUBLE_EQ(costs[0].s_seconds, 0.5 * HeadForwardFlops(spec) / 1e12);
  // The last virtual stage costs its blocks only: the same as the first's.
  EXPECT_DOUBLE_EQ(plan.choice.problem.virtual_stages[1].f_seconds,
                   plan.choice.problem.virtual_stages[0].f_seconds);
}

TEST(ChooseProfiledLayout, RefusesPartsOfAnotherNumberOfStages) {
  const absl::StatusOr<ProfiledLayout> refused =
      ChooseProfiledLayout(kLayoutGain, DemoLlama(), "zb-2p", Parts(3, 0, 1), 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "part costs: 3 stages profiled, the job has 2");
}

}  // namespace
}  // namespace zbpp::coordinator
