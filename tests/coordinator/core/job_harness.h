#ifndef ZBPP_TESTS_COORDINATOR_CORE_JOB_HARNESS_H_
#define ZBPP_TESTS_COORDINATOR_CORE_JOB_HARNESS_H_

// A Job (coordinator/core/job.h) and its parts driven directly, without the
// Coordinator or gRPC: the JobContext and EffectSinks of a fake coordinator
// (a FakeClock, an in-memory SQLite store behind a FaultyStore and a
// StoreWriter, a WorkerRegistry holding the workers' Sessions, a
// RendezvousStore, an observer that records what it is told and a queue of
// solve requests), fake workers (fake_worker.h) and Spawn, which runs one
// thread per worker the way Gloo's tests (test/base_test.h, BaseTest::spawn)
// run one per rank.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/core/coordinator_observer.h"
#include "coordinator/core/job.h"
#include "coordinator/core/job_context.h"
#include "coordinator/core/job_effects.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/worker_registry.h"
#include "coordinator/store/sqlite_store.h"
#include "gtest/gtest.h"
#include "testing/fake_worker.h"
#include "tests/coordinator/core/faulty_store.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator::testing {

/// Every call the core makes on its observer, as one line each ("step
/// job-1 3", "finished job-1", ...), in order. Thread-safe.
class RecordingObserver final : public CoordinatorObserver {
 public:
  void OnStep(const std::string& job_id, const v1::StepSummary& step) override;
  void OnScheduleVersion(const std::string& job_id, int64_t version) override;
  void OnResolve(const std::string& job_id, bool published) override;
  void OnValidation(const std::string& job_id, bool rolled_back, bool skipped) override;
  void OnTransport(const std::string& job_id, v1::Transport transport) override;
  void OnJobFinished(const std::string& job_id) override;

  std::vector<std::string> calls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Record(std::string call) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

/// The fixture: a fresh context per test. The jobs it makes use it; a test
/// that calls a Job from several threads holds `mu_`, as the Coordinator
/// holds its mutex.
class JobHarness : public ::testing::Test {
 protected:
  JobHarness();

  /// Job "job-<seq>" of `spec` in PENDING, stored as SubmitJob stores it.
  std::unique_ptr<Job> NewJob(const v1::JobSpec& spec, int64_t seq = 1);
  /// What Coordinator::Apply does after each call into a job: applies what
  /// it decided (ApplyJobEffects) to this context's sinks; a solve request
  /// lands in `solves_`.
  void Apply(Job& job);
  /// The oldest solve request Apply queued; null when none.
  std::unique_ptr<ResolveTask> TakeSolve();
  /// Registers `n` more workers (each at an address of its own) with open
  /// Sessions, in registration order.
  std::vector<FakeWorker> AddWorkers(int n);
  /// What Coordinator::StartAttempt does with free workers: prepares the
  /// job, takes every worker of `workers` (they say they are idle first, as
  /// a released worker's heartbeat would) and begins the attempt over Gloo.
  /// A job recovering from a fault first decides to restart, as the
  /// Coordinator does when none of the ended attempt's workers holds state
  /// (Job::DecideRecovery; docs/elastic.md). The workers' messages stay
  /// queued.
  absl::Status StartAttempt(Job& job, std::vector<FakeWorker>& workers);
  /// Each worker applies its messages and acknowledges the attempt it
  /// holds, as its heartbeat would: the job goes RUNNING.
  void AcknowledgeAll(Job& job, std::vector<FakeWorker>& workers);
  /// Job::ReportProfile of `profile` from worker index `index`, applied;
  /// the calibration it completes is solved (SolveResolve) and published
  /// (Job::FinishResolve, applied) at once. A refusal fails the test: false.
  bool SendProfile(Job& job, const v1::ReportProfileRequest& profile, int index);
  /// The job that worker `worker_id` is assigned to in the registry; empty
  /// when it is free.
  std::string HeldBy(const std::string& worker_id) const;
  /// Waits for every write queued so far, then counts the job records
  /// (Store::UpdateJob) the writer has stored.
  int64_t StoredJobUpdates();
  /// Every event queued on `watch` so far.
  static std::vector<v1::JobEvent> Events(WatchOutbox& watch);
  /// The state changes among `events`, as "OLD->NEW".
  static std::vector<std::string> StateChanges(const std::vector<v1::JobEvent>& events);

  /// Runs `body(i)` on one thread per i in [0, n) and joins them all.
  static void Spawn(int n, const std::function<void(int)>& body);
  /// One worker's side of a running attempt, on its own thread: waits for
  /// its Session messages (at most 10 s at a time), reports every step
  /// granted to it through `job.ReportStep` (under `mu_`), and returns once
  /// its attempt is aborted (the job ended) or nothing arrives. Reports are
  /// timed on `truth` (fake_pipeline.h). A refused report fails the test
  /// and ends the thread. A re-solve a report makes due is
  /// noted in `resolve_steps_` and ended unsolved (Job::FinishResolve), so
  /// the next window's may start.
  void RunWorker(Job& job, FakeWorker& worker, const sched::Problem& truth);

  absl::Mutex mu_;
  /// The steps after which a report handed RunWorker a re-solve, in order.
  std::vector<int64_t> resolve_steps_ ABSL_GUARDED_BY(mu_);
  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<FaultyStore> faulty_store_;  ///< What the writer writes to.
  std::unique_ptr<StoreWriter> writer_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<RendezvousStore> rendezvous_;
  RecordingObserver observer_;
  JobContext context_;
  EffectSinks sinks_;
  /// Solve requests applied and not taken yet (TakeSolve), oldest first.
  std::vector<std::unique_ptr<ResolveTask>> solves_;

 private:
  int registered_ = 0;  ///< Workers added so far.
};

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_CORE_JOB_HARNESS_H_
