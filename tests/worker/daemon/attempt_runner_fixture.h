#ifndef ZBPP_TESTS_WORKER_DAEMON_ATTEMPT_RUNNER_FIXTURE_H_
#define ZBPP_TESTS_WORKER_DAEMON_ATTEMPT_RUNNER_FIXTURE_H_

// The worker's attempt runner in-process, for its tests
// (attempt_runner_test.cc, attempt_runner_elastic_test.cc): two ranks on
// threads, each with its own ControlState fed the coordinator's Session
// messages by the test, a recording StepReporter in place of
// WorkerService.ReportStep, and the in-process communicator
// (worker/comm/in_process_communicator.h) in place of Gloo over the
// coordinator's rendezvous store.

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

namespace zbpp::worker::attempt_runner_testing {

using ::testing::HasSubstr;
using ::zbpp::worker::testing::TestDirectory;
using ::zbpp::worker::testing::TinyJob;

// TinyJob's p and m.
inline constexpr int kStages = 2;
inline constexpr int kMicrobatches = 4;
inline constexpr char kJob[] = "job-1";
// Long enough that a step blocked on a peer never gives up on its own in a
// test: an abort must release it (a hang fails the test by ctest's timeout).
inline const absl::Duration kCommTimeout = absl::Minutes(10);

// `name` for TinyJob's p stages and `microbatches`; with `reduce`, one
// REDUCE_GRAD per virtual stage after its last W (data parallelism).
inline sched::Schedule Generate(const std::string& name, int microbatches = kMicrobatches,
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

inline v1::ScheduleVersion Version(int64_t version, int64_t effective_step,
                                   const std::string& name, int microbatches = kMicrobatches,
                                   bool reduce = false) {
  v1::ScheduleVersion v;
  v.set_job_id(kJob);
  v.set_version(version);
  v.set_effective_step(effective_step);
  *v.mutable_schedule() = ScheduleToProto(Generate(name, microbatches, reduce));
  return v;
}

inline v1::Assignment AssignmentOf(const v1::JobSpec& spec, int64_t attempt, int stage) {
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

inline v1::SessionResponse Assign(const v1::Assignment& assignment) {
  v1::SessionResponse m;
  *m.mutable_assignment() = assignment;
  return m;
}

inline v1::SessionResponse Publish(const v1::ScheduleVersion& version) {
  v1::SessionResponse m;
  *m.mutable_schedule() = version;
  return m;
}

inline v1::SessionResponse Grant(int64_t attempt, int64_t through_step) {
  v1::SessionResponse m;
  m.mutable_grant()->set_job_id(kJob);
  m.mutable_grant()->set_attempt(attempt);
  m.mutable_grant()->set_through_step(through_step);
  return m;
}

inline v1::SessionResponse Abort(int64_t attempt) {
  v1::SessionResponse m;
  m.mutable_command()->set_job_id(kJob);
  m.mutable_command()->set_attempt(attempt);
  m.mutable_command()->mutable_abort()->set_reason("job cancelled by user");
  return m;
}

// The abort of an attempt ended by a fault elsewhere (docs/elastic.md).
inline v1::SessionResponse AbortKeepingState(int64_t attempt) {
  v1::SessionResponse m = Abort(attempt);
  m.mutable_command()->mutable_abort()->set_reason("worker w-9 lost");
  m.mutable_command()->mutable_abort()->set_keep_state(true);
  return m;
}

inline v1::SessionResponse Restart(int64_t attempt, const v1::Assignment& next) {
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
        if (!outcomes_[r].status.ok()) {
          std::cerr << "rank " << r << ": " << outcomes_[r].status << "\n";
        }
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

}  // namespace zbpp::worker::attempt_runner_testing

#endif  // ZBPP_TESTS_WORKER_DAEMON_ATTEMPT_RUNNER_FIXTURE_H_
