#ifndef ZBPP_WORKER_COMM_RENDEZVOUS_STORE_H_
#define ZBPP_WORKER_COMM_RENDEZVOUS_STORE_H_

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/time/time.h"
#include "common/call_auth.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace zbpp::worker {

/// A c10d::Store over the coordinator's zbpp.v1.RendezvousService
/// (proto/zbpp/v1/rendezvous.proto), for GlooOptions::store: Gloo's
/// bootstrap goes through the coordinator, so a worker needs only its
/// address.
///
/// `worker_id` (RegisterWorkerResponse) and `scope`
/// (Assignment.rendezvous_scope) go in the RendezvousContext of every call,
/// and `metadata` (the bearer token when the coordinator has one, and the
/// worker credential under kWorkerCredentialMetadataKey) in its metadata;
/// the coordinator answers UNAUTHENTICATED without them and
/// PERMISSION_DENIED unless the worker holds the scope's attempt. `timeout` (> 0) is the store's c10d timeout: how long
/// get() and wait(keys) wait for keys; every RPC's deadline is its wait plus
/// a few seconds, and calls that do not wait get `timeout` as deadline.
///
/// c10d semantics: get blocks until the key exists; add keeps a decimal
/// counter (get reads it back as text); compareSet with an empty expected
/// value sets only an absent key and returns the value after the call;
/// check is a non-blocking wait; a timeout of 0 (c10d::Store::kNoTimeout),
/// as the store's or a wait's, waits 24 hours. getNumKeys is not supported (the service has no
/// such call) and throws.
///
/// Errors are thrown, as c10d::Store requires: std::runtime_error whose
/// message names the operation, the key(s), the scope, the gRPC code and
/// the service's message, e.g. "rendezvous get of key 'rank_1' in scope
/// 'job-3/1' failed: DEADLINE_EXCEEDED: ...". (GlooCommunicator converts
/// them to absl::Status.)
///
/// Thread-safe: c10d and Gloo call it from several threads.
c10::intrusive_ptr<c10d::Store> CreateRendezvousStore(
    std::shared_ptr<grpc::Channel> channel, std::string worker_id,
    std::string scope, absl::Duration timeout, CallMetadata metadata);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_RENDEZVOUS_STORE_H_
