// Data x pipeline parallelism in the coordinator core: d replicas of a
// p-stage pipeline on p*d fake workers (coordinator_fixture.h).

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/pipeline_shape.h"
#include "api/schedule_proto.h"
#include "coordinator/core/data_parallel.h"
#include "coordinator/core/planning.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/simulator.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::FakeWorker;
using testing::TestSpec;
using testing::Uncalibrated;
using testing::TrueCosts;

/// `TestSpec(stages, 2 * stages, schedule, steps, window)` with d replicas.
v1::JobSpec ReplicatedSpec(int replicas, const std::string& schedule = "zb-1p",
                           int64_t steps = 10, int window = 2, int stages = 2) {
  v1::JobSpec spec = TestSpec(stages, 2 * stages, schedule, steps, window);
  spec.mutable_pipeline()->set_data_parallel(replicas);
  return spec;
}

/// Virtual stages holding a reduction, one entry per whole REDUCE_GRAD and
/// per set of partial ones (REDUCE_GRAD@0, @1, ...: one entry for bucket 0).
std::vector<int> ReducedStages(const v1::Schedule& schedule) {
  std::vector<int> stages;
  for (const v1::StageActions& worker : schedule.stage_actions()) {
    for (const std::string& text : worker.actions()) {
      const absl::StatusOr<sched::Action> action = sched::ParseAction(text);
      EXPECT_TRUE(action.ok()) << action.status();
      if (action.ok() && sched::IsVirtualStageReduction(*action)) {
        stages.push_back(action->virtual_stage.value());
      }
    }
  }
  std::sort(stages.begin(), stages.end());
  return stages;
}

class DataParallelTest : public testing::CoordinatorTest {
 protected:
  /// Reports `step` from every worker (draining first).
  void ReportStepFromAll(std::vector<FakeWorker>& workers, int64_t step,
                         const sched::Problem& truth) {
    for (FakeWorker& w : workers) {
      w.Drain();
      ASSERT_GE(w.granted, step);
      absl::Status s = coordinator_->ReportStep(w.Report(step, truth));
      ASSERT_TRUE(s.ok()) << s;
      ++w.next_step;
    }
  }

  /// Reports step 0 from every worker, each with a validation of step 0
  /// that `fill(worker, validation)` completes.
  void ReportStepWithValidation(
      std::vector<FakeWorker>& workers, const sched::Problem& truth,
      const std::function<void(const FakeWorker&, v1::ValidationResult&)>& fill) {
    for (FakeWorker& w : workers) {
      w.Drain();
      v1::ReportStepRequest r = w.Report(0, truth);
      v1::ValidationResult* v = r.add_validations();
      v->set_step(0);
      fill(w, *v);
      ASSERT_TRUE(coordinator_->ReportStep(r).ok());
    }
  }
};

TEST_F(DataParallelTest, JobWaitsForStagesTimesReplicasDistinctWorkers) {
  auto job = coordinator_->SubmitJob(ReplicatedSpec(2));
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(AddWorker(i));
  EXPECT_EQ(coordinator_->GetJob(job->id(), {})->state(), v1::JOB_STATE_PENDING)
      << "3 workers are fewer than 2 stages x 2 replicas";
  workers.push_back(AddWorker(3));
  auto assigning = coordinator_->GetJob(job->id(), {});
  EXPECT_EQ(assigning->state(), v1::JOB_STATE_ASSIGNING);
  ASSERT_EQ(assigning->assignments_size(), 4);

  std::set<std::pair<int, int>> held;
  for (FakeWorker& w : workers) {
    w.Drain();
    ASSERT_TRUE(w.assignment.has_value());
    held.insert({w.assignment->stage(), w.assignment->replica()});
    // Every peer of every replica, each (stage, replica) once.
    std::set<std::pair<int, int>> peers;
    for (const v1::Peer& peer : w.assignment->peers()) {
      peers.insert({peer.stage(), peer.replica()});
      if (peer.worker_id() == w.id) {
        EXPECT_EQ(peer.stage(), w.assignment->stage());
        EXPECT_EQ(peer.replica(), w.assignment->replica());
      }
    }
    EXPECT_EQ(peers, (std::set<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}}));
    // A replica's worker holds its stage's virtual stages like replica 0's.
    EXPECT_EQ(w.assignment->virtual_stages_size(), 1);
    EXPECT_EQ(w.assignment->virtual_stages(0), w.assignment->stage());
  }
  EXPECT_EQ(held, (std::set<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}}));
  std::set<std::pair<int, int>> listed_assignments;
  for (const v1::StageAssignment& a : assigning->assignments()) {
    listed_assignments.insert({a.stage(), a.replica()});
  }
  EXPECT_EQ(listed_assignments, held);

  HeartbeatAll(workers);
  EXPECT_EQ(coordinator_->GetJob(job->id(), {})->state(), v1::JOB_STATE_RUNNING);
  std::set<std::pair<int, int>> listed_workers;
  const absl::StatusOr<v1::ListWorkersResponse> listed = coordinator_->ListWorkers({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const v1::Worker& w : listed->workers()) {
    EXPECT_EQ(w.job_id(), job->id());
    listed_workers.insert({w.stage(), w.replica()});
  }
  EXPECT_EQ(listed_workers, held);
}

TEST_F(DataParallelTest, StepCompletesOnlyWhenEveryStageOfEveryReplicaReported) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  // Replica 0 complete, replica 1 only stage 0: not a step yet, and a
  // second report of a (stage, replica) does not make up for the missing one.
  std::vector<FakeWorker*> all_but_last;
  for (FakeWorker& w : workers) {
    w.Drain();
    if (!(w.assignment->replica() == 1 && w.assignment->stage() == 1)) {
      all_but_last.push_back(&w);
    }
  }
  ASSERT_EQ(all_but_last.size(), 3u);
  for (FakeWorker* w : all_but_last) {
    ASSERT_TRUE(coordinator_->ReportStep(w->Report(0, truth)).ok());
  }
  ASSERT_TRUE(coordinator_->ReportStep(all_but_last[2]->Report(0, truth)).ok());
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 0);
  FakeWorker& last = *std::find_if(workers.begin(), workers.end(), [](const FakeWorker& w) {
    return w.assignment->replica() == 1 && w.assignment->stage() == 1;
  });
  ASSERT_TRUE(coordinator_->ReportStep(last.Report(0, truth)).ok());
  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  EXPECT_EQ(job->steps_completed(), 1);
  // One row per pipeline rank (not per worker), from replica 0's workers.
  ASSERT_EQ(job->last_step().stages_size(), 2);
  ASSERT_EQ(job->last_step_timeline().stages_size(), 2);
  for (const v1::StageStepStats& stage : job->last_step().stages()) {
    const FakeWorker& owner = *std::find_if(workers.begin(), workers.end(), [&](const auto& w) {
      return w.assignment->replica() == 0 && w.assignment->stage() == stage.stage();
    });
    EXPECT_EQ(stage.worker_id(), owner.id);
    EXPECT_GT(stage.reduce_seconds(), 0) << "stage " << stage.stage();
    EXPECT_GE(stage.exposed_reduce_seconds(), 0);
  }
}

TEST_F(DataParallelTest, ReportWithAReplicaOutOfRangeOrNotTheWorkersIsRefused) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  FakeWorker& w = workers[0];
  w.Drain();
  for (int replica : {2, -1, 1 - w.assignment->replica()}) {
    v1::ReportStepRequest r = w.Report(0, truth);
    r.set_replica(replica);
    absl::Status s = coordinator_->ReportStep(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << replica;
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("replica: ")) << replica;
  }
  ASSERT_TRUE(coordinator_->ReportStep(w.Report(0, truth)).ok());
}

TEST_F(DataParallelTest, LossIsTheMeanOverReplicasAndThroughputCountsThemAll) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  for (FakeWorker& w : workers) {
    w.Drain();
    w.loss = w.assignment->replica() == 0 ? 2.0 : 3.0;
  }
  ReportStepFromAll(workers, 0, TrueCosts(spec, 0, 1.0));
  auto job = coordinator_->GetJob(job_id, {});
  ASSERT_EQ(job->steps_completed(), 1);
  EXPECT_DOUBLE_EQ(job->last_step().loss(), 2.5);
  const double tokens_per_replica = 4.0 * 1 * 32;  // m * b * s
  EXPECT_NEAR(job->last_step().tokens_per_second(),
              2 * tokens_per_replica / job->last_step().step_seconds(), 1e-6);
}

// Peak activation memory per stage: the measured one is the fullest
// replica's; the predicted one is the simulator's peak of the version that
// ran, under the costs that give the step's predicted bubble rate.
TEST_F(DataParallelTest, PeakActivationIsTheFullestReplicasNextToTheSimulatedPeak) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  for (FakeWorker& w : workers) {
    w.Drain();
    v1::ReportStepRequest r = w.Report(0, truth);
    // Stage s: 1 MB per stage, replica 1 a quarter more.
    r.set_peak_activation_bytes(1000000 * (w.assignment->stage() + 1) +
                                250000 * w.assignment->replica());
    ASSERT_TRUE(coordinator_->ReportStep(r).ok());
  }
  auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->steps_completed(), 1);
  const v1::SchedulePrediction simulated = PredictionToProto(
      *sched::Simulate(truth, *ScheduleFromProto(job->schedule().schedule())));
  const v1::StepSummary& step = job->last_step();
  ASSERT_EQ(step.stages_size(), 2);
  for (const v1::StageStepStats& s : step.stages()) {
    EXPECT_DOUBLE_EQ(s.peak_activation_bytes(), 1000000 * (s.stage() + 1) + 250000) << s.stage();
    EXPECT_GT(s.predicted_peak_activation_bytes(), 0) << s.stage();
    EXPECT_DOUBLE_EQ(s.predicted_peak_activation_bytes(), simulated.peak_memory_bytes(s.stage()))
        << s.stage();
  }
  // Stored with the summary, as `zbppctl report` reads it.
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto summaries = store_->ListStepSummaries(job_id, 0, 1);
  ASSERT_EQ(summaries->size(), 1u);
  EXPECT_DOUBLE_EQ((*summaries)[0].stages(1).peak_activation_bytes(), 2250000);
}

TEST_F(DataParallelTest, EverySchedulePublishedHoldsOneReductionPerVirtualStage) {
  const v1::JobSpec spec = Uncalibrated(ReplicatedSpec(2, "zb-1p", 12, 2, /*stages=*/4));
  const std::vector<int> every_stage = {0, 1, 2, 3};
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  ASSERT_EQ(workers.size(), 8u);
  // Rank 2 is slow, and the reductions take half an F pass: far less than
  // the estimate, so the measured costs call for another order.
  sched::Problem truth = TrueCosts(spec, 2, 1.5);
  for (sched::VirtualStageCost& stage : truth.virtual_stages) stage.reduce_seconds = 0.5 * stage.f_seconds;
  auto first = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
  const v1::ScheduleVersion& initial = first->schedule();
  EXPECT_EQ(ReducedStages(initial.schedule()), every_stage);
  // Before any measurement: the ring all-reduce estimate of the stage's
  // float32 gradients.
  for (int s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(initial.cost_model().virtual_stages(s).reduce_seconds(),
                     RingAllReduceSeconds(
                         4 * StageParameterCount(spec.model(), spec.model().layers() / 4, s, 4, false),
                         2));
  }
  EXPECT_GT(initial.predicted().exposed_reduce_seconds(), 0)
      << "the estimate is ~100x an F pass of this small model";

  RunSteps(workers, truth, 11);
  ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  // Learned: the measured REDUCE_GRAD durations replace the estimate.
  auto snapshots = store_->ListCostSnapshots(job_id);
  ASSERT_TRUE(snapshots.ok());
  ASSERT_FALSE(snapshots->empty());
  for (int s = 0; s < 4; ++s) {
    EXPECT_NEAR(snapshots->back().second.virtual_stages(s).reduce_seconds(),
                truth.virtual_stages[s].reduce_seconds, 1e-12);
  }
  // Measured and predicted bubbles share the simulator's definition
  // (reductions are not busy time, but a rank's span runs to its last
  // reduction's end), and the cost model has the true costs by now.
  auto summaries = store_->ListStepSummaries(job_id, 0, 100);
  ASSERT_EQ(summaries->size(), 12u);
  const v1::StepSummary& last = summaries->back();
  EXPECT_NEAR(last.predicted_bubble_rate(), last.measured_bubble_rate(), 1e-6);
  for (const v1::StageStepStats& s : last.stages()) {
    EXPECT_NEAR(s.predicted_bubble_rate(), s.measured_bubble_rate(), 1e-6) << s.stage();
    EXPECT_NEAR(s.reduce_seconds(), truth.virtual_stages[s.stage()].reduce_seconds, 1e-12);
  }
  // Every version, re-solved ones included, carries the reductions.
  const StoredState stored = *store_->LoadAll();
  ASSERT_GE(stored.schedule_versions.size(), 2u) << "a re-solve was published";
  EXPECT_EQ(stored.schedule_versions[1].reason(), v1::SCHEDULE_CHANGE_REASON_RESOLVE);
  for (const v1::ScheduleVersion& version : stored.schedule_versions) {
    EXPECT_EQ(ReducedStages(version.schedule()), every_stage)
        << "version " << version.version();
  }
}

TEST_F(DataParallelTest, OneReplicaMeansNoReductionAndNoReduceCost) {
  for (int replicas : {0, 1}) {
    std::string job_id;
    std::vector<FakeWorker> workers = AssignedPipeline(ReplicatedSpec(replicas), &job_id);
    auto job = coordinator_->GetJob(job_id, v1::JOB_VIEW_FULL);
    EXPECT_TRUE(ReducedStages(job->schedule().schedule()).empty()) << replicas;
    EXPECT_EQ(job->assignments_size(), 2);
    for (const v1::VirtualStageCost& cost : job->schedule().cost_model().virtual_stages()) {
      EXPECT_EQ(cost.reduce_seconds(), 0);
    }
    ASSERT_TRUE(coordinator_->CancelJob(job_id, "next").ok());
  }
}

TEST_F(DataParallelTest, ALostWorkerOfAnyReplicaSendsTheJobToRecovering) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  RunSteps(workers, TrueCosts(spec, 0, 1.0), 0);
  size_t silent = 0;
  while (workers[silent].assignment->replica() != 1) ++silent;
  SilenceUntilLost(workers, silent);
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RECOVERING);
  EXPECT_THAT(job->state_message(), HasSubstr(workers[silent].id));
  // A replacement: the next attempt takes all p x d workers again.
  workers[silent] = AddWorker(9);
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING);
  std::set<std::pair<int, int>> held;
  for (FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->attempt(), 2);
    held.insert({w.assignment->stage(), w.assignment->replica()});
  }
  EXPECT_EQ(held.size(), 4u);
  RunSteps(workers, TrueCosts(spec, 0, 1.0), 1);
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->steps_completed(), 2);
}

TEST_F(DataParallelTest, ReplicasThatValidateDifferentlyFailTheJob) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  ReportStepWithValidation(workers, TrueCosts(spec, 0, 1.0), [](const FakeWorker& w,
                                                                  v1::ValidationResult& v) {
    v.set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
    v.set_decision(v1::VALIDATION_DECISION_COMMITTED);
    v.set_clip_coefficient(1);
    // Replica 1's stage 1 saw another global norm.
    const bool odd = w.assignment->replica() == 1 && w.assignment->stage() == 1;
    v.set_global_grad_norm_sq(odd ? 5.0 : 4.0);
  });
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job->state_message(), HasSubstr("stage 1 replica 1 disagrees with replica 0"));
  EXPECT_THAT(job->state_message(), HasSubstr("global_grad_norm_sq 5 vs 4"));
  for (FakeWorker& w : workers) {
    w.Drain();
    EXPECT_EQ(w.aborts, 1);
  }
}

TEST_F(DataParallelTest, AgreeingReplicasGiveReplicaZerosOutcome) {
  const v1::JobSpec spec = ReplicatedSpec(2);
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  ReportStepWithValidation(workers, TrueCosts(spec, 0, 1.0), [](const FakeWorker& w,
                                                                  v1::ValidationResult& v) {
    v.set_mode(v1::VALIDATION_MODE_POST);
    v.set_decision(v1::VALIDATION_DECISION_CLIPPED);
    v.set_clip_coefficient(0.5);
    v.set_global_grad_norm_sq(16.0);
    v.set_rolled_back(w.assignment->stage() == 1);
    // Timings are each worker's own and may differ.
    v.set_rollback_seconds(w.assignment->replica() == 0 ? 0.25 : 7.0);
  });
  auto job = coordinator_->GetJob(job_id, {});
  EXPECT_EQ(job->state(), v1::JOB_STATE_RUNNING) << job->state_message();
  EXPECT_EQ(job->rollbacks_total(), 1);
  EXPECT_EQ(job->clipped_steps_total(), 1);
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  auto outcomes = store_->ListValidationOutcomes(job_id);
  ASSERT_TRUE(outcomes.ok());
  ASSERT_EQ(outcomes->size(), 1u);
  EXPECT_EQ((*outcomes)[0].rolled_back_stages_size(), 1);
  EXPECT_DOUBLE_EQ((*outcomes)[0].global_grad_norm(), 4.0);
  EXPECT_DOUBLE_EQ((*outcomes)[0].rollback_seconds(), 0.5) << "replica 0's two stages";
}

TEST_F(DataParallelTest, CheckpointIsReplicaZerosAndResumesOnlyWithItsDataParallel) {
  v1::JobSpec spec = ReplicatedSpec(2, "zb-h1", 10);
  spec.mutable_checkpoint()->set_interval_steps(2);
  spec.mutable_checkpoint()->set_directory("/ckpt/dp");
  std::string job_id;
  std::vector<FakeWorker> workers = AssignedPipeline(spec, &job_id);
  const sched::Problem truth = TrueCosts(spec, 0, 1.0);
  for (int64_t step = 0; step < 2; ++step) {
    for (FakeWorker& w : workers) {
      w.Drain();
      v1::ReportStepRequest r = w.Report(step, truth);
      // Only replica 0 writes (the worker's side); step 0: only its stage 0.
      r.set_checkpoint_written(w.assignment->replica() == 0 &&
                               (step == 1 || w.assignment->stage() == 0));
      ASSERT_TRUE(coordinator_->ReportStep(r).ok());
    }
  }
  EXPECT_EQ(coordinator_->GetJob(job_id, {})->last_checkpoint_step(), 1);
  ASSERT_TRUE(coordinator_->CancelJob(job_id, "done").ok());
  ASSERT_TRUE(coordinator_->FlushStore().ok());
  const StoredState stored = *store_->LoadAll();
  ASSERT_EQ(stored.checkpoints.size(), 1u);
  EXPECT_EQ(stored.checkpoints[0].data_parallel, 2);
  EXPECT_EQ(stored.checkpoints[0].stages_written, (std::vector<int32_t>{0, 1}));

  v1::JobSpec resume = spec;
  resume.mutable_checkpoint()->set_resume_step(1);
  resume.mutable_checkpoint()->set_directory("/ckpt/dp/");  // Same directory.
  for (int other : {0, 1, 3}) {
    resume.mutable_pipeline()->set_data_parallel(other);
    auto refused = coordinator_->SubmitJob(resume);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << other;
    EXPECT_THAT(std::string(refused.status().message()),
                ::testing::StartsWith("pipeline.data_parallel: "));
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr(absl::StrCat("job ", job_id, " wrote it with data_parallel = 2")));
  }
  resume.mutable_pipeline()->set_data_parallel(2);
  const absl::StatusOr<v1::Job> resumed = coordinator_->SubmitJob(resume);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  // Another step has no record: nothing to compare (once the job above,
  // which writes the same directory, has finished).
  ASSERT_TRUE(coordinator_->CancelJob(resumed->id(), "done").ok());
  resume.mutable_pipeline()->set_data_parallel(1);
  resume.mutable_checkpoint()->set_resume_step(3);
  EXPECT_TRUE(coordinator_->SubmitJob(resume).ok());
}

}  // namespace
}  // namespace zbpp::coordinator
