#include "worker/runtime/loss_scaler.h"

#include <algorithm>

namespace zbpp::worker {

LossScaler LossScaler::FromSpec(const v1::JobSpec& spec) {
  if (spec.precision() != v1::PRECISION_FP16) return LossScaler(false, 1, 1);
  const v1::LossScaleSpec& s = spec.loss_scale();
  return LossScaler(true, s.has_initial_scale() ? s.initial_scale() : 65536.0,
                    s.has_growth_interval_steps() ? s.growth_interval_steps() : 2000);
}

void LossScaler::Update(bool found_inf_nan) {
  if (!enabled_) return;
  if (found_inf_nan) {
    scale_ = std::max(1.0, scale_ / 2);
    clean_steps_ = 0;
  } else if (++clean_steps_ >= growth_interval_steps_) {
    scale_ *= 2;
    clean_steps_ = 0;
  }
}

}  // namespace zbpp::worker
