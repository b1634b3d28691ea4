#ifndef ZBPP_WORKER_COMM_ORDER_STRICT_COMMUNICATOR_H_
#define ZBPP_WORKER_COMM_ORDER_STRICT_COMMUNICATOR_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// A group of in-process Communicators that match point-to-point messages
/// the way NCCL does, and fail loudly where NCCL would hang or mix tensors
/// up: for thread-per-rank tests of the executor's message order on a
/// machine without a GPU.
struct OrderStrictGroup {
  /// Element r is rank r.
  std::vector<std::unique_ptr<Communicator>> ranks;
  /// OK when every operation issued so far was matched; FailedPrecondition
  /// naming each unmatched one (rank, peer, tag, tensor, its position in the
  /// pair's order) otherwise, e.g. a receive posted for a message that was
  /// never sent. Call between steps, when every rank's step returned.
  /// Thread-safe.
  std::function<absl::Status()> check_idle;
};

/// Makes an order-strict group of `size` (>= 1) ranks. Semantics, as
/// Communicator's with these specifics:
///  * Messages match by position, not by tag: the n-th operation rank a
///    issues towards rank b (a send to it or a receive from it, in one
///    sequence for both directions) meets the n-th operation b issues
///    towards a. The two must be a send and a receive with the same tag,
///    shape and dtype — NCCL ignores tags, so a tag that differs is a
///    message NCCL would deliver to the wrong receive — and anything else is
///    a mismatch: every operation of the group in flight or issued later
///    fails with FailedPrecondition naming both ranks and both messages
///    ("order mismatch between ranks 0 and 1 at their message #3: rank 0
///    issued send to peer 1, tag 7, [2, 3] Float; rank 1 issued send to
///    peer 0, tag 9, [2, 3] Float").
///  * A send completes (its Wait returns) only once its receive is matched,
///    as a large NCCL send; a Wait that times out returns DeadlineExceeded
///    naming the operation and its position in the pair's order.
///  * Send copies the tensor when it is issued; the receive tensor is filled
///    when the two operations meet.
///  * AllReduceSum and Barrier behave as CreateInProcessGroup's.
/// Thread-safe as Communicator's. The communicators share state and may be
/// destroyed in any order.
OrderStrictGroup CreateOrderStrictGroup(int size);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_ORDER_STRICT_COMMUNICATOR_H_
