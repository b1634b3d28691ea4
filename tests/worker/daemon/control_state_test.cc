// The worker's view of the Session protocol (worker.proto): assignments,
// versions, grants and commands, and what the training thread waits on.

#include "worker/daemon/control_state.h"

#include <gtest/gtest.h>

namespace zbpp::worker {
namespace {

v1::SessionResponse AssignmentOf(const std::string& job, int64_t attempt) {
  v1::SessionResponse m;
  v1::Assignment* a = m.mutable_assignment();
  a->set_job_id(job);
  a->set_attempt(attempt);
  a->mutable_schedule()->set_job_id(job);
  a->mutable_schedule()->set_version(1);
  return m;
}

v1::SessionResponse GrantOf(const std::string& job, int64_t attempt, int64_t through) {
  v1::SessionResponse m;
  m.mutable_grant()->set_job_id(job);
  m.mutable_grant()->set_attempt(attempt);
  m.mutable_grant()->set_through_step(through);
  return m;
}

v1::SessionResponse AbortOf(const std::string& job, int64_t attempt) {
  v1::SessionResponse m;
  m.mutable_command()->set_job_id(job);
  m.mutable_command()->set_attempt(attempt);
  m.mutable_command()->mutable_abort()->set_reason("job cancelled by user");
  return m;
}

TEST(ControlState, GrantsAreMonotoneAndRepeatsAreNoOps) {
  ControlState state;
  state.Apply(AssignmentOf("job-1", 1));
  ASSERT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  state.Apply(AssignmentOf("job-1", 1));  // Repeat on a reopened stream.
  EXPECT_FALSE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  state.Apply(GrantOf("job-1", 1, 3));
  state.Apply(GrantOf("job-1", 1, 1));  // Smaller: ignored.
  EXPECT_EQ(state.WaitForGrant("job-1", 1, 3, absl::ZeroDuration()),
            ControlState::GrantWait::kGranted);
  EXPECT_EQ(state.WaitForGrant("job-1", 1, 4, absl::Milliseconds(10)),
            ControlState::GrantWait::kTimedOut);
  state.Apply(GrantOf("job-2", 1, 9));  // Another job: ignored.
  EXPECT_EQ(state.WaitForGrant("job-1", 1, 4, absl::ZeroDuration()),
            ControlState::GrantWait::kTimedOut);
}

// What the fakes of tests/coordinator read: the highest grant and the
// versions by number, repeats once, another job's not at all.
TEST(ControlState, HeldForShowsTheGrantsAndVersionsOfTheAttempt) {
  ControlState state;
  EXPECT_FALSE(state.HeldFor("job-1", 1).has_value());
  state.Apply(AssignmentOf("job-1", 1));
  ASSERT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  v1::SessionResponse v3;
  v3.mutable_schedule()->set_job_id("job-1");
  v3.mutable_schedule()->set_version(3);
  v1::SessionResponse v2 = v3;
  v2.mutable_schedule()->set_version(2);
  v1::SessionResponse other = v3;
  other.mutable_schedule()->set_job_id("job-2");
  for (const v1::SessionResponse& m : {v3, v2, v3, other, GrantOf("job-1", 1, 4)}) state.Apply(m);
  std::optional<ControlState::Held> held = state.HeldFor("job-1", 1);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->granted, 4);
  ASSERT_EQ(held->versions.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(held->versions[i]->version(), i + 1);
  EXPECT_FALSE(state.HeldFor("job-1", 2).has_value());
}

TEST(ControlState, AbortRunsTheHookAndEndsTheGrantWait) {
  ControlState state;
  state.Apply(AssignmentOf("job-1", 1));
  ASSERT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  int hooked = 0;
  state.SetAbortHook("job-1", 1, [&] { ++hooked; });
  state.Apply(AbortOf("job-1", 2));  // Another attempt: ignored.
  EXPECT_EQ(hooked, 0);
  state.Apply(AbortOf("job-1", 1));
  EXPECT_EQ(hooked, 1);
  std::string reason;
  EXPECT_TRUE(state.Aborted("job-1", 1, &reason));
  EXPECT_EQ(reason, "job cancelled by user");
  EXPECT_EQ(state.WaitForGrant("job-1", 1, 0, absl::Seconds(5)),
            ControlState::GrantWait::kAborted);
  // A hook set after the abort runs at once.
  state.SetAbortHook("job-1", 1, [&] { ++hooked; });
  EXPECT_EQ(hooked, 2);
  state.ClearAbortHook();
}

// The next job's assignment and grant can arrive while the aborted attempt
// still winds down: both must survive until it is finished.
TEST(ControlState, NextAssignmentKeepsItsGrantWhileTheOldAttemptWindsDown) {
  ControlState state;
  state.Apply(AssignmentOf("job-1", 1));
  ASSERT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  state.Apply(AbortOf("job-1", 1));
  state.Apply(AssignmentOf("job-2", 1));
  state.Apply(GrantOf("job-2", 1, 5));
  EXPECT_FALSE(state.WaitForAssignment(absl::ZeroDuration()).has_value())
      << "job-2 must wait until job-1 is finished";
  state.Finish("job-1", 1);
  std::optional<v1::Assignment> next = state.WaitForAssignment(absl::ZeroDuration());
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->job_id(), "job-2");
  EXPECT_EQ(state.WaitForGrant("job-2", 1, 5, absl::ZeroDuration()),
            ControlState::GrantWait::kGranted);
  EXPECT_EQ(state.VersionFor("job-2", 1, 0)->version(), 1);
}

// A restarted coordinator forgot the worker, which registers again while its
// training thread still winds down the old attempt; the new process numbers
// attempts afresh, so its first assignment may repeat the old (job,
// attempt). It must start, not be dropped as a repeat, and the old attempt's
// failure must not be reported as the new one's.
TEST(ControlState, AfterResetTheSameJobAndAttemptNumberIsANewAttempt) {
  ControlState state;
  state.Apply(AssignmentOf("job-2", 1));
  ASSERT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  int hooked = 0;
  state.SetAbortHook("job-2", 1, [&] { ++hooked; });
  state.Reset();
  EXPECT_EQ(hooked, 1);
  EXPECT_TRUE(state.Aborted("job-2", 1));
  // The old attempt failed (its coordinator vanished mid-report).
  state.SetPhase(v1::WORKER_PHASE_FAILED, "reporting step 5: UNAVAILABLE");
  v1::Heartbeat hb = state.Heartbeat();
  EXPECT_EQ(hb.phase(), v1::WORKER_PHASE_IDLE);
  EXPECT_EQ(hb.job_id(), "");

  state.Apply(AssignmentOf("job-2", 1));  // From the new coordinator.
  state.Apply(GrantOf("job-2", 1, 4));
  EXPECT_FALSE(state.WaitForAssignment(absl::ZeroDuration()).has_value())
      << "the old attempt still winds down";
  state.Finish("job-2", 1);  // The training thread is done with the old one.
  hb = state.Heartbeat();
  EXPECT_EQ(hb.job_id(), "job-2");
  EXPECT_EQ(hb.phase(), v1::WORKER_PHASE_IDLE) << "not the old attempt's FAILED";
  EXPECT_EQ(hb.error(), "");
  EXPECT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  EXPECT_EQ(state.WaitForGrant("job-2", 1, 4, absl::ZeroDuration()),
            ControlState::GrantWait::kGranted);
}

// The coordinator restarted (docs/elastic.md, "Coordinator restart"): the
// attempt orphaned by the new registration keeps its state, and while it
// winds down (IDLE to the new coordinator) the heartbeat reports the stage
// it then holds; the new coordinator's Abort without keep_state drops it.
TEST(ControlState, AnAttemptOrphanedByANewRegistrationKeepsItsStateAndReportsIt) {
  ControlState state;
  state.Apply(AssignmentOf("job-2", 3));
  ASSERT_TRUE(state.WaitForAssignment(absl::ZeroDuration()).has_value());
  EXPECT_FALSE(state.KeepsState("job-2", 3));
  state.Reset();
  EXPECT_TRUE(state.Aborted("job-2", 3));
  EXPECT_TRUE(state.KeepsState("job-2", 3));
  v1::HeldState held;
  held.set_job_id("job-2");
  held.set_attempt(3);
  held.set_stage(1);
  held.set_step(7);
  state.SetHeld(held);
  v1::Heartbeat hb = state.Heartbeat();
  EXPECT_EQ(hb.phase(), v1::WORKER_PHASE_IDLE);
  EXPECT_EQ(hb.job_id(), "");
  EXPECT_EQ(hb.held().job_id(), "job-2");
  EXPECT_EQ(hb.held().attempt(), 3);
  EXPECT_EQ(hb.held().step(), 7);
  state.Finish("job-2", 3);
  EXPECT_EQ(state.Heartbeat().held().stage(), 1) << "held after the attempt is done";
  EXPECT_FALSE(state.TakeHeldDrop());
  state.Apply(AbortOf("job-2", 3));  // Not kept by the new coordinator.
  EXPECT_TRUE(state.TakeHeldDrop());
}

TEST(ControlState, ChangesWorthAHeartbeatWakeTheWriter) {
  ControlState state;
  int64_t revision = -1;
  state.WaitForChange(&revision, absl::ZeroDuration());  // Catch up.
  const absl::Time start = absl::Now();
  state.Apply(AssignmentOf("job-1", 1));  // An attempt starts: report it.
  state.WaitForChange(&revision, absl::Seconds(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  state.SetPhase(v1::WORKER_PHASE_RUNNING);  // PREPARING... -> RUNNING: yes.
  const int64_t before = revision;
  state.WaitForChange(&revision, absl::Seconds(10));
  EXPECT_NE(revision, before);
  // The per-step RUNNING <-> WAITING flip waits for the interval.
  state.SetPhase(v1::WORKER_PHASE_WAITING);
  const int64_t steady = revision;
  state.WaitForChange(&revision, absl::Milliseconds(20));
  EXPECT_EQ(revision, steady);
}

}  // namespace
}  // namespace zbpp::worker
