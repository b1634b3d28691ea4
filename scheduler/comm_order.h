// The order of point-to-point messages for transports that match messages by
// their order between two ranks rather than by tag (NCCL). Such a transport
// runs a pair's sends and receives, in both directions, one at a time in the
// order they were issued, and a send completes only once its receive was
// posted: both ranks must issue a pair's messages in one order, derived from
// the schedule alone, and that order must not make a rank wait for a
// message that waits, through its pair's earlier messages, for a pass the
// rank has not run yet.
#ifndef ZBPP_SCHEDULER_COMM_ORDER_H_
#define ZBPP_SCHEDULER_COMM_ORDER_H_

#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// One message between two workers of a schedule: the activation an F of
/// virtual stage s sends to the F of stage s+1, or the input gradient a B
/// (or BW) of stage s sends to the B (or BW) of stage s-1, when the two
/// stages are on different workers.
struct Message {
  int from = 0;  ///< Sending worker.
  int to = 0;    ///< Receiving worker.
  /// Indices in Schedule::actions[from] and [to]: the pass that produces
  /// the message and the pass that consumes it.
  int producer = 0;
  int consumer = 0;
};

/// A pair of workers (lower index first) and its messages in order.
using PairOrders = std::map<std::pair<int, int>, std::vector<Message>>;

/// Every message of `schedule`, per pair of workers,
/// in the order both workers of the pair can derive: by the end of the
/// producing pass in the schedule simulated with unit costs (T_F = T_B =
/// T_W = 1, no communication), then by sender, then by the producer's
/// position. A worker's sends to one peer thus keep its own pass order.
/// Pairs without messages are absent. Errors: the simulator's, for a
/// schedule that is malformed, incomplete or deadlocked itself.
absl::StatusOr<PairOrders> DerivePairOrders(const Schedule& schedule);

/// OK when a transport that runs each pair's messages in `orders` (one at a
/// time on both ranks; each waits for its producer, its consumer waits for
/// it) runs `schedule` to the end: the graph of each worker's passes in
/// order, each pair's messages in order, producer -> message -> consumer has
/// no cycle. Data-parallel reductions run on another group and are left out.
/// FailedPrecondition otherwise, naming the passes and messages of one cycle
/// (e.g. "worker 1: 1F3 -> message 1F3 => 2F3 -> worker 2: 2F3 -> ...").
/// InvalidArgument for a message in `orders` whose workers or passes are
/// not in `schedule`.
absl::Status CheckPairOrders(const Schedule& schedule, const PairOrders& orders);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_COMM_ORDER_H_
