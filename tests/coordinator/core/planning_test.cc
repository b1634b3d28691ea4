#include "coordinator/core/planning.h"

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "api/schedule_proto.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/job_spec_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/refusal.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/core/spec_testing.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ExpectRefusal;
using testing::RefusedSpec;
using testing::TinySpec;
using zbpp::v1::JobSpec;

TEST(PlanJob, EveryRegistryScheduleAcceptsASuitableSpec) {
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    JobSpec spec = TinySpec();
    spec.mutable_schedule()->set_name(traits.name);
    const absl::StatusOr<JobPlan> plan = PlanJob(spec);
    ASSERT_TRUE(plan.ok()) << traits.name << ": " << plan.status();
    EXPECT_EQ(plan->choice.name, traits.name);
    EXPECT_EQ(ValidateJobSpec(spec), absl::OkStatus()) << traits.name;
  }
}

// What only planning refuses: every field holds a valid value alone.
std::vector<RefusedSpec> PlanningRefusals() {
  return {
      {"stages do not divide layers, split evenly",
       [](JobSpec& s) {
         s.mutable_pipeline()->set_stages(3);
         s.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
       },
       "model.layers: 8 layers do not divide into pipeline.stages*chunks = 3 "
       "virtual stages; layout_policy even needs them to"},
      {"virtual stages do not divide layers, split evenly",
       [](JobSpec& s) {
         s.mutable_model()->set_layers(10);
         s.mutable_schedule()->set_name("zb-v");
         s.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
       },
       "model.layers: 10 layers do not divide into pipeline.stages*chunks = 4 "
       "virtual stages"},
      {"fewer blocks than virtual stages",
       [](JobSpec& s) {
         s.mutable_model()->set_layers(3);
         s.mutable_schedule()->set_name("zb-v");
       },
       "model.layers: 3 layers cannot give each of the 4 virtual stages "
       "(pipeline.stages*chunks) a block"},
      {"a layout of the wrong length",
       [](JobSpec& s) {
         s.mutable_model()->set_layers(10);
         s.mutable_schedule()->set_name("zb-v");
         for (int blocks : {4, 6}) s.mutable_pipeline()->add_layout(blocks);
       },
       "pipeline.layout: has 2 entries; it needs one per virtual stage "
       "(pipeline.stages*chunks = 4)"},
      {"a layout that does not sum to the layers",
       [](JobSpec& s) {
         for (int blocks : {5, 4}) s.mutable_pipeline()->add_layout(blocks);
       },
       "pipeline.layout: sums to 9 blocks; model.layers is 8"},
      {"a layout with an empty virtual stage",
       [](JobSpec& s) {
         for (int blocks : {8, 0}) s.mutable_pipeline()->add_layout(blocks);
       },
       "pipeline.layout: virtual stage 1 has 0 blocks; every virtual stage holds at least 1"},
      {"memory limit below one microbatch (bytes)",
       [](JobSpec& s) { s.mutable_schedule()->set_memory_limit_bytes(1000); },
       "schedule.memory_limit_bytes: 1000 is below one microbatch (1 M_B = "
       "9699328 bytes on stage 0)"},
      {"too many virtual stages",
       [](JobSpec& s) {
         s.mutable_schedule()->set_name("1f1b-interleaved");
         s.mutable_pipeline()->set_stages(128);
         s.mutable_pipeline()->set_chunks(8);
       },
       "pipeline.chunks: pipeline.stages*chunks = 1024 virtual stages; at "
       "most 512"},
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
  };
}

TEST(PlanJob, RefusalsNameTheFieldTheUserCanChangeAsData) {
  for (const RefusedSpec& bad : PlanningRefusals()) {
    SCOPED_TRACE(bad.name);
    JobSpec spec = TinySpec();
    bad.mutate(spec);
    EXPECT_TRUE(CheckJobSpecFields(spec).ok()) << "a field rule: " << CheckJobSpecFields(spec);
    const absl::Status status = PlanJob(spec).status();
    ExpectRefusal(status, bad.prefix);
    EXPECT_EQ(ValidateJobSpec(spec), status);
  }
}

TEST(PlanJob, FieldRulesComeFirst) {
  JobSpec spec = TinySpec();
  spec.mutable_pipeline()->set_stages(3);  // Planning's: 8 layers on 3.
  spec.set_steps(0);                       // A field rule's.
  EXPECT_EQ(SpecRefusalOf(PlanJob(spec).status())->field, "steps");
}

TEST(RefusalOfSchedule, TheFieldComesFromTheSchedulersDataNotItsMessage) {
  JobSpec spec = TinySpec();
  // Refusing microbatches in words that name chunks, and the reverse.
  SpecRefusal refusal = RefusalOfSchedule(
      spec, sched::Refuse(absl::StatusCode::kInvalidArgument, sched::RefusedInput::kMicrobatches,
                          "needs more chunks than 8"));
  EXPECT_EQ(refusal.field, "pipeline.microbatches");
  EXPECT_EQ(refusal.reason, "needs more chunks than 8");
  refusal = RefusalOfSchedule(
      spec, sched::Refuse(absl::StatusCode::kInvalidArgument, sched::RefusedInput::kChunks,
                          "microbatches do not fit 3 chunks"));
  EXPECT_EQ(refusal.field, "pipeline.chunks");
  // A memory refusal goes to the field that holds the limit.
  const absl::Status memory = sched::Refuse(absl::StatusCode::kResourceExhausted,
                                            sched::RefusedInput::kMemoryLimit, "chunks");
  EXPECT_EQ(RefusalOfSchedule(spec, memory).field, "schedule.name");
  spec.mutable_schedule()->set_memory_limit_bytes(1 << 30);
  EXPECT_EQ(RefusalOfSchedule(spec, memory).field, "schedule.memory_limit_bytes");
  // A refusal that names no input is the schedule's, whatever it says.
  EXPECT_EQ(RefusalOfSchedule(spec, absl::InvalidArgumentError("microbatches")).field,
            "schedule.name");
}

TEST(PlanJob, AutoReportsWhenNoScheduleFits) {
  // Every schedule needs at least 1 M_B; with chunks = 3 only
  // 1f1b-interleaved may run, and it refuses m % p != 0.
  JobSpec spec = TinySpec();
  spec.mutable_model()->set_layers(6);
  spec.mutable_pipeline()->set_chunks(3);
  spec.mutable_pipeline()->set_microbatches(7);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(4);
  const absl::Status status = PlanJob(spec).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SpecRefusalOf(status)->field, "schedule.memory_limit_m_b");
  EXPECT_THAT(std::string(status.message()),
              StartsWith("schedule.memory_limit_m_b: schedule \"auto\" found "
                         "no schedule that runs this job (gpipe: "));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("1f1b-interleaved: 1f1b-interleaved needs "
                        "microbatches to be a multiple of stages"));
}

// The simulated step of the registry schedule `name` for `spec` as auto's
// candidate, computed here without PlanJob; +infinity when the
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

TEST(PlanJob, AutoPicksAVScheduleWhereItIsShortest) {
  // p = 2, m = 8, 8 layers, T_W = 2/3 T_F, limit 2 M_B (1F1B's). Loop
  // schedules within 2 M_B keep part of 1F1B's bubble (ZB-H1/ZB-1p:
  // (p-1)(T_F+T_B-T_W) with T per stage); ZB-V's V brings its second chunk
  // back to worker 0, so it runs with a smaller bubble at the same memory
  // (Zero Bubble paper §6). V-Half and V-Min get the same 2 M_B here and
  // tie with it; DualPipeV needs p + 1/2 M_B and is refused.
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  const absl::StatusOr<JobPlan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ScheduleChoice& choice = plan->choice;
  EXPECT_EQ(choice.name, "zb-v");
  EXPECT_EQ(choice.schedule.name, "zb-v");
  EXPECT_EQ(choice.problem.chunks, 2);
  EXPECT_EQ(choice.schedule.stage_of,
            sched::PlaceVirtualStages(sched::Placement::kV, 2, 2));
  EXPECT_DOUBLE_EQ(choice.simulation.step_seconds, CandidateStep(spec, "zb-v"));
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    if (traits.placement == sched::Placement::kLoop) {
      EXPECT_LT(choice.simulation.step_seconds, CandidateStep(spec, traits.name))
          << traits.name;
    } else {
      EXPECT_LE(choice.simulation.step_seconds, CandidateStep(spec, traits.name))
          << traits.name;
    }
  }
  EXPECT_TRUE(std::isinf(CandidateStep(spec, "dualpipe-v")));
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

TEST(PlanJob, AutoPicksALoopScheduleWhereNoVScheduleRuns) {
  // 6 layers on p = 2: 3 per stage for a loop schedule, but the V
  // schedules' 2p = 4 virtual stages cannot divide them evenly (layout_policy
  // auto would split them unevenly: planning_layout_test.cc).
  JobSpec spec = TinySpec();
  spec.mutable_model()->set_layers(6);
  spec.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  for (const char* v_schedule : {"zb-v", "v-half", "v-min", "dualpipe-v"}) {
    EXPECT_TRUE(std::isinf(CandidateStep(spec, v_schedule))) << v_schedule;
  }
  const absl::StatusOr<JobPlan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ScheduleChoice& choice = plan->choice;
  EXPECT_EQ(sched::FindSchedule(choice.name)->placement,
            sched::Placement::kLoop);
  EXPECT_EQ(choice.problem.chunks, 1);
  for (const sched::ScheduleTraits& traits : sched::AllSchedules()) {
    EXPECT_LE(choice.simulation.step_seconds, CandidateStep(spec, traits.name))
        << traits.name;
  }
  // The same job with a limit DualPipeV's shape (p + 1/2 M_B) fits and 8
  // layers: every V schedule is a candidate again.
  spec.mutable_model()->set_layers(8);
  spec.mutable_schedule()->set_memory_limit_m_b(2.5);
  EXPECT_TRUE(std::isfinite(CandidateStep(spec, "dualpipe-v")));
}

TEST(PlanJob, AutoPlacesReductionsWithDataParallelism) {
  JobSpec spec = TinySpec();
  spec.mutable_pipeline()->set_data_parallel(2);
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  const absl::StatusOr<JobPlan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ScheduleChoice& choice = plan->choice;
  int reductions = 0;
  for (const auto& actions : choice.schedule.actions) {
    for (const sched::Action& a : actions) reductions += sched::IsVirtualStageReduction(a);
  }
  EXPECT_EQ(reductions, choice.schedule.num_virtual_stages());
}

// pipeline.microbatches is each replica's m (job_spec.proto): a job of d = 2
// predicts the step of one replica's m microbatches, as d = 1 does, plus
// its reductions, never the 2m microbatches of the global batch. The demo's
// shape (one stage, zb-h1, m = 8) and a pipeline of two.
TEST(PlanJob, DataParallelPredictsOneReplicasMicrobatchesPlusItsReductions) {
  for (int stages : {1, 2}) {
    SCOPED_TRACE(stages);
    JobSpec one = TinySpec();
    one.mutable_pipeline()->set_stages(stages);
    one.mutable_schedule()->set_name("zb-h1");
    JobSpec two = one;
    two.mutable_pipeline()->set_data_parallel(2);
    const absl::StatusOr<JobPlan> plan_one = PlanJob(one);
    const absl::StatusOr<JobPlan> plan_two = PlanJob(two);
    ASSERT_TRUE(plan_one.ok()) << plan_one.status();
    ASSERT_TRUE(plan_two.ok()) << plan_two.status();
    const ScheduleChoice& a = plan_one->choice;
    const ScheduleChoice& b = plan_two->choice;
    EXPECT_EQ(b.problem.microbatches, 8);
    EXPECT_EQ(b.schedule.microbatches, 8);
    double reduce_seconds = 0;
    for (int s = 0; s < b.problem.num_virtual_stages(); ++s) {
      EXPECT_EQ(b.problem.virtual_stages[s].f_seconds, a.problem.virtual_stages[s].f_seconds);
      reduce_seconds += b.problem.virtual_stages[s].reduce_seconds;
    }
    int forwards = 0;
    for (const auto& actions : b.schedule.actions) {
      for (const sched::Action& action : actions) forwards += action.kind == sched::PassKind::kF;
    }
    EXPECT_EQ(forwards, 8 * b.schedule.num_virtual_stages());
    EXPECT_GE(b.simulation.step_seconds, a.simulation.step_seconds);
    EXPECT_LE(b.simulation.step_seconds, a.simulation.step_seconds + reduce_seconds + 1e-12);
  }
}

TEST(PlanJob, ANamedScheduleIsItsGeneratorsWithTheReductionsPlaced) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("zb-h1");
  spec.mutable_pipeline()->set_data_parallel(2);
  const absl::StatusOr<JobPlan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ScheduleChoice& choice = plan->choice;
  EXPECT_EQ(choice.name, "zb-h1");
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(choice.problem.virtual_stages[0].reduce_seconds,
            problem->virtual_stages[0].reduce_seconds);
  absl::StatusOr<sched::Schedule> expected =
      GenerateSchedule("zb-h1", *problem, 2);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(choice.schedule.actions, expected->actions);
  int reductions = 0;
  for (const auto& row : choice.schedule.actions) {
    for (const sched::Action& a : row) {
      reductions += a.kind == sched::PassKind::kReduce;
    }
  }
  EXPECT_GT(reductions, 0) << "d = 2 places each stage's reduction";
  // The simulation is of that schedule, reductions included.
  absl::StatusOr<sched::SimulationResult> sim =
      sched::Simulate(*problem, *expected);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_DOUBLE_EQ(choice.simulation.step_seconds, sim->step_seconds);
  EXPECT_DOUBLE_EQ(choice.simulation.exposed_reduce_seconds,
                   sim->exposed_reduce_seconds);
}

TEST(PlanJob, TheMemoryOfEachStageIsThatOfVersionOne) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("zb-v");
  const absl::StatusOr<JobPlan> plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // What the coordinator estimates from the published version.
  zbpp::v1::ScheduleVersion version;
  *version.mutable_schedule() = ScheduleToProto(plan->choice.schedule);
  *version.mutable_predicted() = PredictionToProto(plan->choice.simulation);
  const std::vector<StageMemoryEstimate> published = EstimateStageMemory(spec, version);
  ASSERT_EQ(plan->memory.size(), 2u);
  ASSERT_EQ(published.size(), 2u);
  for (int stage = 0; stage < 2; ++stage) {
    EXPECT_GT(plan->memory[stage].activation_bytes, 0) << stage;
    EXPECT_DOUBLE_EQ(plan->memory[stage].parameters, published[stage].parameters) << stage;
    EXPECT_DOUBLE_EQ(plan->memory[stage].total_bytes(), published[stage].total_bytes()) << stage;
  }
  // ZB-V's V: stage 0 holds the first and the last virtual stage (logits).
  EXPECT_GT(plan->memory[0].logits_bytes, 0);
  EXPECT_EQ(plan->memory[1].logits_bytes, 0);
}

TEST(AutoCandidateSpec, GivesEachScheduleItsOwnChunksUnlessTheSpecSetsThem) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("auto");
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-v").pipeline().chunks(), 2);
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-1p").pipeline().chunks(), 1);
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-v").schedule().name(), "zb-v");
  spec.mutable_pipeline()->set_chunks(1);
  EXPECT_EQ(AutoCandidateSpec(spec, "zb-v").pipeline().chunks(), 1);
}

TEST(PlannedProblem, IsTheChosenCandidatesForAutoAndTheSpecsOtherwise) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_m_b(2);
  EXPECT_EQ(PlannedProblem(spec, "zb-v")->chunks, 2);
  EXPECT_EQ(PlannedProblem(spec, "zb-1p")->chunks, 1);
  spec = TinySpec();
  EXPECT_EQ(PlannedProblem(spec, "zb-v")->chunks, 1) << "1f1b's own problem";
}

TEST(PlanJob, LargestAcceptedShapeIsPlanned) {
  // The caps' worst case for the solver: ZB-V at p = 128, m = 1024.
  JobSpec spec = TinySpec();
  spec.mutable_model()->set_layers(2 * kMaxStages);
  spec.mutable_pipeline()->set_stages(kMaxStages);
  spec.mutable_pipeline()->set_microbatches(kMaxMicrobatches);
  spec.mutable_schedule()->set_name("zb-v");
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec);
}

// TinySpec: s = 128, b = 4, h = 64, a = 4, f = 4h = 256, 8 layers.
// Per layer: forward FLOPs 2sb(4h^2 + 2hf) + 4s^2bh
//   = 1024 * (16384 + 32768) + 4 * 16384 * 256 = 50331648 + 16777216
//   = 67108864;
// M_B = sb(34h + 5as) = 512 * (2176 + 2560) = 2424832 bytes;
// M_W = 32sbh = 32 * 512 * 64 = 1048576 bytes.
constexpr double kLayerFlops = 67108864;
constexpr double kLayerMb = 2424832;
// The head: 2·b·s·h·vocab = 2·4·128·64·256.
constexpr double kHeadFlops = 16777216;
constexpr double kLayerMw = 1048576;

TEST(PlanJob, DataParallelismUpToTheWorkerCapIsPlanned) {
  for (int d : {0, 1, 2, kMaxWorkersPerJob / 2}) {
    JobSpec spec = TinySpec();
    spec.mutable_pipeline()->set_data_parallel(d);
    EXPECT_TRUE(ValidateJobSpec(spec).ok()) << d << ": " << ValidateJobSpec(spec);
  }
}

// TinySpec's parameters per stage of 2: 4 blocks of 4h^2 + 2hf + 9h + f =
// 16384 + 32768 + 576 + 256 = 49984; stage 0 adds the embeddings
// (256 + 128) * 64 = 24576, stage 1 the final LayerNorm and head
// 128 + 256 * 64 = 16512.
TEST(InitialProblem, ReplicasCostARingAllReduceOfEachStagesGradients) {
  JobSpec spec = TinySpec();
  EXPECT_DOUBLE_EQ(StageParameterCount(spec.model(), spec.model().layers() / 2, 0, 2, false), 4 * 49984 + 24576);
  EXPECT_DOUBLE_EQ(StageParameterCount(spec.model(), spec.model().layers() / 2, 1, 2, false), 4 * 49984 + 16512);
  for (int d : {0, 1}) {
    spec.mutable_pipeline()->set_data_parallel(d);
    const absl::StatusOr<sched::Problem> one_replica = InitialProblem(spec);
    ASSERT_TRUE(one_replica.ok()) << one_replica.status();
    for (const sched::VirtualStageCost& cost : one_replica->virtual_stages) {
      EXPECT_EQ(cost.reduce_seconds, 0) << "d = " << d;
    }
  }
  spec.mutable_pipeline()->set_data_parallel(4);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  for (int s = 0; s < 2; ++s) {
    const double bytes = 4 * StageParameterCount(spec.model(), spec.model().layers() / 2, s, 2, false);
    // 2(d-1)/d of the bytes at 1 GB/s, and 2(d-1) hops of 50 us.
    EXPECT_DOUBLE_EQ(problem->virtual_stages[s].reduce_seconds, 1.5 * bytes / 1e9 + 6 * 50e-6)
        << "stage " << s;
  }
  EXPECT_GT(problem->virtual_stages[0].reduce_seconds, problem->virtual_stages[1].reduce_seconds)
      << "the embeddings outweigh the head";
  EXPECT_EQ(RingAllReduceSeconds(1e9, 1), 0);
}

TEST(InitialProblem, OneF1BHasFourLayersPerStageTheHeadOnTheLastAndNoLimit) {
  absl::StatusOr<sched::Problem> problem = InitialProblem(TinySpec());
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->stages, 2);
  EXPECT_EQ(problem->chunks, 1);
  EXPECT_EQ(problem->microbatches, 8);
  ASSERT_EQ(problem->virtual_stages.size(), 2u);
  for (int v = 0; v < 2; ++v) {
    const sched::VirtualStageCost& cost = problem->virtual_stages[v];
    // The last adds the head's GEMM to each pass.
    const double head = v == 1 ? kHeadFlops / 1e12 : 0;
    EXPECT_DOUBLE_EQ(cost.f_seconds, 4 * kLayerFlops / 1e12 + head);  // 2.68e-4 s + head
    EXPECT_DOUBLE_EQ(cost.b_seconds, cost.f_seconds);
    EXPECT_DOUBLE_EQ(cost.w_seconds, 4 * kLayerFlops / 1e12 * 2 / 3 + head);
    EXPECT_DOUBLE_EQ(cost.m_b_bytes, 4 * kLayerMb);  // 9699328
    EXPECT_DOUBLE_EQ(cost.m_w_bytes, 4 * kLayerMw);  // 4194304
  }
  EXPECT_DOUBLE_EQ(problem->comm_seconds, 0);
  EXPECT_TRUE(problem->memory_limit_bytes.empty());  // 1F1B has no own limit.
}

TEST(InitialProblem, Zb2pTakesItsOwnLimitOf2pMb) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("zb-2p");
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  // 2p = 4 M_B of a worker's 4 layers.
  EXPECT_THAT(problem->memory_limit_bytes,
              ::testing::ElementsAre(4 * 4 * kLayerMb, 4 * 4 * kLayerMb));
}

TEST(InitialProblem, ZbVSplitsIntoTwoChunksAndScalesTheMbLimit) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("zb-v");
  spec.mutable_schedule()->set_memory_limit_m_b(3);
  spec.mutable_model()->set_ffn_hidden(128);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chunks, 2);
  ASSERT_EQ(problem->virtual_stages.size(), 4u);
  // 2 layers per virtual stage; f = 128: 1024 * (16384 + 16384) + 16777216
  // = 50331648 FLOPs per layer.
  EXPECT_DOUBLE_EQ(problem->virtual_stages[2].f_seconds, 2 * 50331648 / 1e12);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[3].f_seconds, (2 * 50331648 + kHeadFlops) / 1e12);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[3].m_b_bytes, 2 * kLayerMb);
  // One M_B of a worker = its two chunks = 4 layers; 3 of them.
  EXPECT_THAT(problem->memory_limit_bytes,
              ::testing::ElementsAre(3 * 4 * kLayerMb, 3 * 4 * kLayerMb));
}

TEST(InitialProblem, BytesLimitIsTakenAsGiven) {
  JobSpec spec = TinySpec();
  spec.mutable_schedule()->set_name("auto");
  spec.mutable_schedule()->set_memory_limit_bytes(123456789);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_EQ(problem->chunks, 1);  // "auto" plans one chunk unless told more.
  EXPECT_THAT(problem->memory_limit_bytes,
              ::testing::ElementsAre(123456789, 123456789));
}

// PipelineSpec.layout: each virtual stage costs its own blocks (the last
// its head too), its parameters and memory follow, and a layout that moves
// blocks off the head's stage shortens the predicted step.
TEST(InitialProblem, ALayoutGivesEachVirtualStageItsOwnBlocks) {
  JobSpec spec = TinySpec();
  for (int blocks : {5, 3}) spec.mutable_pipeline()->add_layout(blocks);
  absl::StatusOr<sched::Problem> problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  EXPECT_DOUBLE_EQ(problem->virtual_stages[0].f_seconds, 5 * kLayerFlops / 1e12);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[1].f_seconds, (3 * kLayerFlops + kHeadFlops) / 1e12);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[0].m_b_bytes, 5 * kLayerMb);
  EXPECT_DOUBLE_EQ(problem->virtual_stages[1].m_w_bytes, 3 * kLayerMw);

  // With data parallelism each reduction carries its own stage's gradients.
  spec.mutable_pipeline()->set_data_parallel(2);
  problem = InitialProblem(spec);
  ASSERT_TRUE(problem.ok()) << problem.status();
  for (int v = 0; v < 2; ++v) {
    EXPECT_DOUBLE_EQ(problem->virtual_stages[v].reduce_seconds,
                     RingAllReduceSeconds(
                         4 * StageParameterCount(spec.model(), v == 0 ? 5 : 3, v, 2, false), 2));
  }
  spec.mutable_pipeline()->set_data_parallel(1);

  // A vocabulary whose head costs 2 blocks: [5, 3] balances what [4, 4]
  // does not, and the plan predicts the shorter step.
  spec.mutable_model()->set_vocab(2048);
  JobSpec even = spec;
  even.mutable_pipeline()->clear_layout();
  even.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
  absl::StatusOr<JobPlan> balanced = PlanJob(spec), uneven = PlanJob(even);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  ASSERT_TRUE(uneven.ok()) << uneven.status();
  EXPECT_LT(balanced->choice.simulation.step_seconds, uneven->choice.simulation.step_seconds);
}

TEST(InitialProblem, RefusesWhatPlanJobRefuses) {
  JobSpec spec = TinySpec();
  spec.mutable_pipeline()->set_stages(3);
  spec.mutable_pipeline()->set_layout_policy(zbpp::v1::LAYOUT_POLICY_EVEN);
  EXPECT_THAT(std::string(InitialProblem(spec).status().message()),
              StartsWith("model.layers: "));
}

}  // namespace
}  // namespace zbpp::coordinator
