// Helpers over zbpp.v1.StepBreakdown (job.proto: where a stage's time went
// in a step and in the gap before it), shared by the coordinator, which
// averages the workers' reports, and zbppctl, which averages steps and
// names the parts. Protobuf messages only.

#ifndef ZBPP_API_STEP_BREAKDOWN_H_
#define ZBPP_API_STEP_BREAKDOWN_H_

#include <string>
#include <vector>

#include "zbpp/v1/job.pb.h"

namespace zbpp {

/// One part of a StepBreakdown: its field and its name in words.
struct BreakdownPart {
  /// The field's descriptor name, e.g. "input_wait_seconds".
  std::string field;
  /// What the report calls it, e.g. "input waits".
  std::string label;
  /// The seconds of this part in `b`.
  double Of(const v1::StepBreakdown& b) const;
};

/// The step span's parts, in job.proto's order: compute, input waits, send
/// waits, validation check, reduction waits, executor overhead. Their sum
/// is the step's span.
const std::vector<BreakdownPart>& SpanParts();

/// The gap's parts, in job.proto's order (drain, validation, optimizer,
/// evaluation, checkpoint, report, grant, other); their sum is
/// gap_seconds.
const std::vector<BreakdownPart>& GapParts();

/// to += factor * from, for every field (a mean is a sum of the terms with
/// factor 1 / n). Thread-safe (pure).
void AddBreakdown(const v1::StepBreakdown& from, double factor, v1::StepBreakdown& to);

}  // namespace zbpp

#endif  // ZBPP_API_STEP_BREAKDOWN_H_
