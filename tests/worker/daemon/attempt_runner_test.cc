// The worker's attempt runner in-process (attempt_runner_fixture.h): steps,
// reports, schedule versions, aborts, checkpoint restarts and job errors.

#include "tests/worker/daemon/attempt_runner_fixture.h"

namespace zbpp::worker::attempt_runner_testing {
namespace {

TEST_F(AttemptRunnerTest, RunsItsGrantedStepsAndReportsEach) {
  const v1::JobSpec spec = TinyJob(3);
  RunToEnd(spec);
  const size_t actions = Generate("zb-h1").actions[0].size();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    const std::map<int64_t, v1::ReportStepRequest> reports = Reports(r, 1);
    ASSERT_EQ(reports.size(), 3u);
    for (const auto& [step, report] : reports) {
      EXPECT_EQ(report.worker_id(), absl::StrCat("worker-", r));
      EXPECT_EQ(report.job_id(), kJob);
      EXPECT_EQ(report.stage(), r);
      EXPECT_EQ(report.schedule_version(), 1);
      EXPECT_EQ(report.action_start_seconds_size(), static_cast<int>(actions));
      EXPECT_GT(report.step_seconds(), 0);
      // The loss is the last rank's.
      EXPECT_EQ(report.has_loss(), r == kStages - 1);
      // Evaluation after the first and the last step; the parameter sum
      // after the last.
      EXPECT_EQ(report.has_eval_loss(), r == kStages - 1 && (step == 0 || step == 2));
      EXPECT_EQ(report.has_parameter_sum(), step == 2);
      EXPECT_FALSE(report.checkpoint_written());
    }
    // The link latency to the next rank, once per attempt.
    EXPECT_EQ(reports.at(0).hop_latencies_size(), r + 1 < kStages ? 1 : 0);
    EXPECT_EQ(reports.at(1).hop_latencies_size(), 0);
    // Every report waited at most the configured report timeout.
    for (absl::Duration t : workers_[r]->reporter.timeouts()) EXPECT_EQ(t, absl::Seconds(7));
  }
}

TEST_F(AttemptRunnerTest, AProfilingAssignmentReportsItsVirtualStagesBeforeItsFirstStep) {
  const v1::JobSpec spec = TinyJob(2);
  RunToEnd(spec, /*attempt=*/1, /*profile=*/true);
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    const std::vector<v1::ReportProfileRequest> profiles = workers_[r]->reporter.profiles();
    ASSERT_EQ(profiles.size(), 1u);
    const v1::ReportProfileRequest& p = profiles[0];
    EXPECT_EQ(p.worker_id(), absl::StrCat("worker-", r));
    EXPECT_EQ(p.job_id(), kJob);
    EXPECT_EQ(p.attempt(), 1);
    EXPECT_EQ(p.stage(), r);
    EXPECT_EQ(p.replica(), 0);
    EXPECT_EQ(p.repetitions(), 3);
    ASSERT_EQ(p.virtual_stages_size(), 1);
    const v1::VirtualStageProfile& v = p.virtual_stages(0);
    EXPECT_EQ(v.virtual_stage(), r);
    EXPECT_GT(v.f_seconds(), 0);
    EXPECT_GT(v.b_seconds(), 0);
    EXPECT_GT(v.w_seconds(), 0);
    EXPECT_GT(v.m_b_bytes(), 0);
    EXPECT_GE(v.m_w_bytes(), 0);
    EXPECT_LE(v.m_w_bytes(), v.m_b_bytes());
    // The link to the next rank, measured before: on rank 0 only.
    ASSERT_EQ(p.hop_latencies_size(), r + 1 < kStages ? 1 : 0);
    if (r == 0) {
      EXPECT_EQ(p.hop_latencies(0).to_stage(), 1);
      EXPECT_GT(p.hop_latencies(0).one_way_seconds(), 0);
    }
    EXPECT_THAT(workers_[r]->reporter.profile_phases(),
                ::testing::ElementsAre(v1::WORKER_PHASE_PREPARING));
    EXPECT_THAT(workers_[r]->reporter.profile_before_steps(), ::testing::ElementsAre(true));
    // Every step says how much activation memory it held at its peak.
    const std::map<int64_t, v1::ReportStepRequest> reports = Reports(r, 1);
    ASSERT_EQ(reports.size(), 2u);
    for (const auto& [step, report] : reports) EXPECT_GT(report.peak_activation_bytes(), 0u);
  }
}

TEST_F(AttemptRunnerTest, AnAssignmentWithoutProfileSendsNone) {
  RunToEnd(TinyJob(1));
  for (int r = 0; r < kStages; ++r) EXPECT_TRUE(workers_[r]->reporter.profiles().empty());
}

// Every report says where the rank's time went (ReportStepRequest.
// breakdown): the span's parts sum to step_seconds, the gap's to the gap
// before the step, and each phase of the gap is where the worker spent it:
// the evaluation after step 0, the checkpoint after step 1 and a grant held
// back 1 s before step 2 show in the next step's gap.
TEST_F(AttemptRunnerTest, ReportsWhereEachStepsTimeAndTheGapBeforeItWent) {
  v1::JobSpec spec = TinyJob(4);
  spec.mutable_checkpoint()->set_directory(scratch_ / "checkpoints");
  spec.mutable_checkpoint()->set_interval_steps(2);
  AssignAll(spec, 1);
  Broadcast(Grant(1, 1));
  StartAll();
  for (int r = 0; r < kStages; ++r) workers_[r]->reporter.AwaitStep(1, 1);
  // Long beside the gap's other parts (a checkpoint's fsync on a loaded disk).
  const absl::Duration held = absl::Seconds(1);
  absl::SleepFor(held);
  Broadcast(Grant(1, 3));
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    const std::map<int64_t, v1::ReportStepRequest> reports = Reports(r, 1);
    ASSERT_EQ(reports.size(), 4u);
    for (const auto& [step, report] : reports) {
      SCOPED_TRACE(step);
      ASSERT_TRUE(report.has_breakdown());
      const v1::StepBreakdown& b = report.breakdown();
      EXPECT_GT(b.compute_seconds(), 0);
      EXPECT_NEAR(b.compute_seconds() + b.input_wait_seconds() + b.send_wait_seconds() +
                      b.validation_check_seconds() + b.reduction_wait_seconds() +
                      b.overhead_seconds(),
                  report.step_seconds(), 1e-9);
      const double gap_parts = b.drain_seconds() + b.validation_seconds() +
                               b.embedding_exchange_seconds() + b.optimizer_seconds() +
                               b.evaluation_seconds() +
                               b.checkpoint_seconds() + b.report_seconds() + b.grant_seconds() +
                               b.other_seconds();
      EXPECT_NEAR(gap_parts, b.gap_seconds(), 1e-9);
      if (step == 0) {  // The attempt's first step has no gap before it.
        EXPECT_EQ(b.gap_seconds(), 0);
        continue;
      }
      // Synchronous validation: an all-reduce and an update after every
      // step; every step is reported.
      EXPECT_GT(b.validation_seconds(), 0);
      EXPECT_GT(b.optimizer_seconds(), 0);
      EXPECT_GT(b.report_seconds(), 0);
      // The evaluation after step 0 only (the last step's comes after it).
      EXPECT_EQ(b.evaluation_seconds() > 0, step == 1);
      // Replica 0 of each stage writes the checkpoint of step 1.
      EXPECT_EQ(b.checkpoint_seconds() > 0, step == 2);
    }
    const v1::StepBreakdown& held_back = reports.at(2).breakdown();
    EXPECT_GE(held_back.grant_seconds(), absl::ToDoubleSeconds(held) - 0.01);
    EXPECT_GT(held_back.grant_seconds(), 0.5 * held_back.gap_seconds());
    EXPECT_LT(reports.at(3).breakdown().grant_seconds(), absl::ToDoubleSeconds(held));
  }
}

// A version published for step 2 takes over at that boundary on every rank:
// steps 0 and 1 run ZB-H1 (F, B and W per microbatch), steps 2 and 3 1F1B
// (F and a full backward).
TEST_F(AttemptRunnerTest, NewScheduleVersionTakesOverAtItsEffectiveStep) {
  const v1::JobSpec spec = TinyJob(4);
  AssignAll(spec, 1);
  Broadcast(Publish(Version(2, 2, "1f1b")));
  Broadcast(Grant(1, 3));
  StartAll();
  JoinAll();
  const int zb = static_cast<int>(Generate("zb-h1").actions[0].size());
  const int one_f_one_b = static_cast<int>(Generate("1f1b").actions[0].size());
  ASSERT_NE(zb, one_f_one_b);
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    const std::map<int64_t, v1::ReportStepRequest> reports = Reports(r, 1);
    ASSERT_EQ(reports.size(), 4u);
    for (const auto& [step, report] : reports) {
      EXPECT_EQ(report.schedule_version(), step < 2 ? 1 : 2) << step;
      EXPECT_EQ(report.action_start_seconds_size(), step < 2 ? zb : one_f_one_b) << step;
    }
  }
}

// Rank 0 is granted step 1, rank 1 is not: rank 0 blocks in step 1 waiting
// for rank 1, until the abort releases it (the abort hook ends its
// communication at once; kCommTimeout is far away). Both end OK, without a
// report of step 1.
TEST_F(AttemptRunnerTest, AbortReleasesAStepBlockedOnAPeer) {
  const v1::JobSpec spec = TinyJob(5);
  AssignAll(spec, 1);
  Broadcast(Grant(1, 0));
  workers_[0]->state.Apply(Grant(1, 1));
  StartAll();
  for (int r = 0; r < kStages; ++r) workers_[r]->reporter.AwaitStep(1, 0);
  // Rank 0 is in step 1 once it left step 0 and set its phase to RUNNING.
  while (true) {
    const v1::Heartbeat h = workers_[0]->state.Heartbeat();
    if (h.last_completed_step() == 0 && h.phase() == v1::WORKER_PHASE_RUNNING) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  Broadcast(Abort(1));
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    const std::map<int64_t, v1::ReportStepRequest> reports = Reports(r, 1);
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports.begin()->first, 0);
  }
}

// A restart from the checkpoint of step 1 replaces attempt 1 after its
// step 1; attempt 2 restores the checkpoint and runs steps 2 and 3 exactly
// as an uninterrupted run does.
TEST_F(AttemptRunnerTest, RestartFromACheckpointContinuesAsIfUninterrupted) {
  const std::string directory = scratch_ / "checkpoints";
  v1::JobSpec spec = TinyJob(4);
  RunToEnd(spec, /*attempt=*/1);
  std::map<int64_t, v1::ReportStepRequest> uninterrupted = Reports(kStages - 1, 1);

  spec.mutable_checkpoint()->set_directory(directory);
  spec.mutable_checkpoint()->set_interval_steps(2);
  AssignAll(spec, 2);
  Broadcast(Grant(2, 1));
  StartAll();
  for (int r = 0; r < kStages; ++r) workers_[r]->reporter.AwaitStep(2, 1);
  for (int r = 0; r < kStages; ++r) {
    v1::Assignment next = AssignmentOf(spec, 3, r);
    next.set_start_step(2);
    next.mutable_restore()->set_step(1);
    next.mutable_restore()->set_directory(directory);
    workers_[r]->state.Apply(Restart(2, next));
  }
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    // Replica 0 of each stage wrote the checkpoint of step 1.
    EXPECT_TRUE(Reports(r, 2).at(1).checkpoint_written()) << r;
  }

  Broadcast(Grant(3, 3));
  StartAll();
  JoinAll();
  for (int r = 0; r < kStages; ++r) ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
  const std::map<int64_t, v1::ReportStepRequest> resumed = Reports(kStages - 1, 3);
  ASSERT_EQ(resumed.size(), 2u);
  for (int64_t step : {2, 3}) {
    SCOPED_TRACE(step);
    ASSERT_TRUE(resumed.at(step).has_loss());
    EXPECT_NEAR(resumed.at(step).loss(), uninterrupted.at(step).loss(), 1e-5);
  }
  EXPECT_NEAR(resumed.at(3).parameter_sum(), uninterrupted.at(3).parameter_sum(), 1e-4);
}

// The coordinator does not take rank 0's report of step 1: rank 0's attempt
// fails naming the step (not a job error: another attempt may pass); rank 1,
// blocked on rank 0 in step 2, ends when the coordinator aborts the attempt.
TEST_F(AttemptRunnerTest, FailedReportFailsTheAttemptNamingTheStep) {
  workers_[0]->reporter.FailStep(1);
  AssignAll(TinyJob(4), 1);
  Broadcast(Grant(1, 3));
  StartAll();
  // Rank 0's attempt ends with its failed report; the coordinator then
  // aborts the attempt everywhere.
  threads_[0].join();
  Broadcast(Abort(1));
  threads_[1].join();
  threads_.clear();
  const AttemptOutcome& failed = outcomes_[0];
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable) << failed.status;
  EXPECT_THAT(failed.status.message(), HasSubstr("reporting step 1: coordinator went away"));
  EXPECT_FALSE(failed.job_error);
  EXPECT_EQ(Reports(0, 1).size(), 1u);
  EXPECT_TRUE(outcomes_[1].status.ok()) << outcomes_[1].status;
  // Rank 0 holds step 1's update and its report of step 1, undelivered,
  // for a restarted coordinator to record (HeldState.step_report).
  const v1::HeldState& held = workers_[0]->held.state;
  EXPECT_EQ(held.step(), 1);
  ASSERT_TRUE(held.has_step_report());
  EXPECT_EQ(held.step_report().step(), 1);
  EXPECT_EQ(held.step_report().stage(), 0);
}

// A corpus file that is not there fails the attempt as an error of the job,
// naming the path, before any group is joined.
TEST_F(AttemptRunnerTest, MissingTextFileIsAJobErrorNamingThePath) {
  v1::JobSpec spec = TinyJob(2);
  const std::string missing = scratch_ / "no-such-corpus.txt";
  spec.mutable_dataset()->set_text_file(missing);
  Worker& w = *workers_[0];
  w.state.Apply(Assign(AssignmentOf(spec, 1, 0)));
  std::optional<v1::Assignment> a = w.state.WaitForAssignment(absl::ZeroDuration());
  ASSERT_TRUE(a.has_value());
  const AttemptOutcome outcome = RunAttempt(*a, w.env, w.held);
  EXPECT_FALSE(outcome.status.ok());
  EXPECT_THAT(outcome.status.message(), HasSubstr(missing));
  EXPECT_TRUE(outcome.job_error);
  EXPECT_TRUE(w.reporter.reports().empty());
}

// A job cancelled while its token file is scanned frees the worker at
// once: the load stops, no group is joined, and the attempt ends without
// an error (before, preparing ran on to the join and the latency probe).
TEST_F(AttemptRunnerTest, CancelledWhilePreparingStopsBeforeAnyJoin) {
  v1::JobSpec spec = TinyJob(2);
  std::string ids;
  for (int i = 0; i < 100000; ++i) ids += std::string{static_cast<char>(i % 200), '\0'};
  testing::WriteFile(scratch_ / "train.bin", ids);
  spec.mutable_dataset()->mutable_tokens()->set_path(scratch_ / "train.bin");
  int joins = 0;
  Worker& w = *workers_[0];
  w.env.communicators = [&joins](const v1::Assignment&, const std::string&, int, int)
      -> absl::StatusOr<std::unique_ptr<Communicator>> {
    ++joins;
    return absl::UnavailableError("no peer in this test");
  };
  w.state.Apply(Assign(AssignmentOf(spec, 1, 0)));
  std::optional<v1::Assignment> a = w.state.WaitForAssignment(absl::ZeroDuration());
  ASSERT_TRUE(a.has_value());
  w.state.Apply(Abort(1));  // the user cancels while the worker prepares
  const AttemptOutcome outcome = RunAttempt(*a, w.env, w.held);
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(joins, 0);
  EXPECT_TRUE(w.reporter.reports().empty());
}

// The assignment's transport picks the factory, for both groups, and the
// error of a join names it. Each factory here refuses, recording its calls
// (the worker's device is CUDA only in name: the join comes before any
// tensor lives there).
TEST_F(AttemptRunnerTest, TheAssignmentsTransportPicksTheFactoryAndTheErrorNamesIt) {
  std::vector<std::string> calls;
  auto refusing = [&calls](const std::string& name) -> CommunicatorFactory {
    return [&calls, name](const v1::Assignment&, const std::string& group, int, int)
               -> absl::StatusOr<std::unique_ptr<Communicator>> {
      calls.push_back(absl::StrCat(name, " ", group));
      return absl::UnavailableError(absl::StrCat(name, " refused"));
    };
  };
  Worker& w = *workers_[0];
  w.env.communicators = refusing("gloo");
  w.env.nccl_communicators = refusing("nccl");
  w.env.device = c10::Device(c10::kCUDA, 0);
  for (auto [transport, want] :
       {std::pair{v1::TRANSPORT_NCCL, "joining the pipeline's NCCL group: nccl refused"},
        std::pair{v1::TRANSPORT_GLOO, "joining the pipeline's Gloo group: gloo refused"},
        std::pair{v1::TRANSPORT_AUTO, "joining the pipeline's Gloo group: gloo refused"}}) {
    SCOPED_TRACE(v1::Transport_Name(transport));
    calls.clear();
    v1::Assignment a = AssignmentOf(TinyJob(2), 1, 0);
    a.set_transport(transport);
    const AttemptOutcome outcome = RunAttempt(a, w.env, w.held);
    EXPECT_EQ(outcome.status.code(), absl::StatusCode::kUnavailable) << outcome.status;
    EXPECT_EQ(outcome.status.message(), want);
    EXPECT_FALSE(outcome.job_error);
    EXPECT_THAT(calls, ::testing::ElementsAre(absl::StrCat(
                           transport == v1::TRANSPORT_NCCL ? "nccl" : "gloo", " pipeline0")));
  }
  // The data-parallel group goes over the same transport.
  v1::JobSpec two_replicas = TinyJob(2);
  two_replicas.mutable_pipeline()->set_data_parallel(2);
  calls.clear();
  w.env.nccl_communicators = [&calls](const v1::Assignment& a, const std::string& group,
                                      int rank, int size)
      -> absl::StatusOr<std::unique_ptr<Communicator>> {
    calls.push_back(absl::StrCat("nccl ", group, " ", rank, "/", size));
    if (group == "pipeline1") return std::unique_ptr<Communicator>();  // Never used.
    return absl::UnavailableError("nccl refused");
  };
  v1::Assignment a = AssignmentOf(two_replicas, 1, 0);
  a.set_replica(1);
  a.set_transport(v1::TRANSPORT_NCCL);
  const AttemptOutcome outcome = RunAttempt(a, w.env, w.held);
  EXPECT_EQ(outcome.status.message(), "joining the data-parallel NCCL group: nccl refused");
  EXPECT_THAT(calls, ::testing::ElementsAre("nccl pipeline1 0/2", "nccl replicas0 1/2"));
}

// NCCL on a CPU worker, or in a binary without NCCL, fails the attempt
// before any group is joined, saying why.
TEST_F(AttemptRunnerTest, NcclWithoutAGpuOrWithoutNcclIsAFailedPrecondition) {
  int joins = 0;
  Worker& w = *workers_[0];
  w.env.communicators = w.env.nccl_communicators =
      [&joins](const v1::Assignment&, const std::string&, int, int)
      -> absl::StatusOr<std::unique_ptr<Communicator>> {
    ++joins;
    return absl::UnavailableError("joined");
  };
  v1::Assignment a = AssignmentOf(TinyJob(2), 1, 0);
  a.set_transport(v1::TRANSPORT_NCCL);
  AttemptOutcome outcome = RunAttempt(a, w.env, w.held);  // env.device: cpu.
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition) << outcome.status;
  EXPECT_EQ(outcome.status.message(),
            "the assignment's transport is NCCL, which needs a CUDA device; this worker runs "
            "on cpu");
  w.env.device = c10::Device(c10::kCUDA, 0);
  w.env.nccl_communicators = nullptr;
  outcome = RunAttempt(a, w.env, w.held);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition) << outcome.status;
  EXPECT_EQ(outcome.status.message(),
            "transport NCCL: this worker binary was built without NCCL");
  EXPECT_EQ(joins, 0);
  EXPECT_TRUE(w.reporter.reports().empty());
}

// An abort that keeps state (a fault elsewhere: docs/elastic.md) leaves each
// worker holding its stage at its last validated step and saying so in its
// heartbeat; the next attempt resumes from memory there and runs the
// remaining steps exactly as an uninterrupted run does.

}  // namespace
}  // namespace zbpp::worker::attempt_runner_testing
