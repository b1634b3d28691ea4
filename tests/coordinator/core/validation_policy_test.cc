#include "coordinator/core/validation_policy.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "scheduler/registry.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::coordinator {
namespace {

v1::ValidationOutcome Outcome(int64_t step, v1::ValidationDecision decision) {
  v1::ValidationOutcome o;
  o.set_step(step);
  o.set_decision(decision);
  return o;
}

constexpr auto kCommitted = v1::VALIDATION_DECISION_COMMITTED;
constexpr auto kClipped = v1::VALIDATION_DECISION_CLIPPED;
constexpr auto kSkipped = v1::VALIDATION_DECISION_SKIPPED;

TEST(ValidationPolicyTest, FixedModesNeverSwitch) {
  for (v1::ValidationMode mode : {v1::VALIDATION_MODE_SYNCHRONOUS, v1::VALIDATION_MODE_POST}) {
    ValidationPolicy policy(mode, v1::VALIDATION_MODE_UNSPECIFIED, {});
    EXPECT_EQ(policy.mode(), mode);
    for (int64_t step = 0; step < 50; ++step) {
      EXPECT_FALSE(policy.Record(Outcome(step, step % 2 ? kClipped : kCommitted)).has_value());
    }
    EXPECT_EQ(policy.mode(), mode);
  }
}

TEST(ValidationPolicyTest, AutoGoesPostAfterACleanStreakAndBackAfterFrequentChanges) {
  ValidationPolicy policy(v1::VALIDATION_MODE_AUTO, v1::VALIDATION_MODE_UNSPECIFIED,
                          {/*post_after_clean_steps=*/3, /*sync_after_changes=*/2,
                           /*window_steps=*/10});
  EXPECT_EQ(policy.mode(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_FALSE(policy.Record(Outcome(0, kCommitted)).has_value());
  EXPECT_FALSE(policy.Record(Outcome(1, kCommitted)).has_value());
  EXPECT_FALSE(policy.Record(Outcome(2, kSkipped)).has_value());  // Streak broken.
  EXPECT_FALSE(policy.Record(Outcome(3, kCommitted)).has_value());
  EXPECT_FALSE(policy.Record(Outcome(4, kCommitted)).has_value());
  EXPECT_EQ(policy.Record(Outcome(5, kCommitted)), v1::VALIDATION_MODE_POST);
  EXPECT_EQ(policy.mode(), v1::VALIDATION_MODE_SYNCHRONOUS) << "until published";
  policy.SwitchedTo(v1::VALIDATION_MODE_POST);
  EXPECT_EQ(policy.mode(), v1::VALIDATION_MODE_POST);
  // One change in the window, then the next one far later: no switch.
  EXPECT_FALSE(policy.Record(Outcome(6, kClipped)).has_value());
  EXPECT_FALSE(policy.Record(Outcome(17, kClipped)).has_value());
  // A second within 10 steps of step 17: back to synchronous.
  EXPECT_EQ(policy.Record(Outcome(20, kSkipped)), v1::VALIDATION_MODE_SYNCHRONOUS);
  policy.SwitchedTo(v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_EQ(policy.mode(), v1::VALIDATION_MODE_SYNCHRONOUS);
}

// Steps between a switch and its effective step still run in the old mode:
// their outcomes say so and do not count for the new one. A switch that
// was not published is proposed again.
TEST(ValidationPolicyTest, OtherModeOutcomesAreIgnoredAndUnpublishedSwitchesRepeat) {
  ValidationPolicy policy(v1::VALIDATION_MODE_AUTO, v1::VALIDATION_MODE_UNSPECIFIED,
                          {/*post_after_clean_steps=*/2, /*sync_after_changes=*/1,
                           /*window_steps=*/10});
  auto in_mode = [](int64_t step, v1::ValidationDecision decision, v1::ValidationMode mode) {
    v1::ValidationOutcome o = Outcome(step, decision);
    o.set_mode(mode);
    return o;
  };
  constexpr auto kSync = v1::VALIDATION_MODE_SYNCHRONOUS;
  constexpr auto kPost = v1::VALIDATION_MODE_POST;
  EXPECT_FALSE(policy.Record(in_mode(0, kCommitted, kSync)).has_value());
  EXPECT_EQ(policy.Record(in_mode(1, kCommitted, kSync)), kPost);
  // Publishing failed: the next outcome proposes it again.
  EXPECT_EQ(policy.Record(in_mode(2, kCommitted, kSync)), kPost);
  policy.SwitchedTo(kPost);
  // Step 3 still ran synchronously and was clipped: not a rollback of POST.
  EXPECT_FALSE(policy.Record(in_mode(3, kClipped, kSync)).has_value());
  EXPECT_EQ(policy.mode(), kPost);
  EXPECT_EQ(policy.Record(in_mode(4, kClipped, kPost)), kSync);
}

TEST(ValidationPolicyTest, UnspecifiedMeansAutoAndARestartKeepsPost) {
  ValidationPolicy restarted(v1::VALIDATION_MODE_UNSPECIFIED, v1::VALIDATION_MODE_POST, {});
  EXPECT_EQ(restarted.mode(), v1::VALIDATION_MODE_POST);
  ValidationPolicy fresh(v1::VALIDATION_MODE_UNSPECIFIED, v1::VALIDATION_MODE_UNSPECIFIED,
                         {1, 1, 10});
  EXPECT_EQ(fresh.Record(Outcome(0, kCommitted)), v1::VALIDATION_MODE_POST);
}

// NCCL vetoes post-update validation for a schedule whose speculative
// prefixes are not closed (scheduler/comm_order.h); Gloo never does.
TEST(PostValidationObstacleTest, OnlyNcclWithPrefixesThatAreNotClosed) {
  const sched::Problem problem = sched::Problem::Uniform(4, 1, 8, sched::VirtualStageCost{}, 0.0);
  absl::StatusOr<sched::Schedule> zb_h1 = sched::Generate("zb-h1", problem);
  ASSERT_TRUE(zb_h1.ok()) << zb_h1.status();
  EXPECT_EQ(PostValidationObstacle(v1::TRANSPORT_NCCL, *zb_h1), "");
  EXPECT_EQ(PostValidationObstacle(v1::TRANSPORT_GLOO, *zb_h1), "");
  // Not closed: worker 1's prefix runs 1F1, fed by worker 0's 0F1, which
  // follows worker 0's first B (tests/scheduler/comm_order_test.cc).
  const sched::Schedule not_closed = sched::testing::ScheduleFromRows(
      "hand", 2, 2, 2, sched::Placement::kV,
      {{"0F0", "3F0", "3B0", "0F1", "3F1", "3B1", "0B0", "0B1"},
       {"1F0", "2F0", "1F1", "2B0", "2F1", "2B1", "1B0", "1B1"}});
  EXPECT_EQ(PostValidationObstacle(v1::TRANSPORT_GLOO, not_closed), "");
  EXPECT_EQ(PostValidationObstacle(v1::TRANSPORT_NCCL, not_closed),
            "NCCL needs closed speculative prefixes: stage 1 runs 1F1 in its speculative "
            "prefix, but its input comes from stage 0's 0F1, which follows that stage's first "
            "B (3B0): prefix not closed");
}

}  // namespace
}  // namespace zbpp::coordinator
