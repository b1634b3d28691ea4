// WorkerServer in-process with CoordinatorServer: two workers register, a
// job submitted to the coordinator runs on them over Gloo through the
// coordinator's rendezvous and succeeds (NCCL is refused: they have no
// GPU); Shutdown ends the training loops.
// The daemons as processes (flags, signals, exit codes) are
// tests/worker/e2e's.

#include "worker/daemon/worker_server.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "api/job_state.h"
#include "coordinator/server/coordinator_server.h"
#include "tests/worker/daemon/tiny_job.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::worker {
namespace {

using ::testing::StartsWith;
using ::zbpp::worker::testing::TinyJob;

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return context;
}

TEST(WorkerServerTest, TwoWorkersRunAJobToSuccessThenShutDown) {
  coordinator::CoordinatorServer::Options coordinator_options;
  coordinator_options.listen = "127.0.0.1:0";
  coordinator_options.metrics_listen = "127.0.0.1:0";
  coordinator_options.db = ":memory:";
  absl::StatusOr<std::unique_ptr<coordinator::CoordinatorServer>> coordinator =
      coordinator::CoordinatorServer::Create(coordinator_options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();

  std::vector<std::unique_ptr<WorkerServer>> workers;
  std::vector<std::thread> loops;
  for (int i = 0; i < 2; ++i) {
    WorkerServer::Options options;
    options.coordinator = (*coordinator)->address();
    options.credentials = grpc::InsecureChannelCredentials();
    options.cache_dir = ::testing::TempDir() + "/worker_server_test_cache";
    options.gloo_hostname = "127.0.0.1";
    options.memory_bytes = uint64_t{1} << 30;
    options.comm_timeout = absl::Seconds(60);
    // Registered as given; a CPU worker registers no GPU identity.
    options.nccl_shared_gpu_test = i == 1;
    options.device_identity = "0000:1B:00.0";
    absl::StatusOr<std::unique_ptr<WorkerServer>> worker = WorkerServer::Create(options);
    ASSERT_TRUE(worker.ok()) << worker.status();
    EXPECT_THAT((*worker)->address(), StartsWith("127.0.0.1:"));
    EXPECT_FALSE((*worker)->worker_id().empty());
    workers.push_back(*std::move(worker));
    loops.emplace_back([w = workers.back().get()] { w->RunTrainingLoop(); });
  }

  const std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel((*coordinator)->address(), grpc::InsecureChannelCredentials());
  v1::ListWorkersResponse listed;
  ASSERT_TRUE(v1::WorkerService::NewStub(channel)
                  ->ListWorkers(Context().get(), v1::ListWorkersRequest(), &listed)
                  .ok());
  ASSERT_EQ(listed.workers_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const v1::WorkerDescription& d = listed.workers(i).description();
    EXPECT_EQ(d.device_kind(), v1::DEVICE_KIND_CPU);
    EXPECT_EQ(d.device_identity(), "");
    EXPECT_EQ(d.nccl_shared_gpu_test(), i == 1);
  }

  auto jobs = v1::JobService::NewStub(channel);
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = TinyJob(4);
  v1::Job job;
  // NCCL on these CPU workers: refused at submission, naming the field and
  // a worker.
  submit.mutable_spec()->set_transport(v1::TRANSPORT_NCCL);
  const grpc::Status refused = jobs->SubmitJob(Context().get(), submit, &job);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              StartsWith("transport: nccl needs a GPU of its own for every worker; worker-1 "
                         "(stage 0) has no GPU (device cpu)"));
  submit.mutable_spec()->set_transport(v1::TRANSPORT_AUTO);
  const grpc::Status submitted = jobs->SubmitJob(Context().get(), submit, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  v1::GetJobRequest get;
  get.set_job_id(job.id());
  // Bounded by ctest's timeout, not by a wall-clock assertion.
  while (!IsTerminal(job.state())) {
    absl::SleepFor(absl::Milliseconds(20));
    const grpc::Status got = jobs->GetJob(Context().get(), get, &job);
    ASSERT_TRUE(got.ok()) << got.error_message();
  }
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.state_message();
  EXPECT_EQ(job.steps_completed(), 4);
  EXPECT_EQ(job.transport(), v1::TRANSPORT_GLOO);
  EXPECT_EQ(job.transport_reason(), "auto: worker-1 (stage 0) has no GPU (device cpu)");

  for (auto& w : workers) w->Shutdown();
  for (std::thread& t : loops) t.join();
}

}  // namespace
}  // namespace zbpp::worker
