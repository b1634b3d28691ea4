#ifndef ZBPP_COORDINATOR_CORE_REPLICA_COMBINE_H_
#define ZBPP_COORDINATOR_CORE_REPLICA_COMBINE_H_

#include <cstdint>
#include <map>

#include "absl/status/statusor.h"
#include "coordinator/core/cost_model.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// Folds one replica's timing of a virtual stage into the step's sample
/// `combined`. Replicas run one schedule in lockstep (their reductions
/// meet), so a pass costs what the slowest replica took: the max of F, B
/// and W seconds. A reduction is timed from its issue and so includes
/// waiting for the replicas that issue it later; the replica that issues
/// it last measures the all-reduce alone: the min. Pure.
void CombineReplicaTiming(const VirtualStageTiming& replica, VirtualStageTiming& combined);

/// The validation outcome of `step` (job.proto ValidationOutcome) from
/// every worker's result, by worker index replica * `stages` + stage.
/// Replica 0's results stand for every replica's: the decision is the most
/// severe, the clip coefficient the smallest, rollback seconds summed, the
/// global norm NaN when any stage found inf/nan. FailedPrecondition naming
/// the step, stage and replica when a replica's result differs from
/// replica 0's in anything but its own timings: the replicas did not
/// validate the same reduced gradients. Pure.
absl::StatusOr<zbpp::v1::ValidationOutcome> GatherValidationOutcome(
    int64_t step, int stages,
    const std::map<int, zbpp::v1::ValidationResult>& results);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_REPLICA_COMBINE_H_
