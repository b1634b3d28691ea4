#ifndef ZBPP_WORKER_COMM_LATENCY_PROBE_H_
#define ZBPP_WORKER_COMM_LATENCY_PROBE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// One-way point-to-point time to `peer` of a message like `message` (its
/// shape, dtype and device; a pipeline job passes one microbatch's
/// activation, [b, s, h] float32 on the worker's device, so that the result
/// is the paper's T_comm of that link, latency and bandwidth together, §5),
/// seconds, for ReportStepRequest.hop_latencies (HopLatency.one_way_seconds,
/// proto/zbpp/v1/worker.proto): a ping-pong, one untimed warm-up exchange
/// then `rounds` (>= 1) timed ones.
///
/// Both ranks call it at the same point with messages of the same shape and
/// dtype, one with `initiator` true. The initiator returns (elapsed on its
/// monotonic clock) / rounds / 2, i.e. half the mean round trip (> 0); the
/// responder only echoes and returns 0.
///
/// Messages use tags MakeTag(0, MessageKind::kControl, receiving rank,
/// round): no other kControl message may be in flight between the two ranks
/// meanwhile; activation and gradient messages may.
///
/// Errors: InvalidArgument for rounds < 1, an undefined `message` or a bad
/// peer; DeadlineExceeded (naming peer and tag) when the whole probe took
/// longer than `timeout`; the communicator's errors otherwise.
/// Thread-compatible: one call per communicator at a time.
absl::StatusOr<double> MeasureOneWayLatency(Communicator& comm, int peer,
                                            bool initiator, int rounds,
                                            absl::Duration timeout,
                                            const at::Tensor& message);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_LATENCY_PROBE_H_
