#include "worker/comm/rendezvous_store.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_grpc.h"
#include "zbpp/v1/rendezvous.grpc.pb.h"

namespace zbpp::worker {
namespace {

/// Headroom of an RPC's deadline over the wait it asks the service for, so
/// the service answers DEADLINE_EXCEEDED naming the keys before gRPC gives
/// up without naming them.
constexpr std::chrono::seconds kDeadlineMargin(5);

/// What c10d's "no timeout" becomes: the service needs a number.
constexpr std::chrono::hours kNoTimeoutWait(24);

class RendezvousStore final : public c10d::Store {
 public:
  RendezvousStore(std::shared_ptr<grpc::Channel> channel, std::string worker_id,
                  std::string scope, std::chrono::milliseconds timeout,
                  CallMetadata metadata)
      : c10d::Store(timeout),
        channel_(std::move(channel)),
        stub_(zbpp::v1::RendezvousService::NewStub(channel_)),
        metadata_(std::move(metadata)) {
    context_.set_worker_id(std::move(worker_id));
    context_.set_scope(std::move(scope));
  }

  /// A second store on the same channel, scope, timeout and metadata: every
  /// key lives in the coordinator, so the two see the same keys (c10d clones
  /// a store for a backend's own threads, e.g. NCCL's watchdog).
  c10::intrusive_ptr<c10d::Store> clone() override {
    return c10::make_intrusive<RendezvousStore>(
        channel_, context_.worker_id(), context_.scope(), timeout_, metadata_);
  }

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    zbpp::v1::SetRequest request;
    *request.mutable_context() = context_;
    request.set_key(key);
    request.set_value(ToString(value));
    zbpp::v1::SetResponse response;
    Call(&zbpp::v1::RendezvousService::Stub::Set, request, &response,
         std::chrono::milliseconds::zero(), "set", Quote(key));
  }

  std::vector<uint8_t> compareSet(
      const std::string& key, const std::vector<uint8_t>& currentValue,
      const std::vector<uint8_t>& newValue) override {
    zbpp::v1::CompareSetRequest request;
    *request.mutable_context() = context_;
    request.set_key(key);
    request.set_expected(ToString(currentValue));
    request.set_desired(ToString(newValue));
    zbpp::v1::CompareSetResponse response;
    Call(&zbpp::v1::RendezvousService::Stub::CompareSet, request, &response,
         std::chrono::milliseconds::zero(), "compareSet", Quote(key));
    return ToBytes(response.value());
  }

  std::vector<uint8_t> get(const std::string& key) override {
    zbpp::v1::GetRequest request;
    *request.mutable_context() = context_;
    request.set_key(key);
    const std::chrono::milliseconds limit = WaitFor(timeout_);
    request.set_timeout_seconds(Seconds(limit));
    zbpp::v1::GetResponse response;
    Call(&zbpp::v1::RendezvousService::Stub::Get, request, &response, limit,
         "get", Quote(key));
    return ToBytes(response.value());
  }

  int64_t add(const std::string& key, int64_t value) override {
    zbpp::v1::AddRequest request;
    *request.mutable_context() = context_;
    request.set_key(key);
    request.set_delta(value);
    zbpp::v1::AddResponse response;
    Call(&zbpp::v1::RendezvousService::Stub::Add, request, &response,
         std::chrono::milliseconds::zero(), "add", Quote(key));
    return response.value();
  }

  bool deleteKey(const std::string& key) override {
    zbpp::v1::DeleteRequest request;
    *request.mutable_context() = context_;
    request.set_key(key);
    zbpp::v1::DeleteResponse response;
    Call(&zbpp::v1::RendezvousService::Stub::Delete, request, &response,
         std::chrono::milliseconds::zero(), "deleteKey", Quote(key));
    return response.deleted();
  }

  bool check(const std::vector<std::string>& keys) override {
    // A wait of 0 seconds: the service's non-blocking check.
    zbpp::v1::WaitRequest request = WaitRequest(keys, 0);
    zbpp::v1::WaitResponse response;
    grpc::Status status =
        Rpc(&zbpp::v1::RendezvousService::Stub::Wait, request, &response,
            std::chrono::milliseconds::zero());
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return false;
    }
    ThrowIfError(status, "check", QuoteAll(keys));
    return true;
  }

  int64_t getNumKeys() override {
    throw std::runtime_error(absl::StrCat(
        "rendezvous getNumKeys in scope '", context_.scope(),
        "' is not supported: zbpp.v1.RendezvousService has no key count"));
  }

  void wait(const std::vector<std::string>& keys) override {
    wait(keys, timeout_);
  }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const std::chrono::milliseconds limit = WaitFor(timeout);
    zbpp::v1::WaitRequest request = WaitRequest(keys, Seconds(limit));
    zbpp::v1::WaitResponse response;
    Call(&zbpp::v1::RendezvousService::Stub::Wait, request, &response, limit,
         "wait", QuoteAll(keys));
  }

 private:
  static std::string ToString(const std::vector<uint8_t>& bytes) {
    return std::string(bytes.begin(), bytes.end());
  }
  static std::vector<uint8_t> ToBytes(const std::string& text) {
    return std::vector<uint8_t>(text.begin(), text.end());
  }
  static std::string Quote(const std::string& key) {
    return absl::StrCat("key '", key, "'");
  }
  static std::string QuoteAll(const std::vector<std::string>& keys) {
    return absl::StrCat("keys '", absl::StrJoin(keys, "', '"), "'");
  }
  static std::chrono::milliseconds WaitFor(std::chrono::milliseconds timeout) {
    return timeout == c10d::Store::kNoTimeout ? kNoTimeoutWait : timeout;
  }
  static double Seconds(std::chrono::milliseconds wait) {
    return std::chrono::duration<double>(wait).count();
  }

  zbpp::v1::WaitRequest WaitRequest(const std::vector<std::string>& keys,
                                    double timeout_seconds) const {
    zbpp::v1::WaitRequest request;
    *request.mutable_context() = context_;
    for (const std::string& key : keys) request.add_keys(key);
    request.set_timeout_seconds(timeout_seconds);
    return request;
  }

  /// Runs one RPC with a deadline of `wait` plus the margin, or the store's
  /// timeout for a call that does not wait (`wait` == 0). A call the
  /// coordinator's gRPC server refused for want of a handler thread ran
  /// nothing, so it is sent again (with back-off) until that deadline: a
  /// busy coordinator is not this attempt failing.
  template <typename Request, typename Response>
  grpc::Status Rpc(grpc::Status (zbpp::v1::RendezvousService::Stub::*method)(
                       grpc::ClientContext*, const Request&, Response*),
                   const Request& request, Response* response,
                   std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::system_clock::now() +
                          (wait.count() > 0 ? wait + kDeadlineMargin : WaitFor(timeout_));
    std::chrono::milliseconds backoff(10);
    while (true) {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      AddCallMetadata(metadata_, context);
      grpc::Status status = (stub_.get()->*method)(&context, request, response);
      if (!RefusedForThreads(status) ||
          std::chrono::system_clock::now() + backoff >= deadline) {
        return status;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(2 * backoff, std::chrono::milliseconds(500));
    }
  }

  /// gRPC's own refusal of a synchronous server out of threads; the
  /// rendezvous service's RESOURCE_EXHAUSTED (a scope's bounds) is final.
  static bool RefusedForThreads(const grpc::Status& status) {
    return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
           status.error_message() == "Server Threadpool Exhausted";
  }

  /// Rpc, throwing on any error.
  template <typename Request, typename Response>
  void Call(grpc::Status (zbpp::v1::RendezvousService::Stub::*method)(
                grpc::ClientContext*, const Request&, Response*),
            const Request& request, Response* response,
            std::chrono::milliseconds wait, const char* operation,
            const std::string& keys) {
    ThrowIfError(Rpc(method, request, response, wait), operation, keys);
  }

  void ThrowIfError(const grpc::Status& status, const char* operation,
                    const std::string& keys) const {
    if (status.ok()) return;
    throw std::runtime_error(absl::StrCat(
        "rendezvous ", operation, " of ", keys, " in scope '",
        context_.scope(), "' failed: ", FromGrpcStatus(status).ToString()));
  }

  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<zbpp::v1::RendezvousService::Stub> stub_;
  /// On every call (bearer token, worker credential).
  const CallMetadata metadata_;
  /// On every request.
  zbpp::v1::RendezvousContext context_;
};

}  // namespace

c10::intrusive_ptr<c10d::Store> CreateRendezvousStore(
    std::shared_ptr<grpc::Channel> channel, std::string worker_id,
    std::string scope, absl::Duration timeout, CallMetadata metadata) {
  return c10::make_intrusive<RendezvousStore>(
      std::move(channel), std::move(worker_id), std::move(scope),
      absl::ToChronoMilliseconds(timeout), std::move(metadata));
}

}  // namespace zbpp::worker
