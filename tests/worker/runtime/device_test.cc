// The worker's --device and its pass timer (worker/runtime/device.h).

#include "worker/runtime/device.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/worker/test_device.h"

namespace zbpp::worker {
namespace {

TEST(DeviceTest, CpuIsAlwaysThere) {
  absl::StatusOr<c10::Device> device = ParseDevice("cpu");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(device->is_cpu());
  SynchronizeDevice(*device);  // Returns at once.
}

// A CPU worker offers its core's share of the host's RAM (/proc/meminfo's
// MemTotal over the online cores).
TEST(DeviceTest, CpuWorkerOffersItsCoresShareOfTheRam) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key && key != "MemTotal:") meminfo.ignore(256, '\n');
  ASSERT_TRUE(meminfo >> kib);
  const uint64_t share = kib * 1024 / std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const uint64_t offered = DeviceMemoryBytes(c10::Device(c10::kCPU));
  // sysconf's page count and MemTotal agree to a few MiB.
  EXPECT_NEAR(static_cast<double>(offered), static_cast<double>(share), 64.0 * (1 << 20));
}

TEST(DeviceTest, OtherSpellingsAreInvalidNamingTheFlag) {
  for (const std::string text : {"gpu", "cuda", "cuda:", "cuda:-1", "cuda:x", "cuda:0:1", "CPU",
                                 "cuda:256"}) {
    absl::StatusOr<c10::Device> device = ParseDevice(text);
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(device.status().message().find("--device must be cpu or cuda:N"),
              std::string::npos)
        << device.status();
  }
}

// This binary links LibTorch without its CUDA part, as every test binary
// does: to it no machine has a GPU, which is what a worker without one sees.
// On a GPU machine scripts/gpu/run.sh preloads the CUDA part and says so in
// ZBPP_TEST_DEVICE; there cuda:0 is usable and a device beyond the
// machine's is refused instead.
TEST(DeviceTest, CudaIsAFailedPreconditionInOneLineWithoutADevice) {
  const char* test_device = std::getenv("ZBPP_TEST_DEVICE");
  if (test_device != nullptr && absl::StartsWith(test_device, "cuda:")) {
    absl::StatusOr<c10::Device> usable = ParseDevice("cuda:0");
    ASSERT_TRUE(usable.ok()) << usable.status();
    EXPECT_TRUE(usable->is_cuda());
    absl::StatusOr<c10::Device> beyond = ParseDevice("cuda:255");
    EXPECT_EQ(beyond.status().code(), absl::StatusCode::kFailedPrecondition) << beyond.status();
    EXPECT_NE(beyond.status().message().find("CUDA devices here (cuda:0..cuda:"),
              std::string::npos)
        << beyond.status();
    return;
  }
  absl::StatusOr<c10::Device> device = ParseDevice("cuda:0");
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << device.status();
  const std::string message(device.status().message());
  EXPECT_EQ(message.rfind("--device cuda:0: no CUDA device here", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// Two passes timed on the test device (scripts/gpu/run.sh: cuda:0, where
// the timer records events and resolves them at the end), a third action
// never begun, as a reduction timed elsewhere would be.
TEST(PassTimerTest, TimesPassesInOrderAndLeavesOtherActionsAlone) {
  const c10::Device device = TestDevice();
  const auto step_start = std::chrono::steady_clock::now();
  PassTimer timer(device, step_start, 3);
  const at::Tensor a = at::rand({256, 256}, at::TensorOptions().device(device)) / 256;
  const double before_begin =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  for (size_t j : {0, 2}) {
    timer.Begin(j);
    at::Tensor b = a;
    for (int i = 0; i < 20; ++i) b = at::tanh(at::matmul(b, a));
    timer.End(j);
  }
  const double first = timer.Duration(0);
  EXPECT_GT(first, 0);
  std::vector<double> starts(3, -1), ends(3, -1);
  timer.Resolve(starts, ends);
  const double resolved_at =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  EXPECT_GE(starts[0], before_begin);  // On a GPU: not before it was queued.
  EXPECT_NEAR(ends[0] - starts[0], first, 1e-5);
  EXPECT_LE(ends[0], starts[2]);
  EXPECT_LT(starts[2], ends[2]);
  EXPECT_LE(ends[2], resolved_at);
  EXPECT_EQ(starts[1], -1);
  EXPECT_EQ(ends[1], -1);

  // A second End moves the end (the executor's --slow-stage stretch).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timer.End(2);
  const double before = ends[2];
  timer.Resolve(starts, ends);
  EXPECT_GE(ends[2] - before, 0.019);
}

}  // namespace
}  // namespace zbpp::worker
