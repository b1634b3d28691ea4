#include "coordinator/core/validation_policy.h"

#include <optional>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace zbpp::coordinator
