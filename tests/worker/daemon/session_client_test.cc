// SessionClient::Create's errors, in-process: a coordinator that cannot be
// reached, and a gRPC server that is no coordinator. zbpp-worker prints the
// same messages as its one error line (tests/worker/e2e/bad_input_test.cc
// runs the binary against a server that is no coordinator).

#include "worker/daemon/session_client.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/client/subprocess.h"
#include "zbpp/v1/job.grpc.pb.h"

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

}  // namespace
}  // namespace zbpp::worker
