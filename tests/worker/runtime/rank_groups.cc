#include "tests/worker/runtime/rank_groups.h"

#include <mutex>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "absl/strings/str_cat.h"
#include "tests/worker/test_device.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/nccl_communicator.h"

namespace zbpp::worker {
namespace {

constexpr absl::Duration kJoinTimeout = absl::Seconds(60);

}  // namespace

// One per process: FileStore counts its users per process.
c10::intrusive_ptr<c10d::Store> RunStore(const RankProcess& process) {
  static std::once_flag once;
  static c10::intrusive_ptr<c10d::Store> store;
  std::call_once(once, [&] {
    store = c10::make_intrusive<c10d::FileStore>(process.store_path, process.size);
  });
  return store;
}

std::string TransportName(TestTransport transport) {
  return transport == TestTransport::kGloo ? "Gloo" : "Nccl";
}

bool TransportAvailable(TestTransport transport) {
  return transport == TestTransport::kGloo || TestDevice().is_cuda();
}

absl::StatusOr<std::unique_ptr<Communicator>> JoinTestGroup(TestTransport transport,
                                                            const RankProcess& process,
                                                            const std::string& group, int rank,
                                                            int size) {
  auto store = c10::make_intrusive<c10d::PrefixStore>(group, RunStore(process));
  if (transport == TestTransport::kGloo) {
    GlooOptions options;
    options.store = store;
    options.rank = rank;
    options.size = size;
    options.timeout = kJoinTimeout;
    options.hostname = "127.0.0.1";
    return CreateGlooCommunicator(options);
  }
  if (absl::Status st =
          ConfigureNcclForSharedGpuTests(absl::StrCat("zbpp-test-rank-", process.rank));
      !st.ok()) {
    return st;
  }
  NcclOptions options;
  options.store = store;
  options.rank = rank;
  options.size = size;
  options.device = TestDevice();
  options.timeout = kJoinTimeout;
  return CreateNcclCommunicator(options);
}

}  // namespace zbpp::worker
