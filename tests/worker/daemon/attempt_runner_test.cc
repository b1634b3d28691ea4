// The worker's attempt runner in-process: two ranks on threads, each with
// its own ControlState fed the coordinator's Session messages by the test,
// a recording StepReporter in place of WorkerService.ReportStep, and the
// in-process communicator (worker/comm/in_process_communicator.h) in place
// of Gloo over the coordinator's rendezvous store.

#include "worker/daemon/attempt_runner.h"

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/schedule_proto.h"
#include "scheduler/problem.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"
#include "tests/worker/daemon/tiny_job.h"
#include "tests/worker/data/test_files.h"
#include "worker/comm/in_process_communicator.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;
using ::zbpp::worker::testing::TestDirectory;
using ::zbpp::worker::testing::TinyJob;

// TinyJob's p and m.
constexpr int kStages = 2;
constexpr int kMicrobatches = 4;
constexpr char kJob[] = "job-1";
// Long enough that a step blocked on a peer never gives up on its own in a
// test: an abort must release it (a hang fails the test by ctest's timeout).
const absl::Duration kCommTimeout = absl::Minutes(10);

// `name` for TinyJob's p stages and `microbatches`; with `reduce`, one
// REDUCE_GRAD per virtual stage after its last W (data parallelism).
sched::Schedule Generate(const std::string& name, int microbatches = kMicrobatches,
                         bool reduce = false) {
  const sched::Problem problem =
      sched::Problem::Uniform(kStages, 1, microbatches, sched::VirtualStageCost{}, 0.0);
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (reduce) {
    schedule = sched::PlaceReductions(problem, *schedule,
                                      sched::ReducePlacement::kAfterLastBackward);
    EXPECT_TRUE(schedule.ok()) << schedule.status();
  }
  return *schedule;
}

v1::ScheduleVersion Version(int64_t version, int64_t effective_step, const std::string& name,
                            int microbatches = kMicrobatches, bool reduce = false) {
  v1::ScheduleVersion v;
  v.set_job_id(kJob);
  v.set_version(version);
  v.set_effective_step(effective_step);
  *v.mutable_schedule() = ScheduleToProto(Generate(name, microbatches, reduce));
  return v;
}

v1::Assignment AssignmentOf(const v1::JobSpec& spec, int64_t attempt, int stage) {
  v1::Assignment a;
  a.set_job_id(kJob);
  a.set_attempt(attempt);
  *a.mutable_spec() = spec;
  a.set_stage(stage);
  a.add_virtual_stages(stage);
  a.set_rendezvous_scope(absl::StrCat(kJob, "/", attempt));
  *a.mutable_schedule() = Version(1, 0, "zb-h1");
  return a;
}

v1::SessionResponse Assign(const v1::Assignment& assignment) {
  v1::SessionResponse m;
  *m.mutable_assignment() = assignment;
  return m;
}

v1::SessionResponse Publish(const v1::ScheduleVersion& version) {
  v1::SessionResponse m;
  *m.mutable_schedule() = version;
  return m;
}

v1::SessionResponse Grant(int64_t attempt, int64_t through_step) {
  v1::SessionResponse m;
  m.mutable_grant()->set_job_id(kJob);
  m.mutable_grant()->set_attempt(attempt);
  m.mutable_grant()->set_through_step(through_step);
  return m;
}

v1::SessionResponse Abort(int64_t attempt) {
  v1::SessionResponse m;
  m.mutable_command()->set_job_id(kJob);
  m.mutable_command()->set_attempt(attempt);
  m.mutable_command()->mutable_abort()->set_reason("job cancelled by user");
  return m;
}

// The abort of an attempt ended by a fault elsewhere (docs/elastic.md).
v1::SessionResponse AbortKeepingState(int64_t attempt) {
  v1::SessionResponse m = Abort(attempt);
  m.mutable_command()->mutable_abort()->set_reason("worker w-9 lost");
  m.mutable_command()->mutable_abort()->set_keep_state(true);
  return m;
}

v1::SessionResponse Restart(int64_t attempt, const v1::Assignment& next) {
  v1::SessionResponse m;
  m.mutable_command()->set_job_id(kJob);
  m.mutable_command()->set_attempt(attempt);
  *m.mutable_command()->mutable_restart()->mutable_assignment() = next;
  return m;
}

/// Records every report; fails the report of `fail_step` (when >= 0) with
/// Unavailable, as a coordinator that went away would.
class RecordingReporter : public StepReporter {
 public:
  explicit RecordingReporter(std::string worker_id) : worker_id_(std::move(worker_id)) {}

  std::string worker_id() const override { return worker_id_; }

  absl::Status ReportStep(const v1::ReportStepRequest& report, absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    timeouts_.push_back(timeout);
    if (report.step() == fail_step_) return absl::UnavailableError("coordinator went away");
    reports_.push_back(report);
    return absl::OkStatus();
  }

  absl::Status ReportProfile(const v1::ReportProfileRequest& profile,
                             absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    timeouts_.push_back(timeout);
    profiles_.push_back(profile);
    // What the worker said it was doing while it sent the profile.
    if (state_ != nullptr) profile_phases_.push_back(state_->Heartbeat().phase());
    profile_before_steps_.push_back(reports_.empty());
    return absl::OkStatus();
  }

  /// The worker's ControlState, whose phase ReportProfile records.
  void WatchPhase(const ControlState* state) {
    absl::MutexLock lock(&mu_);
    state_ = state;
  }

  std::vector<v1::ReportProfileRequest> profiles() const {
    absl::MutexLock lock(&mu_);
    return profiles_;
  }
  std::vector<v1::WorkerPhase> profile_phases() const {
    absl::MutexLock lock(&mu_);
    return profile_phases_;
  }
  std::vector<bool> profile_before_steps() const {
    absl::MutexLock lock(&mu_);
    return profile_before_steps_;
  }

  void FailStep(int64_t step) {
    absl::MutexLock lock(&mu_);
    fail_step_ = step;
  }

  /// Blocks until `step` of `attempt` was reported.
  void AwaitStep(int64_t attempt, int64_t step) {
    absl::MutexLock lock(&mu_);
    auto reported = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      for (const v1::ReportStepRequest& r : reports_) {
        if (r.attempt() == attempt && r.step() == step) return true;
      }
      return false;
    };
    mu_.Await(absl::Condition(&reported));
  }

  std::vector<v1::ReportStepRequest> reports() const {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  std::vector<absl::Duration> timeouts() const {
    absl::MutexLock lock(&mu_);
    return timeouts_;
  }

 private:
  const std::string worker_id_;
  mutable absl::Mutex mu_;
  std::vector<v1::ReportStepRequest> reports_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> timeouts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReportProfileRequest> profiles_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WorkerPhase> profile_phases_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> profile_before_steps_ ABSL_GUARDED_BY(mu_);
  const ControlState* state_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t fail_step_ ABSL_GUARDED_BY(mu_) = -1;
};

/// In-process groups, one per (rendezvous scope, group): the first rank to
/// join creates it, every rank takes its own communicator.
class InProcessGroups {
 public:
  CommunicatorFactory Factory() {
    return [this](const v1::Assignment& a, const std::string& group, int rank,
                  int size) -> absl::StatusOr<std::unique_ptr<Communicator>> {
      absl::MutexLock lock(&mu_);
      std::vector<std::unique_ptr<Communicator>>& comms =
          groups_[a.rendezvous_scope() + "/" + group];
      if (comms.empty()) comms = CreateInProcessGroup(size);
      return std::move(comms[rank]);
    };
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::vector<std::unique_ptr<Communicator>>> groups_ ABSL_GUARDED_BY(mu_);
};

/// One worker: the state its session thread would feed, its reporter, and
/// the environment its training thread runs attempts with.
struct Worker {
  explicit Worker(int rank, CommunicatorFactory communicators, const std::string& cache_dir)
      : reporter(absl::StrCat("worker-", rank)) {
    env.reporter = &reporter;
    env.state = &state;
    env.communicators = std::move(communicators);
    env.cache_dir = cache_dir;
    env.comm_timeout = kCommTimeout;
    env.report_timeout = absl::Seconds(7);
    reporter.WatchPhase(&state);
  }
  ControlState state;
  RecordingReporter reporter;
  AttemptEnvironment env;
  HeldStage held;
};

class AttemptRunnerTest : public ::testing::Test {
 protected:
  AttemptRunnerTest() {
    for (int r = 0; r < kStages; ++r) {
      workers_.push_back(std::make_unique<Worker>(r, groups_.Factory(), scratch_ / "cache"));
    }
  }
  ~AttemptRunnerTest() override {
    for (std::thread& t : threads_) t.join();
  }

  /// What the coordinator sends every worker.
  void Broadcast(const v1::SessionResponse& message) {
    for (auto& w : workers_) w->state.Apply(message);
  }
  /// Assigns attempt `attempt` of `spec` to every rank (stage = rank),
  /// asking for the calibration profile when `profile`.
  void AssignAll(const v1::JobSpec& spec, int64_t attempt, bool profile = false) {
    for (int r = 0; r < kStages; ++r) {
      v1::Assignment assignment = AssignmentOf(spec, attempt, r);
      assignment.set_profile(profile);
      workers_[r]->state.Apply(Assign(assignment));
    }
  }

  /// Starts every worker's training thread on its next assignment, as
  /// zbpp-worker's loop does: run it, then Finish.
  void StartAll() {
    const int n = static_cast<int>(workers_.size());
    outcomes_.assign(n, AttemptOutcome{});
    for (int r = 0; r < n; ++r) {
      threads_.emplace_back([this, r] {
        Worker& w = *workers_[r];
        std::optional<v1::Assignment> a = w.state.WaitForAssignment(absl::Minutes(1));
        if (!a.has_value()) {
          outcomes_[r].status = absl::DeadlineExceededError("no assignment");
          return;
        }
        outcomes_[r] = RunAttempt(*a, w.env, w.held);
        // Said at once: a failed rank leaves its peers blocked.
        if (!outcomes_[r].status.ok()) std::cerr << "rank " << r << ": " << outcomes_[r].status << "\n";
        w.state.Finish(a->job_id(), a->attempt());
      });
    }
  }
  void JoinAll() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  /// Runs attempt `attempt` of `spec` with every step granted to the end.
  void RunToEnd(const v1::JobSpec& spec, int64_t attempt = 1, bool profile = false) {
    AssignAll(spec, attempt, profile);
    Broadcast(Grant(attempt, spec.steps() - 1));
    StartAll();
    JoinAll();
    for (int r = 0; r < kStages; ++r) ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
  }

  /// The reports of `rank` for `attempt`, by step.
  std::map<int64_t, v1::ReportStepRequest> Reports(int rank, int64_t attempt) const {
    std::map<int64_t, v1::ReportStepRequest> by_step;
    for (const v1::ReportStepRequest& r : workers_[rank]->reporter.reports()) {
      if (r.attempt() != attempt) continue;
      EXPECT_TRUE(by_step.emplace(r.step(), r).second) << "two reports of step " << r.step();
    }
    return by_step;
  }

  /// Adds a second replica's p workers and returns TinyJob(4) with two
  /// replicas: worker i then runs stage i % p of replica i / p.
  v1::JobSpec AddSecondReplica() {
    for (int r = kStages; r < 2 * kStages; ++r) {
      workers_.push_back(std::make_unique<Worker>(r, groups_.Factory(), scratch_ / "cache"));
    }
    v1::JobSpec spec = TinyJob(4);
    spec.mutable_pipeline()->set_data_parallel(2);
    return spec;
  }
  /// Worker i's assignment of `attempt` of the two-replica `spec`, its
  /// schedule reducing the gradients over the replicas.
  static v1::Assignment ReplicaAssignment(const v1::JobSpec& spec, int64_t attempt, int i) {
    v1::Assignment a = AssignmentOf(spec, attempt, i % kStages);
    a.set_replica(i / kStages);
    *a.mutable_schedule() = Version(1, 0, "zb-h1", kMicrobatches, /*reduce=*/true);
    return a;
  }

  TestDirectory scratch_;
  InProcessGroups groups_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<AttemptOutcome> outcomes_;
  std::vector<std::thread> threads_;
};

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
// back 250 ms before step 2 show in the next step's gap.
TEST_F(AttemptRunnerTest, ReportsWhereEachStepsTimeAndTheGapBeforeItWent) {
  v1::JobSpec spec = TinyJob(4);
  spec.mutable_checkpoint()->set_directory(scratch_ / "checkpoints");
  spec.mutable_checkpoint()->set_interval_steps(2);
  AssignAll(spec, 1);
  Broadcast(Grant(1, 1));
  StartAll();
  for (int r = 0; r < kStages; ++r) workers_[r]->reporter.AwaitStep(1, 1);
  const absl::Duration held = absl::Milliseconds(250);
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
                               b.optimizer_seconds() + b.evaluation_seconds() +
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
TEST_F(AttemptRunnerTest, AnAttemptResumedFromMemoryEndsAsIfUninterrupted) {
  const v1::JobSpec spec = TinyJob(4);
  RunToEnd(spec, /*attempt=*/1);
  const std::map<int64_t, v1::ReportStepRequest> uninterrupted = Reports(kStages - 1, 1);

  AssignAll(spec, 2);
  Broadcast(Grant(2, 1));
  StartAll();
  for (int r = 0; r < kStages; ++r) workers_[r]->reporter.AwaitStep(2, 1);
  Broadcast(AbortKeepingState(2));
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    const v1::Heartbeat heartbeat = workers_[r]->state.Heartbeat();
    ASSERT_TRUE(heartbeat.has_held());
    EXPECT_EQ(heartbeat.held().job_id(), kJob);
    EXPECT_EQ(heartbeat.held().attempt(), 2);
    EXPECT_EQ(heartbeat.held().stage(), r);
    EXPECT_EQ(heartbeat.held().step(), 1);
    EXPECT_NE(workers_[r]->held.trainer, nullptr);
  }

  for (int r = 0; r < kStages; ++r) {
    v1::Assignment next = AssignmentOf(spec, 3, r);
    next.set_start_step(2);
    next.set_resume_from_memory(true);
    workers_[r]->state.Apply(Assign(next));
  }
  Broadcast(Grant(3, 3));
  StartAll();
  JoinAll();
  for (int r = 0; r < kStages; ++r) {
    SCOPED_TRACE(r);
    ASSERT_TRUE(outcomes_[r].status.ok()) << outcomes_[r].status;
    EXPECT_FALSE(workers_[r]->state.Heartbeat().has_held()) << "taken by attempt 3";
  }
  const std::map<int64_t, v1::ReportStepRequest> resumed = Reports(kStages - 1, 3);
  ASSERT_EQ(resumed.size(), 2u);
  for (int64_t step : {2, 3}) {
    SCOPED_TRACE(step);
    ASSERT_TRUE(resumed.at(step).has_loss());
    EXPECT_EQ(resumed.at(step).loss(), uninterrupted.at(step).loss());
  }
  EXPECT_EQ(resumed.at(3).parameter_sum(), uninterrupted.at(3).parameter_sum());
}

// resume_from_memory on a worker that holds nothing of the job fails the
// attempt saying what it holds, and is no job error (the coordinator then
// restarts from the checkpoint).
TEST_F(AttemptRunnerTest, ResumingFromMemoryThatIsNotHeldFailsRetryably) {
  v1::Assignment a = AssignmentOf(TinyJob(4), 1, 0);
  a.set_start_step(2);
  a.set_resume_from_memory(true);
  Worker& w = *workers_[0];
  w.state.Apply(Assign(a));
  ASSERT_TRUE(w.state.WaitForAssignment(absl::Seconds(5)).has_value());
  const AttemptOutcome outcome = RunAttempt(a, w.env, w.held);
  EXPECT_TRUE(absl::IsFailedPrecondition(outcome.status)) << outcome.status;
  EXPECT_THAT(std::string(outcome.status.message()),
              ::testing::HasSubstr("holds no stage state, not stage 0 of job job-1 at step 1"));
  EXPECT_FALSE(outcome.job_error);
}

// A degrade (docs/elastic.md): two steps at 2 stages x 2 replicas, then the
// replicas' workers of replica 0 alone resume from memory with both
// replicas' microbatches (m' = 2m, offset 0). The same samples make the same
// mean gradient: losses and parameters match the uninterrupted 2 x 2 run
// up to the order of the floating-point sums.
TEST_F(AttemptRunnerTest, ADegradedReplicaTakesTheWholeBatchAndTrainsAsTheFullWidthRun) {
  const v1::JobSpec spec = AddSecondReplica();
  auto assign = [&](int64_t attempt, int i) { return ReplicaAssignment(spec, attempt, i); };
  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(1, i)));
  Broadcast(Grant(1, 3));
  StartAll();
  JoinAll();
  for (int i = 0; i < 2 * kStages; ++i) ASSERT_TRUE(outcomes_[i].status.ok()) << outcomes_[i].status;
  // The last stage's workers of both replicas.
  const std::map<int64_t, v1::ReportStepRequest> full0 = Reports(kStages - 1, 1);
  const std::map<int64_t, v1::ReportStepRequest> full1 = Reports(2 * kStages - 1, 1);

  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(2, i)));
  Broadcast(Grant(2, 1));
  StartAll();
  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->reporter.AwaitStep(2, 1);
  Broadcast(AbortKeepingState(2));
  JoinAll();
  // Replica 1 is lost; replica 0 resumes alone with the global batch.
  for (int i = 0; i < kStages; ++i) {
    v1::Assignment next = assign(3, i);
    next.set_start_step(2);
    next.set_resume_from_memory(true);
    next.set_replicas(1);
    next.set_microbatch_offset(0);
    next.set_microbatches(2 * kMicrobatches);
    *next.mutable_schedule() = Version(1, 0, "zb-h1", 2 * kMicrobatches);
    workers_[i]->state.Apply(Assign(next));
  }
  Broadcast(Grant(3, 3));
  workers_.resize(kStages);
  StartAll();
  JoinAll();
  for (int i = 0; i < kStages; ++i) ASSERT_TRUE(outcomes_[i].status.ok()) << outcomes_[i].status;
  const std::map<int64_t, v1::ReportStepRequest> degraded = Reports(kStages - 1, 3);
  ASSERT_EQ(degraded.size(), 2u);
  for (int64_t step : {2, 3}) {
    SCOPED_TRACE(step);
    ASSERT_TRUE(degraded.at(step).has_loss());
    // Each replica's loss is its mean over m microbatches; the degraded
    // replica's is the mean over all 2m.
    const double mean = (full0.at(step).loss() + full1.at(step).loss()) / 2;
    EXPECT_NEAR(degraded.at(step).loss(), mean, 1e-5 * std::abs(mean));
  }
  const double reference = full0.at(3).parameter_sum();
  EXPECT_NEAR(degraded.at(3).parameter_sum(), reference, 1e-5 * std::abs(reference));
  std::cout << "degraded vs full-width parameter sum: " << degraded.at(3).parameter_sum()
            << " vs " << reference << " (relative difference "
            << std::abs(degraded.at(3).parameter_sum() - reference) / std::abs(reference)
            << ")\n";
}

// A heal (docs/elastic.md): after a degrade to replica 0 alone for step 2,
// replica 1's workers come back with stale state (held at step 1) and take
// replica 0's state over the data-parallel group before step 3: both
// replicas end on the same parameters, bit for bit, and on the full-width
// run's up to the order of the floating-point sums.
TEST_F(AttemptRunnerTest, AHealedReplicaTakesItsPeersStateBitForBit) {
  const v1::JobSpec spec = AddSecondReplica();
  auto assign = [&](int64_t attempt, int i) { return ReplicaAssignment(spec, attempt, i); };
  auto run = [&](int64_t attempt, int64_t through_step, bool keep) {
    Broadcast(Grant(attempt, through_step));
    StartAll();
    if (keep) {
      for (auto& w : workers_) w->reporter.AwaitStep(attempt, through_step);
      Broadcast(AbortKeepingState(attempt));
    }
    JoinAll();
    for (size_t i = 0; i < workers_.size(); ++i) {
      ASSERT_TRUE(outcomes_[i].status.ok()) << i << ": " << outcomes_[i].status;
    }
  };
  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(1, i)));
  ASSERT_NO_FATAL_FAILURE(run(1, 3, /*keep=*/false));
  const double reference = Reports(kStages - 1, 1).at(3).parameter_sum();

  for (int i = 0; i < 2 * kStages; ++i) workers_[i]->state.Apply(Assign(assign(2, i)));
  ASSERT_NO_FATAL_FAILURE(run(2, 1, /*keep=*/true));
  // Step 2 on replica 0 alone, with the whole batch.
  std::vector<std::unique_ptr<Worker>> replica1;
  for (int i = kStages; i < 2 * kStages; ++i) replica1.push_back(std::move(workers_[i]));
  workers_.resize(kStages);
  for (int i = 0; i < kStages; ++i) {
    v1::Assignment a = assign(3, i);
    a.set_start_step(2);
    a.set_resume_from_memory(true);
    a.set_replicas(1);
    a.set_microbatches(2 * kMicrobatches);
    *a.mutable_schedule() = Version(1, 0, "zb-h1", 2 * kMicrobatches);
    workers_[i]->state.Apply(Assign(a));
  }
  ASSERT_NO_FATAL_FAILURE(run(3, 2, /*keep=*/true));
  // Step 3 at two replicas again: replica 1 held step 1, not 2.
  for (auto& w : replica1) workers_.push_back(std::move(w));
  for (int i = 0; i < 2 * kStages; ++i) {
    v1::Assignment a = assign(4, i);
    a.set_start_step(3);
    a.set_resume_from_memory(i < kStages);
    a.set_receive_state(true);
    a.set_state_source_replica(0);
    workers_[i]->state.Apply(Assign(a));
  }
  ASSERT_NO_FATAL_FAILURE(run(4, 3, /*keep=*/false));
  const double healed0 = Reports(kStages - 1, 4).at(3).parameter_sum();
  const double healed1 = Reports(2 * kStages - 1, 4).at(3).parameter_sum();
  EXPECT_EQ(healed1, healed0);
  EXPECT_NEAR(healed0, reference, 1e-5 * std::abs(reference));
}

}  // namespace
}  // namespace zbpp::worker
