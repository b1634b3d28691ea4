// The job's transport through the Coordinator (coordinator.h SubmitJob,
// StartAttempt; transport_choice.h): resolved per attempt from the workers
// it takes, carried by every Assignment and the job, refused for NCCL at
// submission, waited for at assignment (only workers that can carry it are
// taken), and post-update validation vetoed under NCCL
// for a schedule whose speculative prefixes are not closed.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/schedule_proto.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/validation_policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/schedule_io.h"
#include "tests/scheduler/schedule_builder.h"
#include "tests/coordinator/core/coordinator_fixture.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::FakeWorker;
using testing::TestSpec;
using testing::Uncalibrated;

class TransportTest : public testing::CoordinatorTest {
 protected:
  /// A CUDA worker on `host` whose GPU is `identity` (PCI bus id).
  FakeWorker AddGpuWorker(int n, const std::string& host, const std::string& identity,
                          bool shared_gpu_test = false) {
    v1::WorkerDescription d;
    d.set_address(absl::StrCat("10.0.1.", n, ":7000"));
    d.set_host(host);
    d.set_device_kind(v1::DEVICE_KIND_CUDA);
    d.set_device_name("cuda:0");
    d.set_device_identity(identity);
    d.set_nccl_shared_gpu_test(shared_gpu_test);
    d.set_memory_bytes(uint64_t{1} << 30);
    absl::StatusOr<v1::RegisterWorkerResponse> registered = coordinator_->RegisterWorker(d);
    EXPECT_TRUE(registered.ok()) << registered.status();
    FakeWorker w;
    w.id = registered->worker_id();
    w.address = d.address();
    w.credential = registered->credential();
    w.outbox = *coordinator_->OpenSession(w.id, d.address());
    return w;
  }

  /// Four GPU workers, each with a GPU of its own (two hosts).
  std::vector<FakeWorker> OwnGpus() {
    std::vector<FakeWorker> workers;
    for (int i = 0; i < 4; ++i) {
      workers.push_back(AddGpuWorker(i, i < 2 ? "gpu-a" : "gpu-b",
                                     absl::StrCat("0000:1", i % 2, ":00.0")));
    }
    return workers;
  }

  /// Submits `spec` and returns the job once its workers took it.
  v1::Job Assigned(const v1::JobSpec& spec, std::vector<FakeWorker>& workers) {
    absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(spec);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    HeartbeatAll(workers);
    return *coordinator_->GetJob(job->id(), v1::JOB_VIEW_FULL);
  }

  static v1::JobSpec Spec(v1::Transport transport) {
    v1::JobSpec spec = Uncalibrated(TestSpec(4, 8, "zb-h1"));
    spec.set_transport(transport);
    return spec;
  }
};

TEST_F(TransportTest, AutoIsGlooOnCpuWorkers) {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(AddWorker(i));
  const v1::Job job = Assigned(Spec(v1::TRANSPORT_AUTO), workers);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.transport(), v1::TRANSPORT_GLOO);
  EXPECT_EQ(job.transport_reason(), "auto: worker-1 (stage 0) has no GPU (device cpu)");
  EXPECT_EQ(job.spec().transport(), v1::TRANSPORT_AUTO) << "the spec keeps what was asked";
  for (const FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->transport(), v1::TRANSPORT_GLOO);
  }
}

TEST_F(TransportTest, AutoIsNcclWhenEveryRankHasAGpuOfItsOwn) {
  std::vector<FakeWorker> workers = OwnGpus();
  const v1::Job job = Assigned(Spec(v1::TRANSPORT_AUTO), workers);
  EXPECT_EQ(job.transport(), v1::TRANSPORT_NCCL);
  EXPECT_EQ(job.transport_reason(), "auto: every worker has a GPU of its own");
  for (const FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->transport(), v1::TRANSPORT_NCCL);
  }
}

TEST_F(TransportTest, AutoIsGlooWhenTwoRanksShareAGpu) {
  std::vector<FakeWorker> workers = {
      AddGpuWorker(0, "gpu-a", "0000:10:00.0"), AddGpuWorker(1, "gpu-a", "0000:11:00.0"),
      AddGpuWorker(2, "gpu-a", "0000:12:00.0"), AddGpuWorker(3, "gpu-a", "0000:11:00.0")};
  const v1::Job job = Assigned(Spec(v1::TRANSPORT_AUTO), workers);
  EXPECT_EQ(job.transport(), v1::TRANSPORT_GLOO);
  EXPECT_EQ(job.transport_reason(),
            "auto: worker-2 (stage 1) and worker-4 (stage 3) share GPU 0000:11:00.0 on host "
            "gpu-a");
  ASSERT_TRUE(workers[3].assignment.has_value());
  EXPECT_EQ(workers[3].assignment->transport(), v1::TRANSPORT_GLOO);
}

TEST_F(TransportTest, GlooOnGpusIsGloo) {
  std::vector<FakeWorker> workers = OwnGpus();
  const v1::Job job = Assigned(Spec(v1::TRANSPORT_GLOO), workers);
  EXPECT_EQ(job.transport(), v1::TRANSPORT_GLOO);
  EXPECT_EQ(workers[0].assignment->transport(), v1::TRANSPORT_GLOO);
}

// The workers that would run the job are free: refused at once, nothing
// stored, the workers untouched.
TEST_F(TransportTest, NcclOnFreeCpuWorkersIsRefusedAtSubmission) {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 4; ++i) workers.push_back(AddWorker(i));
  absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(Spec(v1::TRANSPORT_NCCL));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(),
            "transport: nccl needs a GPU of its own for every worker; worker-1 (stage 0) has no "
            "GPU (device cpu)");
  EXPECT_EQ(coordinator_->ListJobs({})->jobs_size(), 0);
  HeartbeatAll(workers);
  for (const FakeWorker& w : workers) EXPECT_FALSE(w.assignment.has_value());
}

TEST_F(TransportTest, NcclOnFreeWorkersSharingAGpuIsRefusedAtSubmissionNamingBoth) {
  std::vector<FakeWorker> workers = {
      AddGpuWorker(0, "gpu-a", "0000:10:00.0"), AddGpuWorker(1, "gpu-a", "0000:10:00.0"),
      AddGpuWorker(2, "gpu-a", "0000:12:00.0"), AddGpuWorker(3, "gpu-a", "0000:13:00.0")};
  absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(Spec(v1::TRANSPORT_NCCL));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("transport: nccl needs a GPU of its own for every worker; worker-1 "
                        "(stage 0) and worker-2 (stage 1) share GPU 0000:10:00.0 on host "
                        "gpu-a"));
  EXPECT_EQ(coordinator_->ListJobs({})->jobs_size(), 0);
}

// The workers are not known at submission. A CPU worker registered first
// (then three GPU workers): the job once FAILED "worker-1 (stage 0) has no
// GPU" at assignment. It waits for workers that can carry NCCL, passing
// the CPU worker over, and runs once a fourth GPU worker comes.
TEST_F(TransportTest, NcclWaitsAtAssignmentForWorkersWithAGpuOfTheirOwn) {
  absl::StatusOr<v1::Job> job = coordinator_->SubmitJob(Spec(v1::TRANSPORT_NCCL));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_PENDING);
  std::vector<FakeWorker> workers = {
      AddWorker(3), AddGpuWorker(0, "gpu-a", "0000:10:00.0"),
      AddGpuWorker(1, "gpu-a", "0000:11:00.0"), AddGpuWorker(2, "gpu-a", "0000:12:00.0")};
  HeartbeatAll(workers);
  const v1::Job waiting = *coordinator_->GetJob(job->id(), {});
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(waiting.state_message(), HasSubstr("a GPU of its own (transport: nccl)"));
  for (const FakeWorker& w : workers) EXPECT_FALSE(w.assignment.has_value());
  // A second worker on an already counted GPU does not qualify either.
  workers.push_back(AddGpuWorker(4, "gpu-a", "0000:12:00.0"));
  HeartbeatAll(workers);
  EXPECT_EQ(coordinator_->GetJob(job->id(), {})->state(), v1::JOB_STATE_PENDING);
  workers.push_back(AddGpuWorker(5, "gpu-b", "0000:12:00.0"));
  HeartbeatAll(workers);
  const v1::Job running = *coordinator_->GetJob(job->id(), {});
  EXPECT_EQ(running.state(), v1::JOB_STATE_RUNNING) << running.state_message();
  EXPECT_EQ(running.transport(), v1::TRANSPORT_NCCL);
  EXPECT_FALSE(workers[0].assignment.has_value()) << "the CPU worker";
  EXPECT_FALSE(workers[4].assignment.has_value()) << "the worker sharing a GPU";
  for (size_t i : {1, 2, 3, 5}) {
    ASSERT_TRUE(workers[i].assignment.has_value()) << i;
    EXPECT_EQ(workers[i].assignment->transport(), v1::TRANSPORT_NCCL);
  }
}

// A GPU worker of a running NCCL job is lost while a CPU worker idles: the
// recovery once took the CPU worker and FAILED ("worker-5 (stage 1) has no
// GPU"). It waits in RECOVERING and resumes over NCCL on a new GPU worker.
TEST_F(TransportTest, NcclRecoveryWaitsForAGpuWorkerInsteadOfAnIdleCpuWorker) {
  std::vector<FakeWorker> workers = OwnGpus();
  const v1::Job job = Assigned(Spec(v1::TRANSPORT_NCCL), workers);
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  workers.push_back(AddWorker(9));  // Idle, no GPU.
  SilenceUntilLost(workers, 1);
  ASSERT_EQ(coordinator_->GetJob(job.id(), {})->state(), v1::JOB_STATE_RECOVERING);
  workers.erase(workers.begin() + 1);
  for (FakeWorker& w : workers) w.Drain();  // The aborted attempt.
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  const v1::Job waiting = *coordinator_->GetJob(job.id(), {});
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_RECOVERING) << waiting.state_message();
  EXPECT_THAT(waiting.state_message(), HasSubstr("a GPU of its own"));
  EXPECT_FALSE(workers.back().assignment.has_value());
  workers.push_back(AddGpuWorker(7, "gpu-c", "0000:10:00.0"));
  HeartbeatAll(workers);
  HeartbeatAll(workers);
  const v1::Job resumed = *coordinator_->GetJob(job.id(), {});
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_RUNNING) << resumed.state_message();
  EXPECT_EQ(resumed.transport(), v1::TRANSPORT_NCCL);
  EXPECT_FALSE(workers[3].assignment.has_value()) << "the CPU worker";
}

TEST_F(TransportTest, NcclOnASharedGpuRunsWhenEveryWorkerRunsTheTestSetting) {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 4; ++i) {
    workers.push_back(AddGpuWorker(i, "gpu-a", "0000:10:00.0", /*shared_gpu_test=*/true));
  }
  const v1::Job job = Assigned(Spec(v1::TRANSPORT_NCCL), workers);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.transport(), v1::TRANSPORT_NCCL);
  EXPECT_THAT(job.transport_reason(), HasSubstr("test setting"));
  for (const FakeWorker& w : workers) {
    ASSERT_TRUE(w.assignment.has_value());
    EXPECT_EQ(w.assignment->transport(), v1::TRANSPORT_NCCL);
  }
}

// A job running, from a schedule file, a V on two workers whose worker 1
// runs in its speculative prefix a forward fed by what worker 0 produces
// after its first B: not closed (tests/scheduler/comm_order_test.cc,
// APrefixThatConsumesWhatFollowsTheSendersPrefixIsNotClosed). No registry
// schedule is vetoed today.
v1::JobSpec VetoedScheduleSpec() {
  v1::JobSpec spec = Uncalibrated(TestSpec(2, 2, "zb-v"));
  const sched::Schedule schedule = sched::testing::ScheduleFromRows(
      "hand", 2, 2, 2, sched::Placement::kV,
      {{"0F0", "3F0", "3B0", "0F1", "3F1", "3B1", "0B0", "0B1"},
       {"1F0", "2F0", "1F1", "2B0", "2F1", "2B1", "1B0", "1B1"}});
  spec.mutable_schedule()->clear_name();
  spec.mutable_schedule()->set_file("not-closed.json");
  spec.mutable_schedule()->set_file_text(sched::ScheduleToJson(schedule));
  return spec;
}

TEST_F(TransportTest, PostValidationWithPrefixesThatAreNotClosedRunsSynchronousUnderNccl) {
  v1::JobSpec spec = VetoedScheduleSpec();
  spec.set_transport(v1::TRANSPORT_NCCL);
  spec.set_validation(v1::VALIDATION_MODE_POST);
  std::vector<FakeWorker> workers = OwnGpus();
  workers.resize(2);
  const v1::Job job = Assigned(spec, workers);
  ASSERT_EQ(job.transport(), v1::TRANSPORT_NCCL);
  EXPECT_EQ(job.validation_mode(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_EQ(job.schedule().validation(), v1::VALIDATION_MODE_SYNCHRONOUS);
  EXPECT_EQ(job.schedule().reason(), v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  EXPECT_THAT(job.schedule().reason_detail(),
              HasSubstr("synchronous validation: NCCL needs closed speculative prefixes: "));
  // Every step but the attempt's first (which speculates on nothing) runs
  // the synchronous version; the workers hold it after their Assignment.
  EXPECT_EQ(job.schedule().effective_step(), 1);
  for (const FakeWorker& w : workers) {
    ASSERT_FALSE(w.versions.empty());
    EXPECT_EQ(w.versions.back().version(), job.schedule().version());
    EXPECT_EQ(w.versions.back().validation(), v1::VALIDATION_MODE_SYNCHRONOUS);
  }
}

TEST_F(TransportTest, PostValidationStaysWhereNcclCanSpeculate) {
  // Closed prefixes (ZB-H1) under NCCL, and the vetoed schedule under Gloo.
  for (auto [vetoed_schedule, transport] :
       {std::pair{false, v1::TRANSPORT_NCCL}, std::pair{true, v1::TRANSPORT_GLOO}}) {
    SCOPED_TRACE(vetoed_schedule);
    Start(":memory:");
    v1::JobSpec spec =
        vetoed_schedule ? VetoedScheduleSpec() : Uncalibrated(TestSpec(4, 8, "zb-h1"));
    spec.set_transport(transport);
    spec.set_validation(v1::VALIDATION_MODE_POST);
    std::vector<FakeWorker> workers = OwnGpus();
    workers.resize(spec.pipeline().stages());
    const v1::Job job = Assigned(spec, workers);
    EXPECT_EQ(job.transport(), transport);
    EXPECT_EQ(job.validation_mode(), v1::VALIDATION_MODE_POST);
    EXPECT_EQ(job.schedule_version(), 1);
  }
}

// Under validation AUTO the switch to POST after clean steps is vetoed
// under NCCL for such a schedule (no version is published: it would be
// SYNCHRONOUS again), and taken under Gloo.
TEST_F(TransportTest, AutoValidationDoesNotSwitchToPostWhereNcclCannotSpeculate) {
  for (v1::Transport transport : {v1::TRANSPORT_NCCL, v1::TRANSPORT_GLOO}) {
    SCOPED_TRACE(v1::Transport_Name(transport));
    validation_policy_.post_after_clean_steps = 1;
    Start(":memory:");
    v1::JobSpec spec = VetoedScheduleSpec();
    spec.set_transport(transport);
    spec.set_validation(v1::VALIDATION_MODE_AUTO);
    std::vector<FakeWorker> workers = OwnGpus();
    workers.resize(2);
    const v1::Job job = Assigned(spec, workers);
    ASSERT_EQ(job.transport(), transport);
    ASSERT_EQ(job.schedule_version(), 1);
    ASSERT_EQ(job.validation_mode(), v1::VALIDATION_MODE_SYNCHRONOUS);
    const sched::Problem truth = testing::TrueCosts(spec, 0, 1.0);
    for (FakeWorker& w : workers) {
      w.Drain();
      v1::ReportStepRequest report = w.Report(0, truth);
      v1::ValidationResult* v = report.add_validations();
      v->set_step(0);
      v->set_mode(v1::VALIDATION_MODE_SYNCHRONOUS);
      v->set_decision(v1::VALIDATION_DECISION_COMMITTED);
      v->set_clip_coefficient(1);
      ASSERT_TRUE(coordinator_->ReportStep(report).ok());
    }
    const v1::Job after = *coordinator_->GetJob(job.id(), v1::JOB_VIEW_FULL);
    if (transport == v1::TRANSPORT_NCCL) {
      EXPECT_EQ(after.schedule_version(), 1);
      EXPECT_EQ(after.validation_mode(), v1::VALIDATION_MODE_SYNCHRONOUS);
    } else {
      EXPECT_EQ(after.schedule_version(), 2);
      EXPECT_EQ(after.validation_mode(), v1::VALIDATION_MODE_POST);
    }
  }
}

}  // namespace
}  // namespace zbpp::coordinator
