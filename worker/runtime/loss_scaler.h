#ifndef ZBPP_WORKER_RUNTIME_LOSS_SCALER_H_
#define ZBPP_WORKER_RUNTIME_LOSS_SCALER_H_

#include <cstdint>

#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {

/// Dynamic loss scaling for float16 training (Micikevicius et al., "Mixed
/// Precision Training", ICLR 2018, §3.2; zbpp.v1.LossScaleSpec): the loss
/// is multiplied by scale() before the backward passes, so that small
/// gradients do not underflow float16; the optimizer divides the gradients
/// by it again. A step whose gradients overflowed (inf/nan anywhere, as
/// post-update validation finds out, paper §4) is skipped and the scale
/// halves; after `growth_interval_steps` steps in a row without overflow it
/// doubles. Powers of two only, so the unscaling is exact; never below 1.
///
/// Every worker keeps its own LossScaler and feeds it the same global
/// outcomes in the same order, so all workers agree on the scale without
/// exchanging it. Thread-compatible.
class LossScaler {
 public:
  /// FP16: enabled, from spec.loss_scale (defaults 2^16 and 2000 steps).
  /// Any other precision: scale 1 for good.
  static LossScaler FromSpec(const v1::JobSpec& spec);

  /// The scale of the step now running; 1 when disabled.
  double scale() const { return scale_; }
  /// Records the global outcome of the step that ran with scale(), once per
  /// step, in step order.
  void Update(bool found_inf_nan);
  /// Steps without overflow since the scale last changed.
  int64_t clean_steps() const { return clean_steps_; }
  /// Takes another scaler's scale() and clean_steps() (a heal's state copy,
  /// docs/elastic.md): both then decide the same from the same outcomes.
  void Restore(double scale, int64_t clean_steps) {
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

 private:
  LossScaler(bool enabled, double scale, int64_t growth_interval_steps)
      : enabled_(enabled), scale_(scale), growth_interval_steps_(growth_interval_steps) {}

  bool enabled_;
  double scale_;
  int64_t growth_interval_steps_;
  int64_t clean_steps_ = 0;  // Steps without overflow since the last change.
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_LOSS_SCALER_H_
