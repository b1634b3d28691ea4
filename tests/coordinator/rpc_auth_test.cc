// Every method of every service in proto/zbpp/v1/*.proto, called by name on
// a CoordinatorServer in process (127.0.0.1:0, a token file): each refuses a
// call without the token and one with a wrong token, each that
// kCallerChecks (coordinator/service/rpc_scope.cc) guards with a worker's
// credential refuses a missing or wrong credential, and each refusal is
// recorded under its method. The methods come from the generated
// descriptors of the proto files found in the source tree, so an RPC added
// to a proto is walked without touching this file.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/call_auth.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/service/rpc_scope.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/exposition.h"
#include "zbpp/v1/worker.grpc.pb.h"

namespace zbpp::coordinator {
namespace {

using ::testing::HasSubstr;

// Strong enough for ReadTokenFile (at least 128 bits: common/call_auth.h).
constexpr char kToken[] = "5f0c9e7a3b1d42c8a6e07f19b2d4c6e8a0f1b3c5d7e9f1a3b5c7d9e1f3a5b7c9";

/// Full names ("/zbpp.v1.JobService/SubmitJob") and request types of every
/// method of every service in the proto files under ZBPP_PROTO_DIR.
std::map<std::string, const google::protobuf::Descriptor*>
MethodsOfTheProtos() {
  std::map<std::string, const google::protobuf::Descriptor*> methods;
  for (const auto& entry :
       std::filesystem::directory_iterator(ZBPP_PROTO_DIR)) {
    if (entry.path().extension() != ".proto") continue;
    const std::string name = "zbpp/v1/" + entry.path().filename().string();
    const google::protobuf::FileDescriptor* file =
        google::protobuf::DescriptorPool::generated_pool()->FindFileByName(
            name);
    EXPECT_NE(file, nullptr) << name << " is not linked into this test";
    if (file == nullptr) continue;
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        const google::protobuf::MethodDescriptor* method = service->method(m);
        methods[absl::StrCat("/", service->full_name(), "/", method->name())] =
            method->input_type();
      }
    }
  }
  return methods;
}

/// Sets every string field of `message`, and of its singular message fields
/// (the first member of each oneof) two levels down, to `value`: the
/// request names `value` as its worker (worker_id, context.worker_id,
/// open.worker_id) wherever it names one, and its other required names
/// (job_id, scope, address) are not empty.
void NameEverywhere(google::protobuf::Message& message,
                    const std::string& value, int depth = 0) {
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  const google::protobuf::Reflection* reflection = message.GetReflection();
  for (int i = 0; i < type->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = type->field(i);
    const google::protobuf::OneofDescriptor* oneof =
        field->real_containing_oneof();
    if (field->is_repeated() || (oneof != nullptr && oneof->field(0) != field))
      continue;
    if (field->cpp_type() ==
        google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
      reflection->SetString(&message, field, value);
    } else if (field->cpp_type() ==
                   google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
               depth < 2) {
      NameEverywhere(*reflection->MutableMessage(&message, field), value,
                     depth + 1);
    }
  }
}

/// Calls `method` by name with `request` and `metadata`, whatever the
/// method's kind: on the wire a unary call is a stream of one message each
/// way, so one generic bidirectional call sends the request, half-closes,
/// reads every reply and returns the status.
grpc::Status CallByName(grpc::GenericStub& stub, const std::string& method,
                        const google::protobuf::Message& request,
                        const CallMetadata& metadata) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  AddCallMetadata(metadata, context);
  grpc::CompletionQueue queue;
  const auto next = [&queue] {
    void* tag = nullptr;
    bool ok = false;
    queue.Next(&tag, &ok);
    return ok;
  };
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &queue);
  call->StartCall(nullptr);
  bool ok = next();
  if (ok) {
    grpc::Slice slice(request.SerializeAsString());
    grpc::ByteBuffer bytes(&slice, 1);
    call->Write(bytes, nullptr);
    ok = next();
  }
  if (ok) {
    call->WritesDone(nullptr);
    ok = next();
  }
  grpc::ByteBuffer reply;
  while (ok) {
    call->Read(&reply, nullptr);
    ok = next();
  }
  grpc::Status status;
  call->Finish(&status, nullptr);
  next();
  queue.Shutdown();
  void* tag = nullptr;
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

/// `metadata` with the worker credential `credential` added.
CallMetadata WithCredential(CallMetadata metadata,
                            const std::string& credential) {
  metadata.emplace_back(kWorkerCredentialMetadataKey, credential);
  return metadata;
}

TEST(RpcAuthTest, TheTableDeclaresExactlyTheMethodsOfTheProtos) {
  const auto methods = MethodsOfTheProtos();
  EXPECT_EQ(methods.size(), DeclaredMethods().size());
  for (const auto& [method, unused] : methods) {
    EXPECT_TRUE(CallerCheckOf(method).has_value())
        << method << " declares no caller check";
  }
  for (std::string_view declared : DeclaredMethods()) {
    EXPECT_EQ(methods.count(std::string(declared)), 1u)
        << declared << " is in no proto";
  }
  // What a worker's credential guards, said a second time: calls that speak
  // for one worker (worker.proto, "Authentication").
  for (const char* method :
       {"/zbpp.v1.WorkerService/Session", "/zbpp.v1.WorkerService/ReportStep",
        "/zbpp.v1.WorkerService/ReportProfile",
        "/zbpp.v1.RendezvousService/Set", "/zbpp.v1.RendezvousService/Get",
        "/zbpp.v1.RendezvousService/Wait", "/zbpp.v1.RendezvousService/Add",
        "/zbpp.v1.RendezvousService/CompareSet",
        "/zbpp.v1.RendezvousService/Delete"}) {
    EXPECT_TRUE(CallerCheckOf(method) == CallerCheck::kWorkerCredential)
        << method;
  }
  EXPECT_FALSE(CallerCheckOf("/zbpp.v1.JobService/Nothing").has_value());
}

TEST(RpcAuthTest,
     EveryMethodRefusesACallerWithoutTheTokenOrTheWorkerCredential) {
  const std::string token_file = ::testing::TempDir() + "/rpc_auth_test_token";
  std::ofstream(token_file) << kToken;
  CoordinatorServer::Options options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.db = ":memory:";
  options.token_file = token_file;
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel((*server)->address(),
                                     grpc::InsecureChannelCredentials());
  const CallMetadata token = BearerTokenMetadata(kToken);

  // Two registered workers: requests name the first, calls carry the
  // second's credential as the wrong one.
  std::vector<v1::RegisterWorkerResponse> workers(2);
  for (int n = 0; n < 2; ++n) {
    v1::RegisterWorkerRequest request;
    request.mutable_worker()->set_address(
        absl::StrCat("10.0.0.", n + 1, ":7000"));
    request.mutable_worker()->set_host("node");
    request.mutable_worker()->set_device_kind(v1::DEVICE_KIND_CPU);
    request.mutable_worker()->set_memory_bytes(1 << 30);
    grpc::ClientContext context;
    AddCallMetadata(token, context);
    ASSERT_TRUE(v1::WorkerService::NewStub(channel)
                    ->RegisterWorker(&context, request, &workers[n])
                    .ok());
  }
  const std::string& worker_id = workers[0].worker_id();

  grpc::GenericStub stub(channel);
  std::map<std::string, int> refused;  // Calls per method that must be refused.
  const auto methods = MethodsOfTheProtos();
  ASSERT_GE(methods.size(), 18u);
  for (const auto& [method, request_type] : methods) {
    SCOPED_TRACE(method);
    std::unique_ptr<google::protobuf::Message> request(
        google::protobuf::MessageFactory::generated_factory()
            ->GetPrototype(request_type)
            ->New());
    NameEverywhere(*request, worker_id);
    const bool worker_call =
        CallerCheckOf(method) == CallerCheck::kWorkerCredential;
    const CallMetadata good = WithCredential(token, workers[0].credential());

    grpc::Status status = CallByName(
        stub, method, *request, WithCredential({}, workers[0].credential()));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(status.error_message(), HasSubstr("authorization: Bearer"));
    status = CallByName(
        stub, method, *request,
        WithCredential(BearerTokenMetadata("nope"), workers[0].credential()));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(status.error_message(), "wrong bearer token");
    refused[method] += 2;
    if (worker_call) {
      for (const CallMetadata& metadata :
           {token, WithCredential(token, workers[1].credential())}) {
        status = CallByName(stub, method, *request, metadata);
        EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
        EXPECT_THAT(status.error_message(), HasSubstr(worker_id));
        EXPECT_THAT(status.error_message(),
                    HasSubstr(kWorkerCredentialMetadataKey));
        EXPECT_THAT(status.error_message(),
                    ::testing::Not(HasSubstr(workers[1].credential())));
        ++refused[method];
      }
    }
    // The same request with the token and the credential gets past the
    // caller's check: what refused it above was the caller's proof.
    status = CallByName(stub, method, *request, good);
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << status.error_message();
  }

  // Each refusal is recorded under its method as UNAUTHENTICATED.
  const std::string metrics_address = (*server)->metrics_address();
  int metrics_port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      metrics_address.substr(metrics_address.rfind(':') + 1), &metrics_port));
  absl::StatusOr<metrics::testing::HttpReply> scraped =
      metrics::testing::HttpGet(metrics_port, "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  for (const auto& [method, count] : refused) {
    EXPECT_EQ(metrics::testing::FindSample(
                  scraped->body, "zbpp_rpc_duration_seconds_count",
                  {{"method", method}, {"code", "UNAUTHENTICATED"}})
                  .value_or(0),
              count)
        << method;
  }
}

}  // namespace
}  // namespace zbpp::coordinator
