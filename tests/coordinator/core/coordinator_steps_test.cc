// The coordinator core's step reports (FakeClock, in-memory SQLite store,
// fake workers calling the core): validation outcomes and the AUTO mode,
// checkpoints recorded once every stage wrote them, and reports refused
// naming the field, with nothing of them stored.

#include "coordinator/core/coordinator.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::CoordinatorTest;
using testing::FakeWorker;
using testing::TestSpec;
using testing::Uncalibrated;
using testing::TrueCosts;

TEST_F(CoordinatorTest, ValidationOutcomesCountRollbacksAndSkips) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.0);
  for (auto& w : workers) w.Drain();
  for (int64_t step = 0; step < 2; ++step) {
    for (auto& w : workers) {
      v1::ReportStepRequest r = w.Report(step, truth);
      if (step == 1) {
        v1::ValidationResult* v = r.add_validations();
        v->set_step(0);
        v->set_mode(v1::VALIDATION_MODE_POST);
        v->set_found_inf_nan(true);
        v->set_decision(v1::VALIDATION_DECISION_SKIPPED);
        v->set_rolled_back(w.assignment->stage() < 2);
        v->set_rollback_seconds(0.5);
      }
      ASSERT_TRUE(coordinator_->ReportStep(r).ok());
      ++w.next_step;
    }
  }
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->rollbacks_total(), 1);
  EXPECT_EQ(job->skipped_steps_total(), 1);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto outcomes = store_->ListValidationOutcomes(job_id);
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].rolled_back_stages_size(), 2);
  EXPECT_TRUE(std::isnan((*outcomes)[0].global_grad_norm())) << "inf/nan: no norm";
  EXPECT_DOUBLE_EQ((*outcomes)[0].rollback_seconds(), 2.0);
}

// JobSpec.validation AUTO: synchronous first, POST after 10 steps that
// needed nothing (announced as a version at a step no worker was granted),
// back to SYNCHRONOUS after 3 clipped steps (and POST again after 10 clean
// ones); every worker sees the switch
// at the same step, and the last step's parameter sums add up to the job's
// param_checksum.
TEST_F(CoordinatorTest, AutoValidationSwitchesModeLikeAScheduleVersion) {
  v1::JobSpec spec = Uncalibrated(TestSpec(2, 4, "zb-h1", 40));
  spec.mutable_schedule()->mutable_resolve()->set_min_improvement(0.9);  // No re-solves.
  spec.set_validation(v1::VALIDATION_MODE_AUTO);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  // Clipped outcomes for steps 20..22, committed otherwise.
  auto decision = [](int64_t step) {
    return step >= 20 && step <= 22 ? v1::VALIDATION_DECISION_CLIPPED
                                     : v1::VALIDATION_DECISION_COMMITTED;
  };
  for (int64_t step = 0; step < 40; ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_GE(w.granted, step);
      v1::ReportStepRequest r = w.Report(step, truth);
      const v1::ScheduleVersion& version = w.VersionFor(step);
      v1::ValidationResult* v = r.add_validations();
      v->set_step(step);
      v->set_mode(version.validation());
      v->set_decision(decision(step));
      v->set_clip_coefficient(decision(step) == v1::VALIDATION_DECISION_CLIPPED ? 0.5 : 1);
      if (step == 39) r.set_parameter_sum(w.assignment->stage() == 0 ? 1.25 : -0.5);
      ASSERT_TRUE(coordinator_->ReportStep(r).ok()) << step;
    }
  }
  auto job = coordinator_->GetJob(job_id, {});
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job->clipped_steps_total(), 3);
  EXPECT_DOUBLE_EQ(job->param_checksum(), 0.75);
  // Versions: 1 synchronous, 2 POST (after step 9's outcome), 3 synchronous
  // (after step 22's, the third clipped step), 4 POST again (after step 32's,
  // ten clean steps later).
  const std::vector<v1::ScheduleVersion>& versions = workers[0].versions;
  ASSERT_EQ(versions.size(), 4u);
  EXPECT_EQ(versions[0].validation(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_EQ(versions[1].validation(), v1::VALIDATION_MODE_POST);
  EXPECT_EQ(versions[1].reason(), v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  EXPECT_GT(versions[1].effective_step(), 9);
  EXPECT_EQ(versions[2].validation(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_GT(versions[2].effective_step(), 22);
  EXPECT_EQ(versions[3].validation(), v1::VALIDATION_MODE_POST);
  EXPECT_GT(versions[3].effective_step(), 32);
  EXPECT_EQ(job->validation_mode(), v1::VALIDATION_MODE_POST);
  for (size_t i = 1; i < versions.size(); ++i) {
    EXPECT_EQ(versions[i].schedule().SerializeAsString(),
              versions[0].schedule().SerializeAsString())
        << "a mode switch keeps the schedule";
    for (const FakeWorker& w : workers) {
      // Announced before any grant reached the version's first step.
      EXPECT_LT(w.granted_at_version[i - 1], versions[i].effective_step());
      EXPECT_EQ(w.versions[i].effective_step(), versions[i].effective_step());
    }
  }
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto outcomes = store_->ListValidationOutcomes(job_id);
  ASSERT_TRUE(outcomes.ok());
  EXPECT_EQ(outcomes->size(), 40u);
}

TEST_F(CoordinatorTest, ValidationOfAStepNotRunIsRefused) {
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(TestSpec(), &job_id);
  workers[0].Drain();
  v1::ReportStepRequest r = workers[0].Report(0, TrueCosts(TestSpec(), 2, 1.0));
  r.add_validations()->set_step(1);
  const absl::Status refused = coordinator_->ReportStep(r);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("validations[0].step"), std::string::npos) << refused;
}

TEST_F(CoordinatorTest, CheckpointRecordedOnlyWhenEveryRankWroteIt) {
  v1::JobSpec spec = TestSpec(2, 4, "zb-h1", 10);
  spec.mutable_checkpoint()->set_interval_steps(2);
  spec.mutable_checkpoint()->set_directory("/ckpt");
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 1, 1.0);
  // Step 1: both ranks wrote it; step 3: only rank 0 did.
  auto written = [](int64_t step, int rank) {
    return step == 1 || (step == 3 && rank == 0);
  };
  std::vector<int64_t> recorded;
  for (int64_t step = 0; step < 4; ++step) {
    for (auto& w : workers) {
      w.Drain();
      ASSERT_GE(w.granted, step);
      v1::ReportStepRequest r = w.Report(step, truth);
      r.set_checkpoint_written(written(step, w.assignment->stage()));
      ASSERT_TRUE(coordinator_->ReportStep(r).ok());
      ++w.next_step;
    }
    recorded.push_back(
        coordinator_->GetJob(job_id, {})->last_checkpoint_step());
  }
  EXPECT_EQ(recorded, (std::vector<int64_t>{-1, 1, 1, 1}));
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto stored = store_->LoadAll();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->checkpoints.size(), 1u);
  EXPECT_EQ(stored->checkpoints[0].step, 1);
  EXPECT_EQ(stored->checkpoints[0].directory, "/ckpt");
  EXPECT_TRUE(stored->checkpoints[0].complete);
}

TEST_F(CoordinatorTest, ReportStepChecksItsInput) {
  std::string job_id;
  const v1::JobSpec spec = TestSpec();
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.0);
  workers[0].Drain();
  v1::ReportStepRequest r = workers[0].Report(0, truth);
  v1::ReportStepRequest bad = r;
  bad.add_action_end_seconds(1);
  EXPECT_EQ(coordinator_->ReportStep(bad).code(),
            absl::StatusCode::kInvalidArgument);
  bad = r;
  bad.set_worker_id("worker-77");
  EXPECT_EQ(coordinator_->ReportStep(bad).code(), absl::StatusCode::kNotFound);
  bad = r;
  bad.set_step(5);  // Not granted.
  EXPECT_EQ(coordinator_->ReportStep(bad).code(),
            absl::StatusCode::kInvalidArgument);
  bad = r;
  bad.set_schedule_version(coordinator_->GetJob(job_id, {})->schedule_version() + 1);
  EXPECT_EQ(coordinator_->ReportStep(bad).code(),
            absl::StatusCode::kInvalidArgument);
  // Measurements out of range, each refused naming its field.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::function<void(v1::ReportStepRequest&)>, std::string>>
      out_of_range = {
          {[&](auto& b) { b.set_step_seconds(nan); }, "step_seconds: must be a finite time"},
          {[](auto& b) { b.set_idle_seconds(-1); }, "idle_seconds: must be a finite time"},
          {[](auto& b) { b.set_comm_seconds(1e308); }, "comm_seconds: 1e+308 is longer than"},
          {[](auto& b) { b.set_action_start_seconds(0, -1); },
           "action_start_seconds[0]: must be a finite time"},
          {[](auto& b) { b.set_eval_loss(-std::numeric_limits<double>::infinity()); },
           "eval_loss: must be >= 0"},
          {[](auto& b) { b.set_loss(-0.5); }, "loss: must be >= 0"},
          {[&](auto& b) { b.set_parameter_sum(nan); }, "parameter_sum: must be finite"},
          {[&](auto& b) { b.set_local_grad_norm_sq(nan); },
           "local_grad_norm_sq: must be >= 0 unless found_inf_nan"},
          {[](auto& b) {
             v1::ValidationResult* v = b.add_validations();
             v->set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
             v->set_clip_coefficient(5);
           },
           "validations[0].clip_coefficient: must be in [0, 1], got 5"},
          {[](auto& b) {
             v1::ValidationResult* v = b.add_validations();
             v->set_mode(v1::VALIDATION_MODE_POST);
             v->set_decision(static_cast<v1::ValidationDecision>(42));
           },
           "validations[0].decision: unknown decision 42"},
          {[](auto& b) {
             v1::ValidationResult* v = b.add_validations();
             v->set_mode(v1::VALIDATION_MODE_POST);
             v->set_rollback_seconds(-2);
           },
           "validations[0].rollback_seconds: must be a finite time"},
          {[](auto& b) { b.add_validations()->set_mode(v1::VALIDATION_MODE_AUTO); },
           "validations[0].mode: must be SYNCHRONOUS or POST"},
      };
  for (const auto& [mutate, message] : out_of_range) {
    bad = r;
    mutate(bad);
    const absl::Status status = coordinator_->ReportStep(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(message));
  }
  // A divergent step's loss is a fact to record, not a malformed report.
  bad = r;
  bad.set_loss(inf);
  EXPECT_TRUE(coordinator_->ReportStep(bad).ok());
}

TEST_F(CoordinatorTest, BadHopLatencyIsRejectedAndNothingStored) {
  const v1::JobSpec spec = TestSpec(4, 8, "zb-1p", 20, 2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 2, 1.5);
  workers[1].Drain();
  workers[1].one_way_seconds = 1.0;  // A valid first entry, to rank 2.
  const v1::ReportStepRequest good = workers[1].Report(0, truth);
  workers[1].one_way_seconds.reset();
  struct Case {
    int to_stage;
    double seconds;
    const char* field;
  };
  for (const Case& c :
       {Case{0, -1e-3, "hop_latencies[1].one_way_seconds"},
        Case{0, std::numeric_limits<double>::quiet_NaN(),
             "hop_latencies[1].one_way_seconds"},
        Case{0, std::numeric_limits<double>::infinity(),
             "hop_latencies[1].one_way_seconds"},
        Case{3, 1e-3, "hop_latencies[1].to_stage"},
        Case{1, 1e-3, "hop_latencies[1].to_stage"},
        Case{7, 1e-3, "hop_latencies[1].to_stage"}}) {
    v1::ReportStepRequest bad = good;
    v1::HopLatency* hop = bad.add_hop_latencies();
    hop->set_to_stage(c.to_stage);
    hop->set_one_way_seconds(c.seconds);
    const absl::Status s = coordinator_->ReportStep(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
  // Nothing of the rejected reports reached the cost model: the re-solve
  // of a run without hop latencies sees T_comm = 0, as before.
  RunSteps(workers, truth, 19);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const StoredState stored = *store_->LoadAll();
  ASSERT_GE(stored.schedule_versions.size(), 2u);
  for (const v1::ScheduleVersion& v : stored.schedule_versions) {
    EXPECT_EQ(v.cost_model().comm_seconds(), 0) << "version " << v.version();
  }
}

}  // namespace
}  // namespace zbpp::coordinator
