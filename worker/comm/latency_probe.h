#ifndef ZBPP_WORKER_COMM_LATENCY_PROBE_H_
#define ZBPP_WORKER_COMM_LATENCY_PROBE_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// One-way point-to-point latency to `peer`, seconds, for
/// ReportStepRequest.hop_latencies (HopLatency.one_way_seconds,
/// proto/zbpp/v1/worker.proto): a ping-pong of one-element float tensors,
/// one untimed warm-up exchange then `rounds` (>= 1) timed ones.
///
/// Both ranks call it at the same point, one with `initiator` true. The
/// initiator returns (elapsed on its monotonic clock) / rounds / 2, i.e.
/// half the mean round trip (> 0); the responder only echoes and returns 0.
///
/// Messages use tags MakeTag(0, MessageKind::kControl, receiving rank,
/// round): no other kControl message may be in flight between the two ranks
/// meanwhile; activation and gradient messages may.
///
/// Errors: InvalidArgument for rounds < 1 or a bad peer; DeadlineExceeded
/// (naming peer and tag) when the whole probe took longer than `timeout`;
/// the communicator's errors otherwise. Thread-compatible: one call per
/// communicator at a time.
absl::StatusOr<double> MeasureOneWayLatency(Communicator& comm, int peer,
                                            bool initiator, int rounds,
                                            absl::Duration timeout);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_LATENCY_PROBE_H_
