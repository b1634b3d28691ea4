#ifndef ZBPP_TESTS_WORKER_TEST_DEVICE_H_
#define ZBPP_TESTS_WORKER_TEST_DEVICE_H_

#include <cstdio>
#include <cstdlib>

#include <c10/core/Device.h>

#include "worker/runtime/device.h"

namespace zbpp::worker {

/// The device the worker's numerical tests run their models on: the
/// ZBPP_TEST_DEVICE environment variable ("cpu" when unset; "cuda:0" when
/// scripts/gpu/run.sh runs them on a lent GPU machine, with LibTorch's CUDA
/// part preloaded into these CPU-linked binaries). A value that names no
/// usable device ends the binary with the reason: a GPU run must not pass
/// on the CPU.
inline c10::Device TestDevice() {
  const char* text = std::getenv("ZBPP_TEST_DEVICE");
  if (text == nullptr || *text == '\0') return c10::Device(c10::kCPU);
  absl::StatusOr<c10::Device> device = ParseDevice(text);
  if (!device.ok()) {
    std::fprintf(stderr, "ZBPP_TEST_DEVICE: %s\n", std::string(device.status().message()).c_str());
    std::fflush(stderr);
    // Not exit(): rank threads may be running, and static destructors under
    // them crash instead of exiting.
    std::_Exit(2);
  }
  return *device;
}

}  // namespace zbpp::worker

#endif  // ZBPP_TESTS_WORKER_TEST_DEVICE_H_
