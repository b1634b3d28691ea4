#ifndef ZBPP_TESTS_WORKER_COMM_COORDINATOR_HARNESS_H_
#define ZBPP_TESTS_WORKER_COMM_COORDINATOR_HARNESS_H_

// A real coordinator (core over in-memory SQLite) serving the
// RendezvousService on 127.0.0.1:0, and jobs assigned to fake workers, so
// that the RendezvousStore talks to the real service with real access
// checks.

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "common/call_auth.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/service/rendezvous_service.h"
#include "coordinator/store/sqlite_store.h"

namespace zbpp::worker::testing {

/// Who a rank is to the rendezvous service.
struct RendezvousIdentity {
  std::string worker_id;
  std::string scope;
  /// The worker credential, as call metadata for CreateRendezvousStore.
  CallMetadata metadata;
};

class CoordinatorHarness {
 public:
  /// Starts the service. Errors: the coordinator's or the server's.
  static absl::StatusOr<std::unique_ptr<CoordinatorHarness>> Start();
  ~CoordinatorHarness();

  /// Submits a job of `size` stages and registers `size` fresh workers,
  /// which the coordinator assigns to it; element r is pipeline rank r.
  absl::StatusOr<std::vector<RendezvousIdentity>> AssignJob(int size);

  /// A channel to the service.
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  CoordinatorHarness() = default;

  std::unique_ptr<coordinator::SqliteStore> store_;
  std::unique_ptr<coordinator::Coordinator> core_;
  std::unique_ptr<coordinator::RendezvousServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  int workers_registered_ = 0;
};

}  // namespace zbpp::worker::testing

#endif  // ZBPP_TESTS_WORKER_COMM_COORDINATOR_HARNESS_H_
