// Calibration through the Coordinator (coordinator/core/coordinator.h,
// ReportProfile): the measured memory stays in the cost model for the later
// re-solves, and profiles of attempts that ended are refused.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coordinator/core/coordinator.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::CoordinatorTest;
using testing::FakeWorker;
using testing::TestSpec;
using testing::TrueCosts;

// ZB-2p under a limit in bytes, with M_B measured twice the formula's and a
// straggler: the calibrated version and every re-solve after it plan with
// the measured M_B, so each fits the limit in bytes.
TEST_F(CoordinatorTest, ResolvesAfterCalibrationKeepPlanningWithTheMeasuredMemory) {
  v1::JobSpec spec = TestSpec(4, 8, "zb-2p", 20, 2);
  const sched::Problem analytic = *InitialProblem(spec);
  const double limit = analytic.limit_of(0);  // ZB-2p's 2p M_B, in bytes.
  spec.mutable_schedule()->set_memory_limit_bytes(static_cast<uint64_t>(limit));
  sched::Problem profiled = analytic;
  for (sched::VirtualStageCost& c : profiled.virtual_stages) {
    c.m_b_bytes *= 2;
    c.m_w_bytes *= 2;
  }
  const std::string job_id = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 4; ++i) {
    workers.push_back(AddWorker(i));
    workers.back().profile_costs = profiled;
  }
  HeartbeatAll(workers);
  sched::Problem truth = TrueCosts(spec, 2, 1.5);
  RunSteps(workers, truth, 19);

  const auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->state_message();
  ASSERT_GE(job->schedule_version(), 3);  // Calibrated, then re-solved.
  EXPECT_EQ(coordinator_->GetScheduleVersion(job_id, 2)->reason(),
            v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  for (int64_t v = 2; v <= job->schedule_version(); ++v) {
    const v1::ScheduleVersion version = *coordinator_->GetScheduleVersion(job_id, v);
    EXPECT_DOUBLE_EQ(version.cost_model().virtual_stages(0).m_b_bytes(),
                     profiled.virtual_stages[0].m_b_bytes)
        << v;
    for (double peak : version.predicted().peak_memory_bytes()) {
      EXPECT_LE(peak, limit * (1 + 1e-9)) << v;
    }
  }
  EXPECT_EQ(coordinator_->GetScheduleVersion(job_id, job->schedule_version())->reason(),
            v1::SCHEDULE_CHANGE_REASON_RESOLVE);
}

// A fixed shape whose need under the measured M_B is over a limit in bytes
// fails its job before any step; the workers go to the job waiting behind.
TEST_F(CoordinatorTest, CalibrationThatFitsNothingFailsTheJobAndFreesItsWorkers) {
  v1::JobSpec spec = TestSpec(2, 4, "1f1b", 20, 2);
  const sched::Problem analytic = *InitialProblem(spec);
  spec.mutable_schedule()->set_memory_limit_bytes(
      static_cast<uint64_t>(2 * analytic.virtual_stages[0].m_b_bytes) + 1);
  sched::Problem profiled = analytic;
  for (sched::VirtualStageCost& c : profiled.virtual_stages) c.m_b_bytes *= 2;
  const std::string failing = coordinator_->SubmitJob(spec)->id();
  const std::string waiting =
      coordinator_->SubmitJob(testing::Uncalibrated(TestSpec(2, 4, "1f1b", 20, 2)))->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  for (FakeWorker& w : workers) w.profile_costs = profiled;
  HeartbeatAll(workers);

  const auto failed = coordinator_->GetJob(failing, {});
  EXPECT_EQ(failed->state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed->state_message(), HasSubstr("schedule.memory_limit_bytes: "));
  EXPECT_EQ(failed->steps_completed(), 0);
  HeartbeatAll(workers);  // Aborted, they say they are idle, and are taken.
  for (FakeWorker& w : workers) w.Drain();
  EXPECT_EQ(coordinator_->GetJob(waiting, {})->state(), v1::JOB_STATE_ASSIGNING);
  for (FakeWorker& w : workers) {
    EXPECT_EQ(w.aborts, 1);
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->job_id(), waiting);
  }
}

// The model cut into three virtual stages of two blocks each as a worker
// profiles it (worker.proto ReportProfileRequest.layout_parts; TestSpec's
// 4 blocks over 2 virtual stages give Assignment.layout_part_blocks 2): a
// block of T_F = T_B = T_W = 1 s, an embedding that costs nothing, and a
// head `head_blocks` blocks dear.
std::vector<sched::VirtualStageCost> LayoutParts(double head_blocks) {
  const sched::VirtualStageCost blocks{2, 2, 2, 2e6, 1e6};
  sched::VirtualStageCost last = blocks;
  last.f_seconds += head_blocks;
  last.b_seconds += head_blocks;
  last.w_seconds += head_blocks;
  return {blocks, blocks, last};
}

// The stage profile of `spec` laid out [2, 2] that goes with those parts:
// each virtual stage's two blocks, the last one's head besides (the
// analytic memory kept).
sched::Problem StageProfile(const v1::JobSpec& spec, double head_blocks) {
  sched::Problem profile = *InitialProblem(spec);
  for (int k = 0; k < 2; ++k) {
    sched::VirtualStageCost& c = profile.virtual_stages[k];
    c.f_seconds = c.b_seconds = c.w_seconds = 2 + (k == 1 ? head_blocks : 0);
    c.bw_seconds = 0;
  }
  return profile;
}

// Every worker profiles those parts and that stage profile.
void ProfileWith(std::vector<FakeWorker>& workers, const v1::JobSpec& spec, double head_blocks) {
  for (FakeWorker& w : workers) {
    w.layout_parts = LayoutParts(head_blocks);
    w.profile_costs = StageProfile(spec, head_blocks);
  }
}

// The analytic model planned the even split (a small vocabulary's head is
// cheap by FLOPs); the workers profile a head as dear as two blocks. The
// first calibration chooses [3, 1] from the profiled parts, ends the
// attempt and starts the next on the new layout at once: the job stays
// RUNNING, no recovery is counted, and the second attempt's calibration
// does not re-lay it out.
TEST_F(CoordinatorTest, CalibrationLaysTheModelOutAgainFromTheProfiledPartsWithoutARecovery) {
  const v1::JobSpec spec = TestSpec(2, 8, "zb-2p", 6, 2);
  const v1::Job submitted = *coordinator_->SubmitJob(spec);
  ASSERT_EQ(submitted.layout_source(), v1::LAYOUT_SOURCE_ANALYTIC) << submitted.layout_reason();
  ASSERT_THAT(submitted.layout(), ::testing::ElementsAre(2, 2)) << submitted.layout_reason();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  ProfileWith(workers, spec, /*head_blocks=*/2);
  HeartbeatAll(workers);  // Assigned; each profiles, parts included.
  for (FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->layout_part_blocks(), 2) << "the blocks of an average virtual stage";
  }

  v1::Job job = *coordinator_->GetJob(submitted.id(), {});
  EXPECT_THAT(job.layout(), ::testing::ElementsAre(3, 1));
  EXPECT_EQ(job.layout_source(), v1::LAYOUT_SOURCE_PROFILED);
  EXPECT_THAT(job.layout_reason(),
              ::testing::StartsWith("calibration: [3, 1] predicts a step "));
  EXPECT_THAT(job.layout_reason(), HasSubstr("shorter than [2, 2] under the profiled costs"));
  EXPECT_THAT(job.spec().pipeline().layout(), ::testing::ElementsAre(3, 1));
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.state_message();
  EXPECT_EQ(job.schedule_version(), 1) << "no version for the old layout's calibration";

  HeartbeatAll(workers);  // Aborted, idle; then taken by the next attempt.
  HeartbeatAll(workers);
  for (FakeWorker& w : workers) {
    EXPECT_EQ(w.aborts, 1);
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->attempt(), 2);
    EXPECT_THAT(w.assignment->spec().pipeline().layout(), ::testing::ElementsAre(3, 1));
    EXPECT_TRUE(w.assignment->profile());
    EXPECT_EQ(w.assignment->layout_part_blocks(), 0) << "the layout is final";
  }
  RunSteps(workers, TrueCosts(spec, 1, 1.0), 5);
  job = *coordinator_->GetJob(submitted.id(), {});
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.state_message();
  EXPECT_EQ(job.recoveries_total(), 0);
  EXPECT_THAT(job.layout(), ::testing::ElementsAre(3, 1));
  EXPECT_EQ(coordinator_->GetScheduleVersion(submitted.id(), 2)->reason(),
            v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
}

// Parts that favour the planned layout keep it, say so, and close the
// layout: no attempt ends.
TEST_F(CoordinatorTest, CalibrationKeepsALayoutTheProfiledPartsAgreeWith) {
  const v1::JobSpec spec = TestSpec(2, 8, "zb-2p", 4, 2);
  const std::string job_id = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  ProfileWith(workers, spec, /*head_blocks=*/0);
  HeartbeatAll(workers);
  const v1::Job job = *coordinator_->GetJob(job_id, {});
  EXPECT_THAT(job.layout(), ::testing::ElementsAre(2, 2));
  EXPECT_EQ(job.layout_source(), v1::LAYOUT_SOURCE_PROFILED);
  EXPECT_THAT(job.layout_reason(), ::testing::StartsWith("calibration: [2, 2] kept"));
  EXPECT_EQ(job.schedule_version(), 2);  // Calibrated on the planned layout.
  for (FakeWorker& w : workers) EXPECT_EQ(w.aborts, 0);
}

// Stage 0's own chunks profiled twice as dear as its layout parts predict
// (parts profiled while the host was busy elsewhere, say): the parts are not
// planned from, the layout stays as planned, and the reason says why.
TEST_F(CoordinatorTest, CalibrationKeepsTheLayoutWhenTheStageProfileAndThePartsDisagree) {
  const v1::JobSpec spec = TestSpec(2, 8, "zb-2p", 6, 2);
  const std::string job_id = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  ProfileWith(workers, spec, /*head_blocks=*/2);  // [3, 1] if the parts held.
  sched::VirtualStageCost& first = workers[0].profile_costs->virtual_stages[0];
  first.f_seconds *= 2;
  first.b_seconds *= 2;
  first.w_seconds *= 2;
  HeartbeatAll(workers);
  const v1::Job job = *coordinator_->GetJob(job_id, {});
  EXPECT_THAT(job.layout(), ::testing::ElementsAre(2, 2));
  EXPECT_EQ(job.layout_source(), v1::LAYOUT_SOURCE_PROFILED);
  EXPECT_THAT(job.layout_reason(),
              ::testing::StartsWith("calibration: [2, 2] kept (stage 0's profile reads 2.00x "
                                    "what its layout parts predict, beyond 1.25x either way)"));
  for (FakeWorker& w : workers) EXPECT_EQ(w.aborts, 0);
}

// A worker that sends no parts (synthetic compute cannot cut the model)
// leaves the layout as planned.
TEST_F(CoordinatorTest, CalibrationWithoutEveryWorkersPartsKeepsThePlannedLayout) {
  const v1::JobSpec spec = TestSpec(2, 8, "zb-2p", 4, 2);
  const std::string job_id = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  workers[0].layout_parts = LayoutParts(/*head_blocks=*/2);
  HeartbeatAll(workers);
  const v1::Job job = *coordinator_->GetJob(job_id, {});
  EXPECT_THAT(job.layout(), ::testing::ElementsAre(2, 2));
  EXPECT_EQ(job.layout_source(), v1::LAYOUT_SOURCE_ANALYTIC);
  EXPECT_EQ(job.schedule_version(), 2);
  for (FakeWorker& w : workers) EXPECT_EQ(w.aborts, 0);
}

TEST_F(CoordinatorTest, ProfileOfAnAttemptThatEndedIsRefused) {
  const v1::JobSpec spec = TestSpec(2, 4, "zb-1p", 20, 2);
  const std::string job_id = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  for (FakeWorker& w : workers) w.Drain();
  const v1::ReportProfileRequest stale = *workers[0].TakeProfile();
  RunThenFailAttempt(workers, job_id, 1, 1, "out of memory");
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RECOVERING);
  const absl::Status refused = coordinator_->ReportProfile(stale);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("does not hold job"));
  v1::ReportProfileRequest unknown = stale;
  unknown.set_worker_id("worker-77");
  EXPECT_EQ(coordinator_->ReportProfile(unknown).code(), absl::StatusCode::kNotFound);
}

// Profiles and reports bounded by what the worker's device and the job can
// hold. Before: M_B = 1e308 failed a job under a byte limit ("measured
// M_B = 0"), M_B = 0 (or 1 byte) voided the limit, F = B = W = 86400 s predicted a
// 2e6 s step, and a peak_activation_bytes of 2^64 - 1 fired the memory
// alert; each was accepted.
TEST_F(CoordinatorTest, ProfilesAndReportsBeyondTheDeviceOrAnyStepAreRefused) {
  v1::JobSpec spec = TestSpec(2, 4, "zb-h1", 20, 2);
  const std::string job_id = coordinator_->SubmitJob(spec)->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};  // 1 GiB each.
  for (FakeWorker& w : workers) w.Drain();
  const v1::ReportProfileRequest good = *workers[0].TakeProfile();
  struct Case {
    std::string field;
    std::function<void(v1::VirtualStageProfile&)> mutate;
  };
  const std::vector<Case> cases = {
      {"virtual_stages[0].m_b_bytes", [](v1::VirtualStageProfile& e) { e.set_m_b_bytes(1e308); }},
      {"virtual_stages[0].m_b_bytes",
       [](v1::VirtualStageProfile& e) { e.set_m_b_bytes(2.0 * (uint64_t{1} << 30)); }},
      {"virtual_stages[0].m_b_bytes",
       [](v1::VirtualStageProfile& e) { e.set_m_b_bytes(0), e.set_m_w_bytes(0); }},
      // One byte: under a limit in bytes, room for every microbatch. The
      // stage's input [b, s, h] = [1, 32, 64] alone is 2048 elements.
      {"less than the stage's input activation alone (2048 bytes",
       [](v1::VirtualStageProfile& e) { e.set_m_b_bytes(1), e.set_m_w_bytes(0); }},
      {"virtual_stages: stage 0",
       [](v1::VirtualStageProfile& e) {
         e.set_f_seconds(86400), e.set_b_seconds(86400), e.set_w_seconds(86400);
       }},
  };
  for (const Case& c : cases) {
    v1::ReportProfileRequest bad = good;
    c.mutate(*bad.mutable_virtual_stages(0));
    const absl::Status refused = coordinator_->ReportProfile(bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(refused.message()), HasSubstr(c.field));
  }
  ASSERT_TRUE(coordinator_->ReportProfile(good).ok());
  HeartbeatAll(workers);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  for (FakeWorker& w : workers) w.Drain();
  v1::ReportStepRequest report = workers[0].Report(0, TrueCosts(spec, 1, 1.0));
  report.set_peak_activation_bytes(~uint64_t{0});
  const absl::Status refused = coordinator_->ReportStep(report);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("peak_activation_bytes"));
  report.set_peak_activation_bytes(1 << 20);
  EXPECT_TRUE(coordinator_->ReportStep(report).ok());
}

// A worker that never profiles held its job at step 0 for good. After the
// calibration timeout (600 s by default) the attempt fails naming it and
// the job recovers; the profile that came in time stays irrelevant.
TEST_F(CoordinatorTest, CalibrationThatNeverCompletesRecoversAfterTheTimeout) {
  const std::string job_id = coordinator_->SubmitJob(TestSpec(2, 4, "zb-h1", 20, 2))->id();
  std::vector<FakeWorker> workers = {AddWorker(0), AddWorker(1)};
  for (FakeWorker& w : workers) w.Drain();
  ASSERT_TRUE(coordinator_->ReportProfile(*workers[0].TakeProfile()).ok());
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_ASSIGNING);
  auto heartbeat_both = [&] {
    for (FakeWorker& w : workers) {
      v1::Heartbeat hb;
      hb.set_phase(v1::WORKER_PHASE_PREPARING);
      hb.set_job_id(job_id);
      hb.set_attempt(1);
      ASSERT_TRUE(coordinator_->Heartbeat(w.id, hb).ok());
    }
  };
  heartbeat_both();  // Both hold the attempt: RUNNING, calibrating.
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  for (int t = 5; t < 600; t += 5) {  // Up to 595 s.
    clock_.Advance(absl::Seconds(5));
    heartbeat_both();
    coordinator_->Tick();
  }
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING);
  clock_.Advance(absl::Seconds(5));
  heartbeat_both();
  coordinator_->Tick();
  const auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(), HasSubstr(workers[1].id));
  EXPECT_THAT(job->state_message(), HasSubstr("no calibration profile within 10m"));
}

}  // namespace
}  // namespace zbpp::coordinator
