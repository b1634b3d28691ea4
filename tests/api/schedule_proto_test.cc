// api/schedule_proto: scheduler types <-> zbpp.v1 messages, both ways, and
// the errors for messages that do not describe a schedule.
#include "api/schedule_proto.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "scheduler/registry.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// ZB-V, p = 4, v = 2, m = 8, unit costs (8 virtual stages).
sched::Problem ZbVProblem() {
  return sched::Problem::Uniform(4, 2, 8, sched::VirtualStageCost{1, 1, 1, 1, 0.5},
                                 0);
}

sched::Schedule ZbV() { return *sched::Generate("zb-v", ZbVProblem()); }

std::string MessageOf(const absl::Status& status) {
  return std::string(status.message());
}

TEST(ScheduleProto, ScheduleRoundTrips) {
  const sched::Schedule schedule = ZbV();
  const v1::Schedule proto = ScheduleToProto(schedule);
  EXPECT_EQ(proto.name(), "zb-v");
  EXPECT_EQ(proto.stage_actions_size(), 4);
  EXPECT_EQ(proto.stage_actions(0).actions(0),
            sched::ActionToString(schedule.actions[0][0]));

  absl::StatusOr<sched::Schedule> back = ScheduleFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, schedule.name);
  EXPECT_EQ(back->stages, 4);
  EXPECT_EQ(back->chunks, 2);
  EXPECT_EQ(back->microbatches, 8);
  EXPECT_EQ(back->stage_of, schedule.stage_of);
  EXPECT_EQ(back->actions, schedule.actions);
}

TEST(ScheduleProto, ConvertsBackAndSimulatesToThePrediction) {
  const sched::Problem problem = ZbVProblem();
  const sched::Schedule schedule = ZbV();
  absl::StatusOr<sched::SimulationResult> predicted =
      sched::Simulate(problem, schedule);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  const v1::SchedulePrediction prediction = PredictionToProto(*predicted);
  const v1::Schedule proto = ScheduleToProto(schedule);

  absl::StatusOr<sched::Schedule> back = ScheduleFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<sched::Problem> costs =
      ProblemFromCostModel(proto, CostModelToProto(problem));
  ASSERT_TRUE(costs.ok()) << costs.status();
  absl::StatusOr<sched::SimulationResult> result =
      sched::Simulate(*costs, *back);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_DOUBLE_EQ(result->makespan_seconds, prediction.makespan_seconds());
  EXPECT_DOUBLE_EQ(result->bubble_rate, prediction.bubble_rate());
}

TEST(ScheduleProto, CostModelRoundTrips) {
  sched::Problem problem = sched::Problem::Uniform(
      2, 1, 4, sched::VirtualStageCost{1, 2, 3, 4, 5}, 0.25, 100);
  problem.virtual_stages[1].f_seconds = 1.5;
  problem.virtual_stages[1].reduce_seconds = 0.75;
  const v1::CostModel proto = CostModelToProto(problem);
  EXPECT_EQ(proto.virtual_stages(1).reduce_seconds(), 0.75);
  EXPECT_EQ(proto.virtual_stages_size(), 2);
  EXPECT_EQ(proto.comm_seconds(), 0.25);
  EXPECT_THAT(proto.memory_limit_bytes(), ElementsAre(100, 100));

  v1::Schedule shape;
  shape.set_stages(2);
  shape.set_chunks(1);
  shape.set_microbatches(4);
  absl::StatusOr<sched::Problem> back = ProblemFromCostModel(shape, proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->stages, 2);
  EXPECT_EQ(back->chunks, 1);
  EXPECT_EQ(back->microbatches, 4);
  EXPECT_EQ(back->comm_seconds, 0.25);
  EXPECT_EQ(back->memory_limit_bytes, problem.memory_limit_bytes);
  ASSERT_EQ(back->virtual_stages.size(), 2u);
  EXPECT_EQ(back->virtual_stages[1].f_seconds, 1.5);
  EXPECT_EQ(back->virtual_stages[0].b_seconds, 2);
  EXPECT_EQ(back->virtual_stages[0].w_seconds, 3);
  EXPECT_EQ(back->virtual_stages[0].m_b_bytes, 4);
  EXPECT_EQ(back->virtual_stages[0].m_w_bytes, 5);
  EXPECT_EQ(back->virtual_stages[0].reduce_seconds, 0);
  EXPECT_EQ(back->virtual_stages[1].reduce_seconds, 0.75);
  EXPECT_TRUE(back->vocabulary.empty());

  // Vocabulary parallelism's per-stage S and T costs.
  problem.vocabulary = {{0.5, 1.0, 64, 32}, {0.25, 0.75, 48, 16}};
  back = ProblemFromCostModel(shape, CostModelToProto(problem));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->vocabulary.size(), 2u);
  EXPECT_EQ(back->vocabulary[1].s_seconds, 0.25);
  EXPECT_EQ(back->vocabulary[1].t_seconds, 0.75);
  EXPECT_EQ(back->vocabulary[0].m_bytes, 64);
  EXPECT_EQ(back->vocabulary[0].transient_bytes, 32);
  v1::CostModel one_stage = CostModelToProto(problem);
  one_stage.mutable_vocabulary()->RemoveLast();
  EXPECT_EQ(ProblemFromCostModel(shape, one_stage).status().message(),
            "cost model has vocabulary costs for 1 stages; the schedule has 2");
}

TEST(ScheduleProto, CostModelWithoutStagesGivesUnitCosts) {
  absl::StatusOr<sched::Problem> problem =
      ProblemFromCostModel(ScheduleToProto(ZbV()), v1::CostModel());
  ASSERT_TRUE(problem.ok()) << problem.status();
  ASSERT_EQ(problem->virtual_stages.size(), 8u);
  EXPECT_EQ(problem->virtual_stages[7].f_seconds, sched::VirtualStageCost{}.f_seconds);
  EXPECT_TRUE(problem->memory_limit_bytes.empty());
  EXPECT_TRUE(sched::Simulate(*problem, ZbV()).ok());
}

TEST(ScheduleProto, BadScheduleIsInvalidArgumentNamingTheField) {
  v1::Schedule proto = ScheduleToProto(ZbV());
  proto.mutable_stage_actions(1)->set_actions(0, "3X1");
  absl::StatusOr<sched::Schedule> schedule = ScheduleFromProto(proto);
  ASSERT_FALSE(schedule.ok());
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(schedule.status()),
              StartsWith("schedule.stage_actions[1]: "));

  proto = ScheduleToProto(ZbV());
  proto.add_stage_of(0);
  EXPECT_THAT(MessageOf(ScheduleFromProto(proto).status()),
              HasSubstr("schedule.stage_of has 9 entries"));

  proto = ScheduleToProto(ZbV());
  proto.set_stage_of(5, 4);
  EXPECT_THAT(MessageOf(ScheduleFromProto(proto).status()),
              HasSubstr("schedule.stage_of[5]: 4 is not a worker in "
                        "[0, 4)"));

  proto = ScheduleToProto(ZbV());
  proto.mutable_stage_actions()->RemoveLast();
  EXPECT_THAT(MessageOf(ScheduleFromProto(proto).status()),
              HasSubstr("schedule.stage_actions has 3 entries, "
                        "schedule.stages is 4"));

  proto = ScheduleToProto(ZbV());
  proto.set_microbatches(0);
  schedule = ScheduleFromProto(proto);
  EXPECT_EQ(schedule.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(schedule.status()), HasSubstr("schedule.microbatches"));

  // A negative count is refused before it sizes anything.
  proto = ScheduleToProto(ZbV());
  proto.set_stages(-1);
  EXPECT_EQ(ScheduleFromProto(proto).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ScheduleProto, CostModelOfAnotherShapeIsInvalidArgument) {
  const v1::Schedule schedule = ScheduleToProto(ZbV());
  v1::CostModel costs = CostModelToProto(ZbVProblem());
  costs.add_virtual_stages();
  absl::StatusOr<sched::Problem> problem =
      ProblemFromCostModel(schedule, costs);
  EXPECT_EQ(problem.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(problem.status()),
              HasSubstr("cost model has 9 stages; the schedule has 8"));

  costs = CostModelToProto(ZbVProblem());
  costs.add_memory_limit_bytes(1);
  EXPECT_THAT(MessageOf(ProblemFromCostModel(schedule, costs).status()),
              HasSubstr("cost model has 1 memory limits; the schedule has 4 "
                        "workers"));
}

TEST(ScheduleProto, PredictionGivesPerWorkerBubbleRates) {
  sched::SimulationResult result;
  result.makespan_seconds = 10;
  result.step_seconds = 12;
  result.bubble_rate = 0.25;
  result.idle_seconds = {2, 3};
  result.peak_memory_bytes = {100, 200};
  // The prediction's peak is the one passes reach while they run.
  result.peak_running_memory_bytes = {130, 200};
  result.max_peak_memory_m_b = 4;
  result.exposed_reduce_seconds = 1.5;
  v1::SchedulePrediction proto = PredictionToProto(result);
  EXPECT_EQ(proto.exposed_reduce_seconds(), 1.5);
  EXPECT_EQ(proto.makespan_seconds(), 10);
  EXPECT_EQ(proto.step_seconds(), 12);
  EXPECT_EQ(proto.bubble_rate(), 0.25);
  EXPECT_THAT(proto.stage_bubble_rate(), ElementsAre(0.2, 0.3));
  EXPECT_THAT(proto.peak_memory_bytes(), ElementsAre(130, 200));
  EXPECT_EQ(proto.max_peak_memory_m_b(), 4);

  // No division by a zero makespan.
  result.makespan_seconds = 0;
  EXPECT_THAT(PredictionToProto(result).stage_bubble_rate(),
              ElementsAre(0, 0));
}

}  // namespace
}  // namespace zbpp
