// Dynamic loss scaling (worker/runtime/loss_scaler.h).

#include "worker/runtime/loss_scaler.h"

#include <gtest/gtest.h>

namespace zbpp::worker {
namespace {

v1::JobSpec Fp16(double initial, int64_t interval) {
  v1::JobSpec spec;
  spec.set_precision(v1::PRECISION_FP16);
  spec.mutable_loss_scale()->set_initial_scale(initial);
  spec.mutable_loss_scale()->set_growth_interval_steps(interval);
  return spec;
}

TEST(LossScalerTest, HalvesOnOverflowAndDoublesAfterTheInterval) {
  LossScaler scaler = LossScaler::FromSpec(Fp16(1024, 3));
  EXPECT_EQ(scaler.scale(), 1024);
  scaler.Update(/*found_inf_nan=*/true);
  EXPECT_EQ(scaler.scale(), 512);
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 512) << "two clean steps of three";
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 1024);
  // An overflow restarts the count.
  scaler.Update(false);
  scaler.Update(false);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 512);
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 512);
}

TEST(LossScalerTest, NeverBelowOne) {
  LossScaler scaler = LossScaler::FromSpec(Fp16(2, 100));
  scaler.Update(true);
  scaler.Update(true);
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 1);
}

TEST(LossScalerTest, DefaultsAndOtherPrecisions) {
  v1::JobSpec spec;
  spec.set_precision(v1::PRECISION_FP16);
  EXPECT_EQ(LossScaler::FromSpec(spec).scale(), 65536);
  for (v1::Precision precision :
       {v1::PRECISION_UNSPECIFIED, v1::PRECISION_FP32, v1::PRECISION_BF16}) {
    spec.set_precision(precision);
    spec.mutable_loss_scale()->set_initial_scale(1024);
    LossScaler scaler = LossScaler::FromSpec(spec);
    scaler.Update(true);
    EXPECT_EQ(scaler.scale(), 1) << v1::Precision_Name(precision);
  }
}

}  // namespace
}  // namespace zbpp::worker
