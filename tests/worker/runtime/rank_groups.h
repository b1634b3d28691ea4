#ifndef ZBPP_TESTS_WORKER_RUNTIME_RANK_GROUPS_H_
#define ZBPP_TESTS_WORKER_RUNTIME_RANK_GROUPS_H_

// Communicators for tests whose ranks are processes (rank_processes.h):
// Gloo over loopback, or NCCL on the test device with the shared-GPU test
// setting, all groups of a run meeting through one c10d::FileStore.

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "tests/worker/rank_processes.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

enum class TestTransport { kGloo, kNccl };

/// "Gloo" / "Nccl", for test names.
std::string TransportName(TestTransport transport);

/// True when `transport` can run here: Gloo always; NCCL with a CUDA test
/// device (ZBPP_TEST_DEVICE=cuda:N).
bool TransportAvailable(TestTransport transport);

/// The c10d::FileStore every rank process of the run shares (one per
/// process); tests may coordinate their ranks through it.
c10::intrusive_ptr<c10d::Store> RunStore(const RankProcess& process);

/// Joins group `group` (a key prefix, the same on every member) as `rank` of
/// `size`, from the child process `process`. NCCL on the test device, this
/// process presenting its own host identity to NCCL (the shared-GPU test
/// setting, set at the first call); Gloo on 127.0.0.1. Blocks until every
/// member joined; the communicator's errors otherwise.
absl::StatusOr<std::unique_ptr<Communicator>> JoinTestGroup(TestTransport transport,
                                                            const RankProcess& process,
                                                            const std::string& group, int rank,
                                                            int size);

}  // namespace zbpp::worker

#endif  // ZBPP_TESTS_WORKER_RUNTIME_RANK_GROUPS_H_
