#ifndef ZBPP_TESTS_COORDINATOR_CORE_ELASTIC_FIXTURE_H_
#define ZBPP_TESTS_COORDINATOR_CORE_ELASTIC_FIXTURE_H_

// Shared by the tests of recovering from memory (docs/elastic.md): data ×
// pipeline jobs on the coordinator fixture's fake workers, which say what
// they hold after an attempt ends (Heartbeat.held).

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/core/coordinator.h"
#include "gtest/gtest.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator::testing {

/// p = 2 stages, d replicas of m microbatches, `steps` steps, no
/// calibration and no re-solve: versions change only for the replicas.
inline v1::JobSpec ElasticSpec(int replicas, int microbatches, int64_t steps = 10) {
  v1::JobSpec spec = Uncalibrated(TestSpec(2, microbatches, "1f1b", steps));
  spec.mutable_pipeline()->set_data_parallel(replicas);
  spec.mutable_schedule()->mutable_resolve()->set_disabled(true);
  return spec;
}

/// The true costs of a replica of `spec` running `replicas` replicas of
/// `microbatches` each (a degraded attempt's schedule has m' microbatches).
inline sched::Problem TruthFor(v1::JobSpec spec, int replicas, int microbatches) {
  spec.mutable_pipeline()->set_data_parallel(replicas);
  spec.mutable_pipeline()->set_microbatches(microbatches);
  return TrueCosts(spec, 0, 1.0);
}

/// The coordinator fixture with helpers for fake workers whose attempt
/// ends: what they are told, what they say they hold, a worker lost while
/// the others run, and a 2 × 2 job degraded onto replica 0.
class ElasticTest : public CoordinatorTest {
 protected:
  /// Applies what waits in `w`'s outbox (as FakeWorker::Drain) and returns
  /// the Abort commands among it.
  std::vector<v1::AbortCommand> DrainAborts(FakeWorker& w) {
    std::vector<SessionMessage> messages;
    const absl::Status popped = w.outbox->Pop(absl::InfinitePast(), &messages);
    if (!popped.ok()) w.closed = popped;
    std::vector<v1::AbortCommand> aborts;
    for (const SessionMessage& message : messages) {
      if (message->has_command() && message->command().has_abort()) {
        aborts.push_back(message->command().abort());
      }
      if (message->has_schedule() && w.assignment.has_value()) {
        w.schedule_messages.push_back(message);
      }
      w.Apply(*message);
    }
    return aborts;
  }

  /// `w`, idle after its attempt ended, says it holds `stage` of `job_id`
  /// at `step` from `attempt` (zbpp-worker's heartbeat after an Abort that
  /// keeps its state), with `report` as its report of `step` when set.
  void SayHeld(FakeWorker& w, const std::string& job_id, int64_t attempt, int stage,
               int64_t step, const v1::ReportStepRequest* report = nullptr) {
    v1::Heartbeat hb;
    hb.set_phase(v1::WORKER_PHASE_IDLE);
    v1::HeldState* held = hb.mutable_held();
    held->set_job_id(job_id);
    held->set_attempt(attempt);
    held->set_stage(stage);
    held->set_step(step);
    if (report != nullptr) *held->mutable_step_report() = *report;
    const absl::Status sent = coordinator_->Heartbeat(w.id, hb);
    ASSERT_TRUE(sent.ok()) << sent;
  }

  /// Every worker of `workers` but `silent` heartbeats RUNNING its attempt
  /// each second for 6 s, the coordinator ticking, until `silent`'s lease
  /// expires: the survivors have not heard of the end yet.
  void LoseWhileOthersRun(std::vector<FakeWorker>& workers, size_t silent) {
    for (int t = 0; t < 6; ++t) {
      clock_.Advance(absl::Seconds(1));
      for (size_t i = 0; i < workers.size(); ++i) {
        if (i == silent || !workers[i].assignment) continue;
        v1::Heartbeat hb;
        hb.set_phase(v1::WORKER_PHASE_RUNNING);
        hb.set_job_id(workers[i].assignment->job_id());
        hb.set_attempt(workers[i].assignment->attempt());
        ASSERT_TRUE(coordinator_->Heartbeat(workers[i].id, hb).ok());
      }
      coordinator_->Tick();
    }
  }

  /// The index in `workers` of the one running (stage, replica).
  static size_t Find(const std::vector<FakeWorker>& workers, int stage, int replica) {
    for (size_t i = 0; i < workers.size(); ++i) {
      if (workers[i].assignment && workers[i].assignment->stage() == stage &&
          workers[i].assignment->replica() == replica) {
        return i;
      }
    }
    ADD_FAILURE() << "no worker runs stage " << stage << " of replica " << replica;
    return 0;
  }

  /// Heartbeats `workers` with their attempt (PREPARING): the attempt is
  /// acknowledged.
  void Acknowledge(std::vector<FakeWorker*> workers) {
    for (FakeWorker* w : workers) {
      w->Drain();
      ASSERT_TRUE(w->assignment.has_value()) << w->id;
      v1::Heartbeat hb;
      hb.set_phase(v1::WORKER_PHASE_PREPARING);
      hb.set_job_id(w->assignment->job_id());
      hb.set_attempt(w->assignment->attempt());
      ASSERT_TRUE(coordinator_->Heartbeat(w->id, hb).ok());
    }
  }

  /// Submits `spec` on new workers, which take the attempt and report steps
  /// 0..`last` with `spec`'s true costs; returns them.
  std::vector<FakeWorker> RunThroughStep(const v1::JobSpec& spec, int64_t last,
                                         std::string* job_id) {
    std::vector<FakeWorker> workers = AssignedPipeline(spec, job_id);
    HeartbeatAll(workers);
    const sched::Problem truth = TrueCosts(spec, 0, 1.0);
    for (int64_t step = 0; step <= last; ++step) {
      EXPECT_TRUE(ReportStepOnAll(workers, truth, step)) << "step " << step;
    }
    return workers;
  }

  /// Where the workers of a degraded 2 x 2 job are (indexes in `workers`).
  struct Degraded {
    size_t lost, spare, kept0, kept1;
  };
  /// Submits `spec` (2 stages x 2 replicas) on 4 workers, runs steps 0-2,
  /// loses the stage-0 worker of replica 1 and has the survivors say they
  /// hold step 2: replica 0 runs on, DEGRADED, from step 3.
  Degraded DegradeAfterStep2(const v1::JobSpec& spec, std::vector<FakeWorker>& workers,
                             std::string* job_id) {
    workers = RunThroughStep(spec, 2, job_id);
    const Degraded at{Find(workers, 0, 1), Find(workers, 1, 1), Find(workers, 0, 0),
                      Find(workers, 1, 0)};
    LoseWhileOthersRun(workers, at.lost);
    for (size_t i : {at.spare, at.kept0, at.kept1}) DrainAborts(workers[i]);
    SayHeld(workers[at.spare], *job_id, 1, 1, 2);
    SayHeld(workers[at.kept0], *job_id, 1, 0, 2);
    SayHeld(workers[at.kept1], *job_id, 1, 1, 2);
    Acknowledge({&workers[at.kept0], &workers[at.kept1]});
    EXPECT_EQ(coordinator_->GetJob(*job_id, {})->state(), v1::JOB_STATE_DEGRADED);
    return at;
  }

  /// The worker's state as ListWorkers shows it (LOST included).
  v1::WorkerState StateOf(const std::string& worker_id) {
    v1::ListWorkersRequest request;
    for (v1::WorkerState state :
         {v1::WORKER_STATE_IDLE, v1::WORKER_STATE_ASSIGNED, v1::WORKER_STATE_RUNNING,
          v1::WORKER_STATE_SPARE, v1::WORKER_STATE_LOST}) {
      request.add_states(state);
    }
    const absl::StatusOr<v1::ListWorkersResponse> listed = coordinator_->ListWorkers(request);
    for (const v1::Worker& w : listed->workers()) {
      if (w.worker_id() == worker_id) return w.state();
    }
    return v1::WORKER_STATE_UNSPECIFIED;
  }
};

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_CORE_ELASTIC_FIXTURE_H_
