#include "coordinator/core/replica_combine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/pipeline_shape.h"

namespace zbpp::coordinator {
namespace {

// Why two replicas' validations of one stage and step differ ("" when
// they agree): everything but the timings (rollback seconds, replays),
// which are each worker's own.
std::string ValidationMismatch(const zbpp::v1::ValidationResult& a,
                               const zbpp::v1::ValidationResult& b) {
  auto same = [](double x, double y) {
    return x == y || (std::isnan(x) && std::isnan(y));
  };
  if (a.mode() != b.mode()) {
    return absl::StrCat("mode ", zbpp::v1::ValidationMode_Name(b.mode()), " vs ",
                        zbpp::v1::ValidationMode_Name(a.mode()));
  }
  if (a.decision() != b.decision()) {
    return absl::StrCat("decision ", zbpp::v1::ValidationDecision_Name(b.decision()),
                        " vs ", zbpp::v1::ValidationDecision_Name(a.decision()));
  }
  if (a.found_inf_nan() != b.found_inf_nan()) {
    return absl::StrCat("found_inf_nan ", b.found_inf_nan(), " vs ", a.found_inf_nan());
  }
  if (!same(a.global_grad_norm_sq(), b.global_grad_norm_sq())) {
    return absl::StrCat("global_grad_norm_sq ", b.global_grad_norm_sq(), " vs ",
                        a.global_grad_norm_sq());
  }
  if (!same(a.clip_coefficient(), b.clip_coefficient())) {
    return absl::StrCat("clip_coefficient ", b.clip_coefficient(), " vs ",
                        a.clip_coefficient());
  }
  if (a.rolled_back() != b.rolled_back()) {
    return absl::StrCat("rolled_back ", b.rolled_back(), " vs ", a.rolled_back());
  }
  return "";
}

}  // namespace

void CombineReplicaTiming(const VirtualStageTiming& replica, VirtualStageTiming& combined) {
  combined.f_seconds = std::max(combined.f_seconds, replica.f_seconds);
  combined.b_seconds = std::max(combined.b_seconds, replica.b_seconds);
  combined.w_seconds = std::max(combined.w_seconds, replica.w_seconds);
  if (replica.reduce_seconds.has_value()) {
    combined.reduce_seconds =
        combined.reduce_seconds.has_value()
            ? std::min(*combined.reduce_seconds, *replica.reduce_seconds)
            : *replica.reduce_seconds;
  }
}

absl::StatusOr<zbpp::v1::ValidationOutcome> GatherValidationOutcome(
    int64_t step, int stages,
    const std::map<int, zbpp::v1::ValidationResult>& results) {
  // Every replica validates the same all-reduced gradients: a replica whose
  // result differs from replica 0's ran on other gradients, and going on
  // would let the replicas' parameters drift apart.
  for (const auto& [index, result] : results) {
    if (index < stages) continue;
    const int stage = StageOfWorker(index, stages);
    const std::string why = ValidationMismatch(results.at(stage), result);
    if (why.empty()) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "validation of step ", step, ": stage ", stage, " replica ",
        ReplicaOfWorker(index, stages), " disagrees with replica 0 (", why,
        "); the data-parallel replicas did not validate the same reduced gradients"));
  }
  zbpp::v1::ValidationOutcome outcome;
  outcome.set_step(step);
  double clip = 1;
  // Replica 0's results (worker indexes [0, p)) stand for every replica's.
  for (const auto& [index, result] : results) {
    if (index >= stages) continue;
    outcome.set_mode(result.mode());
    outcome.set_found_inf_nan(outcome.found_inf_nan() || result.found_inf_nan());
    outcome.set_global_grad_norm(std::sqrt(result.global_grad_norm_sq()));
    if (result.decision() > outcome.decision()) outcome.set_decision(result.decision());
    clip = std::min(clip, result.clip_coefficient());
    if (result.rolled_back()) outcome.add_rolled_back_stages(index);
    outcome.set_rollback_seconds(outcome.rollback_seconds() + result.rollback_seconds());
  }
  outcome.set_clip_coefficient(clip);
  // The squared norms sum the finite stages only (a stage with an inf/nan
  // gradient adds 0): the global norm is not a number then (job.proto).
  if (outcome.found_inf_nan()) {
    outcome.set_global_grad_norm(std::numeric_limits<double>::quiet_NaN());
  }
  return outcome;
}

}  // namespace zbpp::coordinator
