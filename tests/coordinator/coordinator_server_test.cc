// CoordinatorServer in-process: what the options wire (the token, the
// worker cap, health, reflection), requests that do not parse, and Create's
// errors naming the flag. The zbpp-coordinator binary itself (flags,
// listening line, SIGTERM) is DaemonTest's, in coordinator_daemon_test.cc.

#include "coordinator/server/coordinator_server.h"

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "common/call_auth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/coordinator/raw_call.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kToken[] = "tok-5f0c9e7a1b3d4c6e8f2a0b1c3d5e7f90";

CoordinatorServer::Options LocalOptions() {
  CoordinatorServer::Options options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.db = ":memory:";
  return options;
}

std::unique_ptr<grpc::ClientContext> Context(bool with_token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  if (with_token) context->AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  return context;
}

v1::RegisterWorkerRequest Registration(int n) {
  v1::RegisterWorkerRequest request;
  v1::WorkerDescription* d = request.mutable_worker();
  d->set_address(absl::StrCat("10.0.0.", n, ":7000"));
  d->set_host("node");
  d->set_device_kind(v1::DEVICE_KIND_CPU);
  d->set_memory_bytes(1 << 30);
  return request;
}

TEST(CoordinatorServerTest, ServesOnTheBoundPortsUntilShutdown) {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(LocalOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->address(), StartsWith("127.0.0.1:"));
  EXPECT_NE((*server)->address(), "127.0.0.1:0");
  EXPECT_THAT((*server)->metrics_address(), StartsWith("127.0.0.1:"));
  EXPECT_NE((*server)->metrics_address(), "127.0.0.1:0");
  auto jobs = v1::JobService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  v1::GetJobRequest get;
  get.set_job_id("job-1");
  v1::Job job;
  EXPECT_EQ(jobs->GetJob(Context(false).get(), get, &job).error_code(),
            grpc::StatusCode::NOT_FOUND);
  (*server)->Shutdown();
  (*server)->Wait();
  (*server)->Shutdown();  // Idempotent.
}

// Options.token_file: the token guards every service but health,
// reflection included (not served), and worker calls need it before their
// credential; the core's options reach the core, those the daemon has a
// flag for (the worker cap) and those it has not (the heartbeat timing).
TEST(CoordinatorServerTest, TokenAndCoreOptionsReachTheServices) {
  const std::string token_file = ::testing::TempDir() + "/coordinator_server_test_token";
  std::ofstream(token_file) << kToken;
  CoordinatorServer::Options options = LocalOptions();
  options.token_file = token_file;
  options.core.max_workers = 1;
  options.core.lost_worker_retention_seconds = 30;
  options.core.heartbeat_interval_seconds = 0.75;
  options.core.heartbeat_timeout_seconds = 4.5;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel =
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto workers = v1::WorkerService::NewStub(channel);
  v1::RegisterWorkerResponse response;
  EXPECT_EQ(workers->RegisterWorker(Context(false).get(), Registration(1), &response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::ListWorkersResponse listed;
  EXPECT_EQ(workers->ListWorkers(Context(false).get(), {}, &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  v1::SetRequest set;
  set.mutable_context()->set_worker_id("worker-1");
  set.mutable_context()->set_scope("job-1/1");
  v1::SetResponse set_response;
  EXPECT_EQ(v1::RendezvousService::NewStub(channel)
                ->Set(Context(false).get(), set, &set_response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  std::string bytes;
  const grpc::Status health = testing::HealthCheck(channel, &bytes);
  EXPECT_TRUE(health.ok()) << health.error_message();
  EXPECT_EQ(bytes, testing::kServing);
  EXPECT_EQ(testing::RawUnaryCall(channel,
                                  "/grpc.reflection.v1alpha.ServerReflection/"
                                  "ServerReflectionInfo",
                                  &bytes, "", BearerTokenMetadata(kToken))
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  // With the token: registration and the credential it returns, up to the cap.
  ASSERT_TRUE(workers->RegisterWorker(Context(true).get(), Registration(1), &response).ok());
  EXPECT_EQ(response.credential().size(), 32u);
  EXPECT_EQ(response.heartbeat_interval_seconds(), 0.75);
  EXPECT_EQ(response.heartbeat_timeout_seconds(), 4.5);
  EXPECT_TRUE(workers->ListWorkers(Context(true).get(), {}, &listed).ok());
  const grpc::Status second =
      workers->RegisterWorker(Context(true).get(), Registration(2), &response);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.error_message(), HasSubstr("cap of 1"));
}

TEST(CoordinatorServerTest, ListWorkersPagesAndNamesABadPageToken) {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(LocalOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  auto workers = v1::WorkerService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  for (int n = 1; n <= 2; ++n) {
    v1::RegisterWorkerResponse response;
    ASSERT_TRUE(workers->RegisterWorker(Context(false).get(), Registration(n), &response).ok());
  }
  v1::ListWorkersRequest list;
  list.set_page_size(1);
  v1::ListWorkersResponse page;
  ASSERT_TRUE(workers->ListWorkers(Context(false).get(), list, &page).ok());
  EXPECT_EQ(page.workers_size(), 1);
  EXPECT_FALSE(page.next_page_token().empty());
  list.set_page_token("nonsense");
  const grpc::Status bad = workers->ListWorkers(Context(false).get(), list, &page);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("page_token"));
}

// A client that sends a string field that is not UTF-8 (here a Latin-1
// job id, which zbppctl would refuse before sending) is told so, instead of
// gRPC's INTERNAL with an empty message.
TEST(CoordinatorServerTest, RequestThatDoesNotParseIsInvalidArgumentSayingWhy) {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(LocalOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  std::string reply;
  // GetJobRequest.job_id (field 1, length-delimited) = "j\xe9b".
  const grpc::Status status = testing::RawUnaryCall(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()),
      "/zbpp.v1.JobService/GetJob", &reply, std::string("\x0a\x03j\xe9b", 5));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("UTF-8"));
}

TEST(CoordinatorServerTest, CreateFailsNamingTheFlag) {
  CoordinatorServer::Options options = LocalOptions();
  options.token_file = ::testing::TempDir() + "/no-such-token-file";
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(options);
  EXPECT_THAT(std::string(server.status().message()), StartsWith("--token-file: "));

  options = LocalOptions();
  options.db = ::testing::TempDir() + "/no-such-dir/state.db";
  server = CoordinatorServer::Create(options);
  EXPECT_THAT(std::string(server.status().message()), StartsWith("--db: "));

  options = LocalOptions();
  options.metrics_listen = "not-an-address";
  server = CoordinatorServer::Create(options);
  EXPECT_THAT(std::string(server.status().message()), StartsWith("--metrics-listen: "));

  options = LocalOptions();
  options.listen = "256.0.0.1:0";
  server = CoordinatorServer::Create(options);
  EXPECT_THAT(std::string(server.status().message()), StartsWith("--listen: "));
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("cannot listen on 256.0.0.1:0"));

  options = LocalOptions();
  options.tls_cert = ::testing::TempDir() + "/no-such-cert.pem";
  options.tls_key = ::testing::TempDir() + "/no-such-key.pem";
  server = CoordinatorServer::Create(options);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("--tls-cert"));
}

}  // namespace
}  // namespace zbpp::coordinator
