// Calibration (coordinator/core/job_calibration.cc) through JobHarness: the
// workers' profiles in, grants withheld until the last one, the calibrated
// version planned from the measured F/B/W and M_B/M_W (within the memory
// limit, or the job fails), each refusal naming its field.

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/schedule_proto.h"
#include "coordinator/core/job.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/simulator.h"
#include "testing/fake_pipeline.h"
#include "tests/coordinator/core/job_harness.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::FakeWorker;
using testing::TestSpec;

class JobCalibrationTest : public testing::JobHarness {
 protected:
  /// A job of `spec` whose first attempt began on new workers, each of
  /// which holds its assignment and will profile `profiled` (the analytic
  /// costs unless given).
  std::unique_ptr<Job> Started(const v1::JobSpec& spec, std::vector<FakeWorker>* workers,
                               std::optional<sched::Problem> profiled = std::nullopt) {
    std::unique_ptr<Job> job = NewJob(spec);
    *workers = AddWorkers(WorkersOf(spec.pipeline()));
    EXPECT_TRUE(StartAttempt(*job, *workers).ok());
    AcknowledgeAll(*job, *workers);
    for (FakeWorker& w : *workers) w.profile_costs = profiled;
    return job;
  }

  /// The spec's analytic problem with every virtual stage's M_B and M_W
  /// times `memory` and stage 1's passes times `slow`.
  static sched::Problem Profiled(const v1::JobSpec& spec, double memory, double slow = 1) {
    sched::Problem problem = *InitialProblem(spec);
    for (int s = 0; s < problem.num_virtual_stages(); ++s) {
      sched::VirtualStageCost& c = problem.virtual_stages[s];
      c.m_b_bytes *= memory;
      c.m_w_bytes *= memory;
      if (s % problem.stages == 1) {
        c.f_seconds *= slow;
        c.b_seconds *= slow;
        c.w_seconds *= slow;
      }
    }
    return problem;
  }

  /// Every worker sends its profile (SendProfile) and applies what came.
  void ProfileAll(Job& job, std::vector<FakeWorker>& workers) {
    for (size_t i = 0; i < workers.size(); ++i) {
      std::optional<v1::ReportProfileRequest> profile = workers[i].TakeProfile();
      ASSERT_TRUE(profile.has_value()) << i;
      ASSERT_TRUE(SendProfile(job, *profile, static_cast<int>(i)));
    }
    for (FakeWorker& w : workers) w.Drain();
  }
};

TEST_F(JobCalibrationTest, GrantsWaitForTheLastProfileThenTheCalibratedVersionRunsStepZero) {
  const v1::JobSpec spec = TestSpec(/*stages=*/4, /*microbatches=*/8, "zb-1p");
  std::vector<FakeWorker> workers;
  const sched::Problem profiled = Profiled(spec, 1, /*slow=*/2);
  std::unique_ptr<Job> job = Started(spec, &workers, profiled);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(workers[i].assignment->profile());
    std::optional<v1::ReportProfileRequest> profile = workers[i].TakeProfile();
    ASSERT_TRUE(SendProfile(*job, *profile, i));
  }
  // Neither a grant update nor a replayed Session grants a step meanwhile.
  job->UpdateGrant();
  job->ReplaySession(workers[3].id, 3);
  Apply(*job);
  std::vector<SessionMessage> replayed;
  ASSERT_TRUE(workers[3].outbox->Pop(absl::InfinitePast(), &replayed).ok());
  ASSERT_EQ(replayed.size(), 1u);
  EXPECT_TRUE(replayed[0]->assignment().profile());
  for (FakeWorker& w : workers) w.Drain();
  for (FakeWorker& w : workers) EXPECT_EQ(w.granted, -1);  // Three of four in.
  EXPECT_EQ(job->proto().schedule_version(), 1);
  ASSERT_TRUE(SendProfile(*job, *workers[3].TakeProfile(), 3));
  for (FakeWorker& w : workers) w.Drain();

  ASSERT_EQ(job->proto().schedule_version(), 2);
  const v1::ScheduleVersion& calibrated = *job->Version(2);
  EXPECT_EQ(calibrated.reason(), v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  EXPECT_EQ(calibrated.effective_step(), 0);  // Version 1 never runs.
  // Its cost model is the profile, and its prediction the simulation of
  // its schedule under it.
  for (int s = 0; s < profiled.num_virtual_stages(); ++s) {
    EXPECT_DOUBLE_EQ(calibrated.cost_model().virtual_stages(s).f_seconds(),
                     profiled.virtual_stages[s].f_seconds);
    EXPECT_DOUBLE_EQ(calibrated.cost_model().virtual_stages(s).w_seconds(),
                     profiled.virtual_stages[s].w_seconds);
  }
  const sched::Schedule schedule = *ScheduleFromProto(calibrated.schedule());
  const sched::SimulationResult sim =
      *sched::Simulate(*ProblemFromCostModel(calibrated.schedule(), calibrated.cost_model()),
                       schedule);
  EXPECT_DOUBLE_EQ(calibrated.predicted().step_seconds(), sim.step_seconds);
  // Against the analytic plan (stage 1 twice as slow), the prediction moved.
  EXPECT_GT(calibrated.predicted().step_seconds(),
            job->Version(1)->predicted().step_seconds() * 1.2);
  for (FakeWorker& w : workers) {
    EXPECT_EQ(w.granted, 1);
    EXPECT_EQ(w.VersionFor(0).version(), 2);
  }
}

TEST_F(JobCalibrationTest, MeasuredMemoryReplansZb2pWithinABytesLimit) {
  v1::JobSpec spec = TestSpec(/*stages=*/4, /*microbatches=*/8, "zb-2p");
  // ZB-2p's own budget (2p M_B) in bytes under the analytic M_B: with M_B
  // measured twice as large, version 1's order needs twice that.
  const sched::Problem analytic = *InitialProblem(spec);
  const double unit = analytic.limit_of(0) / (2 * 4);
  const uint64_t limit = static_cast<uint64_t>(2 * 4 * unit);
  spec.mutable_schedule()->set_memory_limit_bytes(limit);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers, Profiled(spec, 2));
  ProfileAll(*job, workers);

  ASSERT_EQ(job->state(), v1::JOB_STATE_RUNNING) << job->proto().state_message();
  ASSERT_EQ(job->proto().schedule_version(), 2);
  const v1::ScheduleVersion& calibrated = *job->Version(2);
  EXPECT_DOUBLE_EQ(calibrated.cost_model().virtual_stages(0).m_b_bytes(),
                   2 * analytic.virtual_stages[0].m_b_bytes);
  for (int w = 0; w < 4; ++w) {
    EXPECT_DOUBLE_EQ(calibrated.cost_model().memory_limit_bytes(w), limit);  // Bytes stay.
    EXPECT_LE(calibrated.predicted().peak_memory_bytes(w), limit * (1 + 1e-9)) << w;
  }
  // Version 1's order under the measured M_B would not have fitted.
  double old_peak = 0;
  for (double peak : calibrated.previous_predicted().peak_memory_bytes()) {
    old_peak = std::max(old_peak, peak);
  }
  EXPECT_GT(old_peak, limit * 1.5);
  // The order was planned again to fit.
  EXPECT_NE(calibrated.schedule().DebugString(), job->Version(1)->schedule().DebugString());
}

TEST_F(JobCalibrationTest, LimitInUnitsOfMbIsReexpressedInTheMeasuredMb) {
  v1::JobSpec spec = TestSpec(/*stages=*/4, /*microbatches=*/8, "zb-2p");
  spec.mutable_schedule()->set_memory_limit_m_b(5);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers, Profiled(spec, 3));
  ProfileAll(*job, workers);

  ASSERT_EQ(job->proto().schedule_version(), 2);
  const v1::CostModel& before = job->Version(1)->cost_model();
  const v1::CostModel& after = job->Version(2)->cost_model();
  for (int w = 0; w < 4; ++w) {
    // Still 5 M_B, of an M_B three times the formula's.
    EXPECT_DOUBLE_EQ(after.memory_limit_bytes(w), 3 * before.memory_limit_bytes(w)) << w;
    EXPECT_LE(job->Version(2)->predicted().peak_memory_bytes(w),
              after.memory_limit_bytes(w) * (1 + 1e-9));
  }
  EXPECT_LE(job->Version(2)->predicted().max_peak_memory_m_b(), 5 + 1e-9);
}

TEST_F(JobCalibrationTest, FixedShapeOverABytesLimitFailsTheJobNamingTheLimit) {
  v1::JobSpec spec = TestSpec(/*stages=*/4, /*microbatches=*/8, "1f1b");
  // Exactly what 1F1B's stage 0 holds (p microbatches) under the analytic M_B.
  const sched::Problem analytic = *InitialProblem(spec);
  const uint64_t limit = static_cast<uint64_t>(4 * analytic.virtual_stages[0].m_b_bytes) + 1;
  spec.mutable_schedule()->set_memory_limit_bytes(limit);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers, Profiled(spec, 1.5));
  ProfileAll(*job, workers);

  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  const std::string& why = job->proto().state_message();
  EXPECT_THAT(why, StartsWith("schedule.memory_limit_bytes: "));
  EXPECT_THAT(why, HasSubstr(absl::StrCat("above its limit of ", limit, " bytes")));
  EXPECT_THAT(why, HasSubstr(absl::StrCat(
                       "measured M_B = ",
                       static_cast<int64_t>(1.5 * analytic.virtual_stages[0].m_b_bytes + 0.5),
                       " bytes")));
  EXPECT_THAT(why, HasSubstr("needs a peak of"));
  EXPECT_EQ(job->proto().schedule_version(), 1);  // Nothing published.
  for (FakeWorker& w : workers) {
    EXPECT_EQ(w.aborts, 1);
    EXPECT_EQ(w.granted, -1);  // No step ran.
  }
}

TEST_F(JobCalibrationTest, ResolveDisabledKeepsTheOrderWithTheMeasuredPrediction) {
  v1::JobSpec spec = TestSpec(/*stages=*/4, /*microbatches=*/8, "zb-1p");
  spec.mutable_schedule()->mutable_resolve()->set_disabled(true);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers, Profiled(spec, 1, /*slow=*/3));
  ProfileAll(*job, workers);

  ASSERT_EQ(job->proto().schedule_version(), 2);
  const v1::ScheduleVersion& calibrated = *job->Version(2);
  EXPECT_EQ(calibrated.reason(), v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  EXPECT_EQ(calibrated.schedule().DebugString(), job->Version(1)->schedule().DebugString());
  EXPECT_DOUBLE_EQ(calibrated.predicted().step_seconds(),
                   calibrated.previous_predicted().step_seconds());
  EXPECT_GT(calibrated.predicted().step_seconds(),
            job->Version(1)->predicted().step_seconds() * 1.5);
}

TEST_F(JobCalibrationTest, EveryRefusalNamesItsFieldAndKeepsNothing) {
  const v1::JobSpec spec = TestSpec(/*stages=*/2, /*microbatches=*/4, "zb-1p");
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers);
  const v1::ReportProfileRequest good0 = *workers[0].TakeProfile();
  const v1::ReportProfileRequest good1 = *workers[1].TakeProfile();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::pair<std::function<void(v1::ReportProfileRequest&)>, std::string>>
      cases = {
          {[](auto& r) { r.set_stage(0); }, "stage: worker "},
          {[](auto& r) { r.set_replica(1); }, "replica: 1 is not in [0, 1)"},
          {[](auto& r) { r.set_repetitions(0); }, "repetitions: must be >= 1"},
          {[](auto& r) { r.mutable_virtual_stages(0)->set_virtual_stage(0); },
           "virtual_stages[0].virtual_stage: 0 is not a virtual stage of stage 1"},
          {[](auto& r) { *r.add_virtual_stages() = r.virtual_stages(0); },
           "virtual_stages[1].virtual_stage: 1 repeats virtual_stages[0]"},
          {[](auto& r) { r.clear_virtual_stages(); },
           "virtual_stages: virtual stage 1 of stage 1 is missing"},
          {[](auto& r) { r.mutable_virtual_stages(0)->set_f_seconds(0); },
           "virtual_stages[0].f_seconds: must be a finite time"},
          {[&](auto& r) { r.mutable_virtual_stages(0)->set_b_seconds(nan); },
           "virtual_stages[0].b_seconds: must be a finite time"},
          {[](auto& r) { r.mutable_virtual_stages(0)->set_w_seconds(1e300); },
           "virtual_stages[0].w_seconds: must be a finite time"},
          {[](auto& r) { r.mutable_virtual_stages(0)->set_m_b_bytes(-1); },
           "virtual_stages[0].m_b_bytes: must be a finite number of bytes > 0"},
          // M_B = 0 would let every memory limit hold any number of microbatches.
          {[](auto& r) {
             r.mutable_virtual_stages(0)->set_m_b_bytes(0);
             r.mutable_virtual_stages(0)->set_m_w_bytes(0);
           },
           "virtual_stages[0].m_b_bytes: must be a finite number of bytes > 0"},
          // Each pass within a day, the step they make not: m x 3 days.
          {[](auto& r) {
             r.mutable_virtual_stages(0)->set_f_seconds(86400);
             r.mutable_virtual_stages(0)->set_b_seconds(86400);
             r.mutable_virtual_stages(0)->set_w_seconds(86400);
           },
           "virtual_stages: stage 1's passes would make a step of "},
          {[](auto& r) {
             r.mutable_virtual_stages(0)->set_m_w_bytes(r.virtual_stages(0).m_b_bytes() + 1);
           },
           "virtual_stages[0].m_w_bytes: "},
          {[](auto& r) { r.add_hop_latencies()->set_to_stage(1); },
           "hop_latencies[0].to_stage: stage 1 is not a pipeline neighbour of stage 1"},
          {[](auto& r) {
             v1::HopLatency* hop = r.add_hop_latencies();
             hop->set_to_stage(0);
             hop->set_one_way_seconds(-1);
           },
           "hop_latencies[0].one_way_seconds: -1 is not a time"},
      };
  for (const auto& [mutate, message] : cases) {
    v1::ReportProfileRequest bad = good1;
    mutate(bad);
    const absl::Status refused = job->ReportProfile(bad, 1);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(refused.message()), StartsWith(message));
    EXPECT_TRUE(job->TakeEffects().empty()) << message;
  }
  // None of those counted as stage 1's profile: stage 0's alone completes
  // nothing, and both together do.
  const absl::Status first = job->ReportProfile(good0, 0);
  ASSERT_TRUE(first.ok()) << first;
  EXPECT_EQ(job->TakeEffects().resolve, nullptr);
  EXPECT_TRUE(job->attempt().calibrating());
  ASSERT_TRUE(SendProfile(*job, good1, 1));
  EXPECT_FALSE(job->attempt().calibrating());
  // Once calibrated, another profile finds nothing pending.
  const absl::Status late = job->ReportProfile(good1, 1);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(late.message()), HasSubstr("no calibration pending"));
}

TEST_F(JobCalibrationTest, WithoutCalibrationAProfileFindsNothingPending) {
  v1::JobSpec spec = TestSpec(/*stages=*/2, /*microbatches=*/4, "zb-1p");
  spec.mutable_schedule()->set_calibrate(false);
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers);
  EXPECT_FALSE(workers[0].assignment->profile());
  EXPECT_FALSE(workers[0].TakeProfile().has_value());
  EXPECT_EQ(workers[0].granted, 1);  // Granted with the assignment.
  v1::ReportProfileRequest unasked;
  unasked.set_worker_id(workers[0].id);
  unasked.set_stage(0);
  unasked.set_repetitions(1);
  EXPECT_EQ(job->ReportProfile(unasked, 0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobCalibrationTest, ARecoveryAttemptCalibratesAgain) {
  const v1::JobSpec spec = TestSpec(/*stages=*/2, /*microbatches=*/4, "zb-1p");
  std::vector<FakeWorker> workers;
  std::unique_ptr<Job> job = Started(spec, &workers);
  ProfileAll(*job, workers);
  ASSERT_EQ(job->proto().schedule_version(), 2);
  ASSERT_TRUE(job->AfterWorkerLost("worker lost").ok());
  Apply(*job);
  ASSERT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  std::vector<FakeWorker> fresh = AddWorkers(2);
  ASSERT_TRUE(StartAttempt(*job, fresh).ok());
  AcknowledgeAll(*job, fresh);
  for (FakeWorker& w : fresh) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->attempt(), 2);
    EXPECT_TRUE(w.assignment->profile());
    EXPECT_EQ(w.granted, -1);
  }
  ProfileAll(*job, fresh);
  EXPECT_EQ(job->proto().schedule_version(), 3);
  EXPECT_EQ(job->Version(3)->reason(), v1::SCHEDULE_CHANGE_REASON_CALIBRATION);
  for (FakeWorker& w : fresh) EXPECT_EQ(w.granted, 1);
}

}  // namespace
}  // namespace zbpp::coordinator
