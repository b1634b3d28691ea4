// NcclCommunicatorFactory (attempt_runner.h), apart from the rest of the
// attempt runner so that only binaries that may run on a GPU link
// libtorch_cuda (worker/daemon/CMakeLists.txt).

#include <utility>

#include "worker/comm/nccl_communicator.h"
#include "worker/daemon/attempt_runner.h"

namespace zbpp::worker {

CommunicatorFactory NcclCommunicatorFactory(std::shared_ptr<grpc::Channel> channel,
                                            const SessionClient* session, c10::Device device,
                                            absl::Duration timeout) {
  return [channel = std::move(channel), session, device, timeout](
             const v1::Assignment& assignment, const std::string& group, int rank, int size) {
    NcclOptions nccl;
    nccl.store = AttemptGroupStore(channel, *session, assignment, group, timeout);
    nccl.rank = rank;
    nccl.size = size;
    nccl.device = device;
    nccl.timeout = timeout;
    return CreateNcclCommunicator(std::move(nccl));
  };
}

}  // namespace zbpp::worker
