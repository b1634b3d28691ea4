// The counting CPU allocator behind MemoryMeter: exact bytes per meter,
// per thread, and nothing counted without a meter.

#include "worker/runtime/memory_meter.h"

#include <optional>
#include <thread>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include "tests/worker/test_device.h"

namespace zbpp::worker {
namespace {

TEST(MemoryMeterTest, AllocatingAndFreeingMovesCurrentAndPeakByTheirBytes) {
  ASSERT_TRUE(InstallCountingCpuAllocator().ok());
  MemoryMeter meter;
  MemoryMeterScope scope(&meter);
  at::Tensor a = at::empty({1000}, at::kFloat);
  EXPECT_EQ(meter.current_bytes(), a.nbytes());
  at::Tensor b = at::empty({3, 7}, at::kDouble);
  EXPECT_EQ(meter.current_bytes(), a.nbytes() + b.nbytes());
  EXPECT_EQ(meter.peak_bytes(), a.nbytes() + b.nbytes());
  a.reset();
  EXPECT_EQ(meter.current_bytes(), b.nbytes());
  EXPECT_EQ(meter.peak_bytes(), 4000 + b.nbytes());
  meter.ResetPeak();
  EXPECT_EQ(meter.peak_bytes(), b.nbytes());
  // A view allocates nothing; an op's result does.
  at::Tensor view = b.view({-1});
  EXPECT_EQ(meter.current_bytes(), b.nbytes());
  at::Tensor square = b * b;
  EXPECT_EQ(meter.current_bytes(), 2 * b.nbytes());
  b.reset();
  view.reset();
  square.reset();
  EXPECT_EQ(meter.current_bytes(), 0);
  EXPECT_EQ(meter.peak_bytes(), 2 * 21 * 8);
}

TEST(MemoryMeterTest, TwoThreadsWithTwoMetersCountOnlyTheirOwnTensors) {
  MemoryMeter first, second;
  at::Tensor kept[2];
  auto run = [&](MemoryMeter* meter, int64_t elements, at::Tensor* keep) {
    MemoryMeterScope scope(meter);
    *keep = at::zeros({elements}, at::kFloat);
    for (int i = 0; i < 200; ++i) at::Tensor scratch = at::ones({elements}, at::kFloat);
  };
  std::thread t1(run, &first, 1000, &kept[0]);
  std::thread t2(run, &second, 3000, &kept[1]);
  t1.join();
  t2.join();
  EXPECT_EQ(first.current_bytes(), 4000);
  EXPECT_EQ(first.peak_bytes(), 8000);  // A scratch tensor beside the kept one at most.
  EXPECT_EQ(second.current_bytes(), 12000);
  EXPECT_EQ(second.peak_bytes(), 24000);
}

TEST(MemoryMeterTest, ATensorFreedOnAnotherThreadDecrementsItsOwnMeter) {
  MemoryMeter owner, other;
  std::optional<at::Tensor> tensor;
  {
    MemoryMeterScope scope(&owner);
    tensor = at::empty({512}, at::kDouble);
  }
  EXPECT_EQ(owner.current_bytes(), 4096);
  std::thread([&] {
    MemoryMeterScope scope(&other);
    tensor.reset();
  }).join();
  EXPECT_EQ(owner.current_bytes(), 0);
  EXPECT_EQ(owner.peak_bytes(), 4096);
  EXPECT_EQ(other.current_bytes(), 0);
  EXPECT_EQ(other.peak_bytes(), 0);
}

TEST(MemoryMeterTest, NoMeterCountsNothing) {
  MemoryMeter meter;
  at::Tensor before = at::empty({100}, at::kFloat);  // No scope yet.
  {
    MemoryMeterScope scope(&meter);
    {
      MemoryMeterScope none(nullptr);  // The innermost wins.
      at::Tensor uncounted = at::empty({100}, at::kFloat);
    }
    before.reset();  // Freed under the meter, allocated without one.
    EXPECT_EQ(meter.current_bytes(), 0);
    at::Tensor counted = at::empty({10}, at::kFloat);
    EXPECT_EQ(meter.current_bytes(), 40);
  }
  EXPECT_EQ(meter.current_bytes(), 0);
  EXPECT_EQ(meter.peak_bytes(), 40);
  at::Tensor after = at::empty({100}, at::kFloat);  // The scope ended.
  EXPECT_EQ(meter.current_bytes(), 0);
}

TEST(MemoryMeterTest, ATensorMayOutliveItsMeter) {
  at::Tensor survivor;
  {
    MemoryMeter meter;
    MemoryMeterScope scope(&meter);
    survivor = at::ones({64}, at::kFloat);
  }
  EXPECT_EQ(survivor.sum().item<float>(), 64);
  survivor.reset();  // Its meter's counts are gone; nothing to crash on.
}

TEST(MemoryMeterTest, RawAllocationsAndCopiesGoThroughTheCounter) {
  MemoryMeter meter;
  MemoryMeterScope scope(&meter);
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  void* raw = allocator->raw_allocate(100);
  EXPECT_EQ(meter.current_bytes(), 100);
  allocator->raw_deallocate(raw);
  EXPECT_EQ(meter.current_bytes(), 0);
  at::Tensor source = at::arange(16, at::kFloat);
  c10::DataPtr copy = allocator->clone(source.data_ptr(), source.nbytes());
  EXPECT_EQ(meter.current_bytes(), 2 * 64);
  EXPECT_EQ(static_cast<const float*>(copy.get())[15], 15.0f);
  copy.clear();
  EXPECT_EQ(meter.current_bytes(), 64);
}

TEST(MemoryMeterTest, DeviceMeterSeesTheDevicesTensors) {
  const c10::Device device = TestDevice();
  DeviceMemoryMeter meter(device);
  EXPECT_EQ(meter.cpu_meter() != nullptr, device.is_cpu());
  MemoryMeterScope scope(meter.cpu_meter());
  meter.ResetPeak();
  const int64_t start = meter.current_bytes();
  at::Tensor t = at::empty({1 << 20}, at::TensorOptions().dtype(at::kFloat).device(device));
  // The caching allocator rounds a block up (to 512 bytes); 4 MiB is exact.
  EXPECT_EQ(meter.current_bytes() - start, 4 << 20);
  t.reset();
  EXPECT_EQ(meter.current_bytes(), start);
  EXPECT_EQ(meter.peak_bytes() - start, 4 << 20);
}

}  // namespace
}  // namespace zbpp::worker
