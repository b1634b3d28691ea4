// WatchJob streams on a CoordinatorServer in process: held streams take no
// server thread, so a job runs to the end and ListJobs answers while more
// streams are held than --max-threads; the caps (total, per client) refuse
// the next stream with RESOURCE_EXHAUSTED naming the flag.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/time/clock.h"
#include "coordinator/server/coordinator_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/fake_pipeline.h"
#include "tests/coordinator/grpc_fake_worker.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using testing::CallContext;

constexpr int kMaxThreads = 16;

std::unique_ptr<CoordinatorServer> StartServer(int max_streams, int max_per_client) {
  CoordinatorServer::Options options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.db = ":memory:";
  options.max_threads = kMaxThreads;
  options.max_watch_streams = max_streams;
  options.max_watch_streams_per_client = max_per_client;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Create(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

/// One held WatchJob stream.
struct Watch {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader;
};

Watch OpenWatch(v1::JobService::Stub& jobs, const std::string& job_id) {
  Watch watch{std::make_unique<grpc::ClientContext>(), nullptr};
  watch.context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  watch.reader = jobs.WatchJob(watch.context.get(), request);
  return watch;
}

std::string SubmitTestJob(v1::JobService::Stub& jobs, int64_t steps) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = testing::TestSpec(2, 4, "zb-1p", steps, 4);
  v1::Job job;
  const grpc::Status submitted = jobs.SubmitJob(CallContext("", "").get(), submit, &job);
  EXPECT_TRUE(submitted.ok()) << submitted.error_message();
  return job.id();
}

// More streams than the server has threads, each past its snapshot, while a
// 2-rank job runs: it completes with no recovery, ListJobs answers
// throughout, the stream past the cap is refused, and every held stream
// delivers the job's events to its end.
TEST(WatchStreamsTest, HeldStreamsPastTheThreadsDoNotStarveARunningJob) {
  constexpr int kStreams = 3 * kMaxThreads;
  std::unique_ptr<CoordinatorServer> server = StartServer(kStreams, kStreams);
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  auto jobs = v1::JobService::NewStub(channel);
  const std::string job_id = SubmitTestJob(*jobs, 24);

  std::vector<Watch> watches;
  for (int i = 0; i < kStreams; ++i) {
    watches.push_back(OpenWatch(*jobs, job_id));
    v1::JobEvent snapshot;
    ASSERT_TRUE(watches.back().reader->Read(&snapshot)) << "stream " << i;
    ASSERT_TRUE(snapshot.has_snapshot());
  }
  Watch refused = OpenWatch(*jobs, job_id);
  v1::JobEvent none;
  EXPECT_FALSE(refused.reader->Read(&none));
  const grpc::Status past_cap = refused.reader->Finish();
  EXPECT_EQ(past_cap.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(past_cap.error_message(), HasSubstr("--max-watch-streams"));

  const sched::Problem truth = testing::TrueCosts(testing::TestSpec(2, 4), 1, 1.0);
  auto workers = v1::WorkerService::NewStub(channel);
  auto kv = v1::RendezvousService::NewStub(channel);
  std::vector<testing::WorkerLog> logs(2);
  std::atomic<int> running{2};
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      testing::RunFakeWorker(workers.get(), kv.get(), i, truth, "", &logs[i]);
      --running;
    });
  }
  int lists = 0;
  while (running > 0) {
    v1::ListJobsResponse listed;
    const grpc::Status status = jobs->ListJobs(CallContext("", "").get(), {}, &listed);
    ASSERT_TRUE(status.ok()) << "list " << lists << ": " << status.error_message();
    ++lists;
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (auto& thread : threads) thread.join();
  EXPECT_GT(lists, 0);
  for (const auto& log : logs) {
    EXPECT_EQ(log.error, "");
    EXPECT_TRUE(log.rendezvous_ok);
  }
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  v1::Job done;
  ASSERT_TRUE(jobs->GetJob(CallContext("", "").get(), get, &done).ok());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.state_message();
  EXPECT_EQ(done.recoveries_total(), 0);

  for (Watch& watch : watches) {
    v1::JobEvent event, last;
    while (watch.reader->Read(&event)) last = event;
    EXPECT_EQ(last.state_change().new_state(), v1::JOB_STATE_SUCCEEDED);
    const grpc::Status ended = watch.reader->Finish();
    EXPECT_TRUE(ended.ok()) << ended.error_message();
  }
  // The cap counts open streams: a stream closed frees its place.
  Watch again = OpenWatch(*jobs, job_id);
  v1::JobEvent snapshot;
  EXPECT_TRUE(again.reader->Read(&snapshot));
  EXPECT_TRUE(again.reader->Finish().ok());
}

// The per-client cap is reached before the total one; a refused stream
// keeps no place and a cancelled one gives its place back.
TEST(WatchStreamsTest, PerClientCapRefusesNamingItsFlag) {
  std::unique_ptr<CoordinatorServer> server = StartServer(100, 3);
  ASSERT_NE(server, nullptr);
  auto jobs = v1::JobService::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  const std::string job_id = SubmitTestJob(*jobs, 4);
  v1::JobEvent event;
  // An unknown job: NOT_FOUND, and no place kept.
  for (int i = 0; i < 4; ++i) {
    Watch unknown = OpenWatch(*jobs, "job-404");
    EXPECT_FALSE(unknown.reader->Read(&event));
    EXPECT_EQ(unknown.reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  std::vector<Watch> watches;
  for (int i = 0; i < 3; ++i) {
    watches.push_back(OpenWatch(*jobs, job_id));
    v1::JobEvent snapshot;
    ASSERT_TRUE(watches.back().reader->Read(&snapshot));
  }
  Watch refused = OpenWatch(*jobs, job_id);
  EXPECT_FALSE(refused.reader->Read(&event));
  const grpc::Status status = refused.reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max-watch-streams-per-client (3)"));

  watches[0].context->TryCancel();
  EXPECT_EQ(watches[0].reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  watches.erase(watches.begin());
  // The server sees the cancel asynchronously: retry for up to 5 s.
  bool admitted = false;
  for (int attempt = 0; attempt < 100 && !admitted; ++attempt) {
    Watch next = OpenWatch(*jobs, job_id);
    admitted = next.reader->Read(&event) && event.has_snapshot();
    if (admitted) {
      watches.push_back(std::move(next));
    } else {
      (void)next.reader->Finish();
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  EXPECT_TRUE(admitted);
  for (Watch& watch : watches) watch.context->TryCancel();
  for (Watch& watch : watches) (void)watch.reader->Finish();
  server->Shutdown();
  server->Wait();
}

}  // namespace
}  // namespace zbpp::coordinator
