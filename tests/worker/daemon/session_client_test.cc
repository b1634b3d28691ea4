// SessionClient::Create's errors, in-process: a coordinator that cannot be
// reached, and a gRPC server that is no coordinator; ReportStep's retry of a
// coordinator out of capacity. zbpp-worker prints the
// same messages as its one error line (tests/worker/e2e/bad_input_test.cc
// runs the binary against a server that is no coordinator).

#include "worker/daemon/session_client.h"

#include <atomic>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/subprocess.h"
#include "zbpp/v1/job.grpc.pb.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::worker {
namespace {

using ::testing::HasSubstr;

SessionClientOptions OptionsFor(const std::string& address, ControlState* state) {
  SessionClientOptions options;
  options.channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  options.coordinator_address = address;
  options.description.set_address("127.0.0.1:7000");
  options.description.set_device_kind(v1::DEVICE_KIND_CPU);
  options.state = state;
  return options;
}

TEST(SessionClientTest, UnreachableCoordinatorIsUnavailableNamingTheAddress) {
  const int port = ctltest::ClosedLocalPort();
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  ControlState state;
  SessionClientOptions options = OptionsFor(address, &state);
  options.rpc_timeout = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<SessionClient>> client =
      SessionClient::Create(std::move(options));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.status().message(),
            absl::StrCat("cannot reach the coordinator at ", address, " within 200ms"));
}

// A gRPC server without the WorkerService: the registration fails with the code that says why,
// UNIMPLEMENTED having no message of its own.
TEST(SessionClientTest, ServerThatIsNoCoordinatorFailsTheRegistrationSayingWhy) {
  v1::JobService::Service jobs_only;  // Every method UNIMPLEMENTED.
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&jobs_only);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  ControlState state;
  absl::StatusOr<std::unique_ptr<SessionClient>> client =
      SessionClient::Create(OptionsFor(address, &state));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("registering with the coordinator at ", address,
                                     ": UNIMPLEMENTED")));
  server->Shutdown();
}

// A WorkerService that registers anyone, holds Sessions open, and answers
// ReportStep with `refusals` RESOURCE_EXHAUSTED (as gRPC does when its
// handler threads are taken) before the code `then`.
class BusyWorkerService final : public v1::WorkerService::Service {
 public:
  BusyWorkerService(int refusals, grpc::StatusCode then) : refusals_(refusals), then_(then) {}

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse* response) override {
    response->set_worker_id("worker-1");
    response->set_credential("c");
    response->set_heartbeat_interval_seconds(1);
    return grpc::Status::OK;
  }
  grpc::Status Session(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::SessionResponse, v1::SessionRequest>* stream) override {
    v1::SessionRequest request;
    while (stream->Read(&request)) {
    }
    return grpc::Status::OK;
  }
  grpc::Status ReportStep(grpc::ServerContext*, const v1::ReportStepRequest*,
                          v1::ReportStepResponse*) override {
    if (calls_++ < refusals_) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "Server Threadpool Exhausted");
    }
    return grpc::Status(then_, then_ == grpc::StatusCode::OK ? "" : "refused");
  }

  std::atomic<int> calls_{0};

 private:
  const int refusals_;
  const grpc::StatusCode then_;
};

// A coordinator out of handler threads is not the attempt failing: the
// report is sent again until it is taken; a refusal of the report itself is
// not retried.
TEST(SessionClientTest, ReportRefusedForCapacityIsRetriedOthersAreNot) {
  for (const grpc::StatusCode then : {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT}) {
    BusyWorkerService service(3, then);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_GT(port, 0);
    ControlState state;
    absl::StatusOr<std::unique_ptr<SessionClient>> client =
        SessionClient::Create(OptionsFor(absl::StrCat("127.0.0.1:", port), &state));
    ASSERT_TRUE(client.ok()) << client.status();
    const absl::Status reported = (*client)->ReportStep({}, absl::Seconds(10));
    EXPECT_EQ(service.calls_, 4);
    if (then == grpc::StatusCode::OK) {
      EXPECT_TRUE(reported.ok()) << reported;
    } else {
      EXPECT_TRUE(absl::IsInvalidArgument(reported)) << reported;
    }
    client->reset();
    server->Shutdown();
  }
}

}  // namespace
}  // namespace zbpp::worker
