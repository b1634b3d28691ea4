#ifndef ZBPP_TESTS_COORDINATOR_COORDINATOR_FIXTURE_H_
#define ZBPP_TESTS_COORDINATOR_COORDINATOR_FIXTURE_H_

// Shared by the coordinator core's tests: the Coordinator with a FakeClock
// and an in-memory SQLite store, and fake workers (fake_worker.h) that call
// the core directly and drain their Session outboxes without blocking (no
// gRPC, no sleeps).

#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/pipeline_shape.h"
#include "common/clock.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/store/sqlite_store.h"
#include "gtest/gtest.h"
#include "scheduler/problem.h"
#include "testing/fake_pipeline.h"
#include "testing/fake_worker.h"
#include "tests/coordinator/core/faulty_store.h"

namespace zbpp::coordinator::testing {

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(":memory:"); }

  void Start(const std::string& path) {
    coordinator_.reset();
    // Closed before it is opened again: a file store holds its lock.
    faulty_store_.reset();
    store_.reset();
    store_ = *SqliteStore::Create({path});
    faulty_store_ = std::make_unique<FaultyStore>(store_.get());
    Coordinator::Options options;
    options.clock = &clock_;
    options.store = faulty_store_.get();
    // Failing writes are retried within milliseconds, and given up 100 ms
    // into the destructor.
    options.store_retry_initial_backoff = absl::Milliseconds(1);
    options.store_retry_max_backoff = absl::Milliseconds(10);
    options.store_drain_timeout = absl::Milliseconds(100);
    options.heartbeat_interval_seconds = 1;
    options.heartbeat_timeout_seconds = 5;
    options.resolve_on_background_thread = background_resolves_;
    options.validation_policy = validation_policy_;
    options.max_workers = max_workers_;
    options.lost_worker_retention_seconds = lost_worker_retention_seconds_;
    options.retained_finished_jobs = retained_finished_jobs_;
    options.observer = observer_;
    options.before_resolve_publish_for_testing = [this](const std::string& id) {
      if (resolve_hook_) resolve_hook_(id);
    };
    auto created = Coordinator::Create(options);
    ASSERT_TRUE(created.ok()) << created.status();
    coordinator_ = *std::move(created);
    ASSERT_TRUE(coordinator_->Recover().ok());
  }

  /// A SQLite file path in a new temporary directory.
  static std::string NewDatabasePath() {
    char dir_template[] = "/tmp/zbpp_coord_testXXXXXX";
    EXPECT_NE(mkdtemp(dir_template), nullptr);
    return absl::StrCat(dir_template, "/state.db");
  }

  FakeWorker AddWorker(int n, uint64_t memory_bytes = uint64_t{1} << 30) {
    v1::WorkerDescription d;
    d.set_address(absl::StrCat("10.0.0.", n, ":7000"));
    d.set_host("node");
    d.set_device_kind(v1::DEVICE_KIND_CPU);
    d.set_memory_bytes(memory_bytes);
    FakeWorker w;
    absl::StatusOr<v1::RegisterWorkerResponse> registered =
        coordinator_->RegisterWorker(d);
    EXPECT_TRUE(registered.ok()) << registered.status();
    w.id = registered->worker_id();
    w.address = d.address();
    w.credential = registered->credential();
    w.outbox = *coordinator_->OpenSession(w.id, d.address());
    return w;
  }

  void HeartbeatAll(std::vector<FakeWorker>& workers,
                    v1::WorkerPhase phase = v1::WORKER_PHASE_PREPARING) {
    for (auto& w : workers) {
      w.Drain();
      v1::Heartbeat hb;
      hb.set_phase(w.assignment ? phase : v1::WORKER_PHASE_IDLE);
      if (w.assignment) {
        hb.set_job_id(w.assignment->job_id());
        hb.set_attempt(w.assignment->attempt());
      }
      ASSERT_TRUE(coordinator_->Heartbeat(w.id, hb).ok());
    }
    SendProfiles(workers);
  }

  /// Each worker whose attempt asks for a calibration profile sends it
  /// (FakeWorker::TakeProfile), as zbpp-worker does once its groups are
  /// joined.
  void SendProfiles(std::vector<FakeWorker>& workers) {
    for (auto& w : workers) {
      if (std::optional<v1::ReportProfileRequest> profile = w.TakeProfile()) {
        absl::Status sent = coordinator_->ReportProfile(*profile);
        ASSERT_TRUE(sent.ok()) << sent;
      }
    }
  }

  /// Runs `attempt` of `job_id` on `workers` — one heartbeat round drops
  /// the aborted attempt and takes the new one, a second acknowledges it
  /// (RUNNING) — then `workers[failing]` reports it FAILED with `error`.
  void RunThenFailAttempt(std::vector<FakeWorker>& workers, const std::string& job_id,
                          int64_t attempt, size_t failing, const std::string& error) {
    HeartbeatAll(workers);
    HeartbeatAll(workers);
    ASSERT_EQ(coordinator_->GetJob(job_id, {})->state(), v1::JOB_STATE_RUNNING)
        << "attempt " << attempt;
    v1::Heartbeat failed;
    failed.set_phase(v1::WORKER_PHASE_FAILED);
    failed.set_job_id(job_id);
    failed.set_attempt(attempt);
    failed.set_error(error);
    ASSERT_TRUE(coordinator_->Heartbeat(workers[failing].id, failed).ok());
  }

  /// Lets the lease of `workers[silent]` expire: for 6 fake seconds every
  /// other worker heartbeats (WAITING) and the coordinator ticks each second.
  void SilenceUntilLost(std::vector<FakeWorker>& workers, size_t silent) {
    for (int t = 0; t < 6; ++t) {
      clock_.Advance(absl::Seconds(1));
      for (size_t i = 0; i < workers.size(); ++i) {
        if (i == silent) continue;
        v1::Heartbeat hb;
        hb.set_phase(v1::WORKER_PHASE_WAITING);
        ASSERT_TRUE(coordinator_->Heartbeat(workers[i].id, hb).ok());
      }
      coordinator_->Tick();
    }
  }

  /// After a restart (Start on the same file): the restored RUNNING and
  /// DEGRADED jobs wait the heartbeat timeout for what their old workers
  /// hold (docs/elastic.md, "Coordinator restart"), while `workers`, holding
  /// nothing, heartbeat (SilenceUntilLost with none silent).
  void WaitOutTheRestoredAttempts(std::vector<FakeWorker>& workers) {
    SilenceUntilLost(workers, workers.size());
  }

  /// Runs granted steps in rank order until `steps` are done or nothing
  /// can run. Returns the steps reported per worker.
  void RunSteps(std::vector<FakeWorker>& workers, const sched::Problem& truth,
                int64_t until_step) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& w : workers) w.Drain();
      SendProfiles(workers);
      for (auto& w : workers) w.Drain();
      for (auto& w : workers) {
        if (!w.assignment) continue;
        while (w.next_step <= w.granted && w.next_step <= until_step) {
          absl::Status s =
              coordinator_->ReportStep(w.Report(w.next_step, truth));
          ASSERT_TRUE(s.ok()) << s;
          ++w.next_step;
          progress = true;
        }
      }
    }
  }

  /// Reports `step` from every worker, each with the step's validation
  /// result (`decision`, in the mode of the version in force; clip
  /// coefficient 0.5 when CLIPPED) and, after a step s with (s + 1) %
  /// checkpoint.interval_steps == 0, a written checkpoint, as zbpp-worker
  /// does; then `amend` (when given) changes each report. False (reporting
  /// nothing) when some worker holds no grant for it.
  bool ReportStepOnAll(
      std::vector<FakeWorker>& workers, const sched::Problem& truth, int64_t step,
      v1::ValidationDecision decision = v1::VALIDATION_DECISION_COMMITTED,
      const std::function<void(const FakeWorker&, v1::ReportStepRequest&)>& amend = nullptr) {
    for (FakeWorker& w : workers) {
      w.Drain();
      if (w.granted < step) return false;
    }
    for (FakeWorker& w : workers) {
      v1::ReportStepRequest r = w.Report(step, truth);
      v1::ValidationResult* v = r.add_validations();
      v->set_step(step);
      v->set_mode(w.VersionFor(step).validation());
      v->set_decision(decision);
      v->set_clip_coefficient(decision == v1::VALIDATION_DECISION_CLIPPED ? 0.5 : 1);
      const int64_t interval = w.assignment->spec().checkpoint().interval_steps();
      r.set_checkpoint_written(interval > 0 && (step + 1) % interval == 0);
      if (amend) amend(w, r);
      const absl::Status s = coordinator_->ReportStep(r);
      EXPECT_TRUE(s.ok()) << "step " << step << ": " << s;
    }
    return true;
  }

  std::vector<FakeWorker> AssignedPipeline(const v1::JobSpec& spec,
                                           std::string* job_id) {
    *job_id = coordinator_->SubmitJob(spec)->id();
    std::vector<FakeWorker> workers;
    for (int i = 0; i < WorkersOf(spec.pipeline()); ++i) {
      workers.push_back(AddWorker(i));
    }
    HeartbeatAll(workers);
    return workers;
  }

  /// From now on the first re-solve notifies `started`, then waits in
  /// resolve_hook_ (at most 10 s) until `release` is notified; later ones
  /// go on. Both must outlive the coordinator's re-solves.
  void HoldFirstResolve(absl::Notification& started, absl::Notification& release) {
    auto hooks = std::make_shared<int>(0);
    resolve_hook_ = [&started, &release, hooks](const std::string&) {
      if ((*hooks)++ > 0) return;
      started.Notify();
      release.WaitForNotificationWithTimeout(absl::Seconds(10));
    };
  }

  FakeClock clock_;
  std::unique_ptr<SqliteStore> store_;
  /// What the coordinator writes through: store_, with writes failing on
  /// demand.
  std::unique_ptr<FaultyStore> faulty_store_;
  std::unique_ptr<Coordinator> coordinator_;
  /// Runs between a re-solve and its publication (Options hook).
  std::function<void(const std::string&)> resolve_hook_;
  /// Options.resolve_on_background_thread for the next Start().
  bool background_resolves_ = false;
  /// Options.validation_policy for the next Start().
  ValidationPolicy::Options validation_policy_;
  /// Options.max_workers and lost_worker_retention_seconds for the next
  /// Start().
  int max_workers_ = Coordinator::Options().max_workers;
  double lost_worker_retention_seconds_ =
      Coordinator::Options().lost_worker_retention_seconds;
  /// Options.retained_finished_jobs and observer for the next Start().
  int retained_finished_jobs_ = Coordinator::Options().retained_finished_jobs;
  CoordinatorObserver* observer_ = nullptr;
};

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_COORDINATOR_FIXTURE_H_
