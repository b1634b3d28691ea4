// coordinator/core/replica_combine.h: a pass's cost over the data-parallel
// replicas (the slowest replica's F, B, W; the reduction as the last
// replica to issue it measures it), and one step's validation outcome from
// every worker's result (replica 0's stand for all; a replica that
// disagrees is refused).

#include "coordinator/core/replica_combine.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zbpp::coordinator {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CombineReplicaTimingTest,
     PassesCostTheSlowestReplicaTheReductionTheLastIssuer) {
  VirtualStageTiming combined{3, 0.010, 0.020, 0.005, 0.004};
  CombineReplicaTiming({3, 0.012, 0.015, 0.009, 0.001}, combined);
  EXPECT_EQ(combined.virtual_stage, 3);
  EXPECT_DOUBLE_EQ(combined.f_seconds, 0.012);
  EXPECT_DOUBLE_EQ(combined.b_seconds, 0.020);
  EXPECT_DOUBLE_EQ(combined.w_seconds, 0.009);
  ASSERT_TRUE(combined.reduce_seconds.has_value());
  EXPECT_DOUBLE_EQ(*combined.reduce_seconds, 0.001);
  // A faster replica changes no pass; a later-issued reduction (longer,
  // it waited for the others) does not replace the shorter one.
  CombineReplicaTiming({3, 0.001, 0.001, 0.001, 0.003}, combined);
  EXPECT_DOUBLE_EQ(combined.f_seconds, 0.012);
  EXPECT_DOUBLE_EQ(combined.b_seconds, 0.020);
  EXPECT_DOUBLE_EQ(combined.w_seconds, 0.009);
  EXPECT_DOUBLE_EQ(*combined.reduce_seconds, 0.001);
}

TEST(CombineReplicaTimingTest, AReductionMeasuredByOneReplicaOnlyIsKept) {
  VirtualStageTiming combined{0, 0.01, 0.01, 0.01, std::nullopt};
  CombineReplicaTiming({0, 0.01, 0.01, 0.01, std::nullopt}, combined);
  EXPECT_FALSE(combined.reduce_seconds.has_value());
  CombineReplicaTiming({0, 0.01, 0.01, 0.01, 0.002}, combined);
  ASSERT_TRUE(combined.reduce_seconds.has_value());
  EXPECT_DOUBLE_EQ(*combined.reduce_seconds, 0.002);
  CombineReplicaTiming({0, 0.01, 0.01, 0.01, std::nullopt}, combined);
  EXPECT_DOUBLE_EQ(*combined.reduce_seconds, 0.002);
}

v1::ValidationResult Result(v1::ValidationDecision decision, double clip,
                            bool rolled_back, double rollback_seconds,
                            double norm_sq = 16) {
  v1::ValidationResult result;
  result.set_step(7);
  result.set_mode(v1::VALIDATION_MODE_POST);
  result.set_decision(decision);
  result.set_clip_coefficient(clip);
  result.set_rolled_back(rolled_back);
  result.set_rollback_seconds(rollback_seconds);
  result.set_global_grad_norm_sq(norm_sq);
  return result;
}

// One replica of three stages: the most severe decision, the smallest clip
// coefficient, the stages that rolled back, their seconds summed, the norm.
TEST(GatherValidationOutcomeTest, OneReplicaCombinesItsStages) {
  const std::map<int, v1::ValidationResult> results = {
      {0, Result(v1::VALIDATION_DECISION_COMMITTED, 1.0, false, 0)},
      {1, Result(v1::VALIDATION_DECISION_CLIPPED, 0.5, true, 0.25)},
      {2, Result(v1::VALIDATION_DECISION_CLIPPED, 0.75, true, 0.5)}};
  absl::StatusOr<v1::ValidationOutcome> outcome =
      GatherValidationOutcome(7, 3, results);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->step(), 7);
  EXPECT_EQ(outcome->mode(), v1::VALIDATION_MODE_POST);
  EXPECT_EQ(outcome->decision(), v1::VALIDATION_DECISION_CLIPPED);
  EXPECT_DOUBLE_EQ(outcome->clip_coefficient(), 0.5);
  EXPECT_THAT(outcome->rolled_back_stages(), ElementsAre(1, 2));
  EXPECT_DOUBLE_EQ(outcome->rollback_seconds(), 0.75);
  EXPECT_DOUBLE_EQ(outcome->global_grad_norm(), 4.0);
  EXPECT_FALSE(outcome->found_inf_nan());
}

TEST(GatherValidationOutcomeTest, AnInfOrNanAnywhereMakesTheNormNotANumber) {
  v1::ValidationResult nan =
      Result(v1::VALIDATION_DECISION_SKIPPED, 1.0, true, 0.1, 9);
  nan.set_found_inf_nan(true);
  absl::StatusOr<v1::ValidationOutcome> outcome = GatherValidationOutcome(
      7, 2,
      {{0, Result(v1::VALIDATION_DECISION_COMMITTED, 1.0, false, 0, 9)},
       {1, nan}});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->found_inf_nan());
  EXPECT_TRUE(std::isnan(outcome->global_grad_norm()));
  EXPECT_EQ(outcome->decision(), v1::VALIDATION_DECISION_SKIPPED);
  EXPECT_THAT(outcome->rolled_back_stages(), ElementsAre(1));
}

TEST(GatherValidationOutcomeTest, NoResultsIsAnOutcomeThatClipsNothing) {
  absl::StatusOr<v1::ValidationOutcome> outcome =
      GatherValidationOutcome(3, 2, {});
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->step(), 3);
  EXPECT_EQ(outcome->decision(), v1::VALIDATION_DECISION_UNSPECIFIED);
  EXPECT_DOUBLE_EQ(outcome->clip_coefficient(), 1.0);
  EXPECT_TRUE(outcome->rolled_back_stages().empty());
}

// Two replicas of two stages (worker index = replica * 2 + stage): replica
// 1's own timings differ and are not counted; replica 0 stands for both.
TEST(GatherValidationOutcomeTest,
     ReplicasThatAgreeAreRepresentedByReplicaZero) {
  std::map<int, v1::ValidationResult> results = {
      {0, Result(v1::VALIDATION_DECISION_CLIPPED, 0.5, true, 0.25)},
      {1, Result(v1::VALIDATION_DECISION_CLIPPED, 0.5, true, 0.5)},
      {2, Result(v1::VALIDATION_DECISION_CLIPPED, 0.5, true, 3.0)},
      {3, Result(v1::VALIDATION_DECISION_CLIPPED, 0.5, true, 4.0)}};
  results[3].set_replayed_forwards(5);
  absl::StatusOr<v1::ValidationOutcome> outcome =
      GatherValidationOutcome(7, 2, results);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_THAT(outcome->rolled_back_stages(), ElementsAre(0, 1));
  EXPECT_DOUBLE_EQ(outcome->rollback_seconds(), 0.75);
  // Not a number on both replicas is agreement, not a difference.
  for (auto& [index, result] : results) {
    result.set_global_grad_norm_sq(std::numeric_limits<double>::quiet_NaN());
    result.set_found_inf_nan(true);
  }
  outcome = GatherValidationOutcome(7, 2, results);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(std::isnan(outcome->global_grad_norm()));
}

// Each field a replica must share with replica 0, changed on replica 1's
// stage 1 (worker index 3): refused, naming the step, stage, replica and
// the field.
TEST(GatherValidationOutcomeTest, AReplicaThatDisagreesIsRefusedNamingWhere) {
  const auto agreeing = [] {
    std::map<int, v1::ValidationResult> results;
    for (int index = 0; index < 4; ++index) {
      results[index] = Result(v1::VALIDATION_DECISION_COMMITTED, 1.0, false, 0);
    }
    return results;
  };
  const std::map<std::string, void (*)(v1::ValidationResult&)> changes = {
      {"mode",
       [](v1::ValidationResult& r) {
         r.set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
       }},
      {"decision",
       [](v1::ValidationResult& r) {
         r.set_decision(v1::VALIDATION_DECISION_CLIPPED);
       }},
      {"found_inf_nan",
       [](v1::ValidationResult& r) { r.set_found_inf_nan(true); }},
      {"global_grad_norm_sq",
       [](v1::ValidationResult& r) { r.set_global_grad_norm_sq(17); }},
      {"clip_coefficient",
       [](v1::ValidationResult& r) { r.set_clip_coefficient(0.9); }},
      {"rolled_back", [](v1::ValidationResult& r) { r.set_rolled_back(true); }},
  };
  for (const auto& [field, change] : changes) {
    std::map<int, v1::ValidationResult> results = agreeing();
    change(results[3]);
    absl::StatusOr<v1::ValidationOutcome> outcome =
        GatherValidationOutcome(7, 2, results);
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kFailedPrecondition)
        << field;
    EXPECT_THAT(std::string(outcome.status().message()),
                AllOf(HasSubstr("validation of step 7: stage 1 replica 1 "
                                "disagrees with replica 0"),
                      HasSubstr("(" + field + " ")))
        << field;
  }
}

}  // namespace
}  // namespace zbpp::coordinator
