#ifndef ZBPP_TESTS_COORDINATOR_RAW_CALL_H_
#define ZBPP_TESTS_COORDINATOR_RAW_CALL_H_

// Unary gRPC calls by method name with serialized bytes, for the coordinator
// server tests: grpc.health.v1 (whose stubs gRPC does not install) and
// requests no generated stub would send (bytes that do not parse).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/synchronization/notification.h"

namespace zbpp::coordinator::testing {

/// Calls `method` ("/package.Service/Method") on `channel` with the request
/// `bytes` and a 20 s deadline, plus `metadata` (key, value) pairs; the
/// serialized reply in `*reply` (empty unless OK).
inline grpc::Status RawUnaryCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    std::string* reply, const std::string& bytes = "",
    const std::vector<std::pair<std::string, std::string>>& metadata = {}) {
  grpc::GenericStub generic(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  absl::Notification answered;
  grpc::Status status;
  generic.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = s;
                      answered.Notify();
                    });
  answered.WaitForNotification();  // The deadline bounds it.
  reply->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

/// grpc.health.v1.HealthCheckResponse bytes: status SERVING (field 1 = 1)
/// and NOT_SERVING (field 1 = 2).
inline const std::string kServing("\x08\x01", 2);
inline const std::string kNotServing("\x08\x02", 2);

/// grpc.health.v1.Health/Check of `service` ("" for the server as a whole);
/// the reply's bytes in `*reply` (kServing, kNotServing).
inline grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                std::string* reply, const std::string& service = "") {
  // HealthCheckRequest.service is field 1, length-delimited.
  const std::string request =
      service.empty() ? "" : std::string(1, '\x0a') + char(service.size()) + service;
  return RawUnaryCall(channel, "/grpc.health.v1.Health/Check", reply, request);
}

}  // namespace zbpp::coordinator::testing

#endif  // ZBPP_TESTS_COORDINATOR_RAW_CALL_H_
