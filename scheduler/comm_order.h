// The order of point-to-point messages for transports that match messages by
// their order between two stages rather than by tag (NCCL). Such a transport
// runs a pair's sends and receives, in both directions, one at a time in the
// order they were issued, and a send completes only once its receive was
// posted: both stages must issue a pair's messages in one order, derived from
// the schedule alone, and that order must not make a stage wait for a
// message that waits, through its pair's earlier messages, for a pass the
// other stage has not run yet.
//
// Post-update validation (paper §4) adds a second condition: each stage runs
// the first actions of step k+1, its speculative prefix, before it learns
// whether step k stands, and a transport that cannot cancel a posted
// operation must be able to settle a discard by completing exactly the
// prefixes' messages (CheckSpeculativePrefixes).
#ifndef ZBPP_SCHEDULER_COMM_ORDER_H_
#define ZBPP_SCHEDULER_COMM_ORDER_H_

#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// One message between two stages of a schedule: an input of a pass
/// (ForEachInput in scheduler/simulator.h) produced on another stage. The
/// activation an F of virtual stage s sends to the F of virtual stage s+1,
/// the input gradient a B (or BW) of virtual stage s sends to the B (or BW)
/// of virtual stage s-1, and with vocabulary passes (PassKind::kS, kT) the
/// output of F of the last virtual stage L to the S of every other stage,
/// an S's softmax statistics to the T of every other stage, and a T's part
/// of the gradient to B (or BW) of L, on the stage holding L. One pass may
/// thus produce several messages and consume several.
struct Message {
  int from = 0;  ///< Sending stage.
  int to = 0;    ///< Receiving stage.
  /// Indices in Schedule::actions[from] and [to]: the pass that produces
  /// the message and the pass that consumes it.
  int producer = 0;
  int consumer = 0;
};

/// A pair of stages (lower index first) and its messages in order.
using PairOrders = std::map<std::pair<int, int>, std::vector<Message>>;

/// Every message of `schedule`, per pair of stages,
/// in the order both stages of the pair can derive: first the messages
/// produced inside the sender's speculative prefix
/// (SpeculativePrefixLengths), then the others; within each group by the
/// end of the producing pass in the schedule simulated with unit costs
/// (T_F = T_B = T_W = T_S = T_T = 1, no communication), then by sender, then
/// by the producer's position, then by receiver and the consumer's position
/// (one pass's messages to several stages). A stage's sends to one peer thus keep its own pass
/// order, and the prefix messages lead each pair's order, as post-update
/// validation over NCCL needs (CheckSpeculativePrefixes).
/// Pairs without messages are absent. Errors: the simulator's, for a
/// schedule that is malformed, incomplete or deadlocked itself.
absl::StatusOr<PairOrders> DerivePairOrders(const Schedule& schedule);

/// The pair orders of a forward-only schedule (evaluation) in which every
/// stage runs its virtual stages in model order for microbatch 0, 1, ...:
/// each pair's activations by (microbatch, sending virtual stage), the order
/// every stage's passes follow, so it cannot deadlock. Requires exactly one
/// F per (virtual stage, microbatch) and no other pass, except under
/// vocabulary parallelism one S and one T per (stage, microbatch) after the
/// stage's F passes of that microbatch (the loss from every shard): then
/// each microbatch's activations are followed by the last virtual stage's
/// output to every other stage's S, then every S's statistics to every
/// other stage's T.
PairOrders ForwardOnlyPairOrders(const Schedule& forward);

/// OK when a transport that runs each pair's messages in `orders` (one at a
/// time on both stages; each waits for its producer, its consumer waits for
/// it) runs `schedule` to the end: the graph of each stage's passes in
/// order, each pair's messages in order, producer -> message -> consumer has
/// no cycle. Data-parallel reductions run on another group and are left out.
/// FailedPrecondition otherwise, naming the passes and messages of one cycle
/// (e.g. "stage 1: 1F3 -> message 1F3 => 2F3 -> stage 2: 2F3 -> ...").
/// InvalidArgument for a message in `orders` whose stages or passes are
/// not in `schedule`.
absl::Status CheckPairOrders(const Schedule& schedule, const PairOrders& orders);

/// The speculative prefix of each stage under post-update validation
/// (paper §4; worker/runtime/stage_trainer.h): the leading actions of its list
/// that it runs in step k+1 before it learns whether step k stands — every
/// action before its first B, BW or T (PassKind::kB, kBW, kT): the first
/// pass that accumulates gradients, which a discarded step could not undo.
/// An S (PassKind::kS) is a forward pass and may stand in a prefix. Size
/// `schedule.actions.size()` (p); entry r is a number of actions of
/// `schedule.actions[r]`, all of them for a list without B, BW or T. Pure; no
/// errors.
std::vector<int> SpeculativePrefixLengths(const Schedule& schedule);

/// OK when the speculative prefixes (SpeculativePrefixLengths) can run ahead
/// of the previous step's validation over a transport that runs each pair's
/// messages in `orders` (DerivePairOrders) and can cancel nothing (NCCL): on
/// a discard, every worker completes exactly the messages produced in the
/// prefixes, receiving into scratch, and the replay starts every pair's
/// order afresh. That holds when the prefixes are
///  (a) closed: every message consumed in its receiver's prefix is produced
///      in its sender's prefix, so the prefixes' messages are those produced
///      in a prefix, each of which can be completed; and
///  (b) leading: in each pair's order, every message produced in its
///      sender's prefix comes before every message that is not, so both
///      stages of the pair issue the prefix messages first and none of them
///      waits behind a message of the rest of the step.
/// With CheckPairOrders OK too, the prefixes then run to their ends with no
/// stage waiting for a pass that follows a prefix. Data-parallel reductions
/// are not messages (DerivePairOrders leaves them out).
/// An order that breaks only (b) is mended by moving each pair's prefix
/// messages, in their order, to its front: with closed prefixes a prefix
/// message then waits only for prefix passes and earlier prefix messages, so
/// CheckPairOrders stays OK. DerivePairOrders does exactly that, so its
/// orders satisfy (b) for every schedule and every registry schedule passes
/// (tests/scheduler/comm_order_test.cc); ordered by the unit-cost end times
/// alone, the V schedules would break (b), where a stage's first B and a
/// neighbour's last prefix forward end together or in that order.
/// FailedPrecondition otherwise, naming for each rule that fails its first
/// offending message (pairs in order, then the pair's order), the stages,
/// the passes in their text form (where "first B" is the action that ends
/// the prefix: I, B or T) and the rule, with "(N messages break this rule)" when more than
/// one does, e.g. "stage 0 runs 2F3 in
/// its speculative prefix, but its input comes from stage 1's 1F3, which
/// follows that stage's first B (3B0): prefix not closed", or "stages 0
/// and 1: message 0F3 => 1F3 comes from stage 0's speculative prefix, but
/// in the pair's order it follows message 1I0 => 0I0, which stage 1 sends
/// at or after its first B (1I0): prefix messages not leading".
/// InvalidArgument for a message in `orders` whose stages or passes are not
/// in `schedule`. Pure; thread-compatible.
absl::Status CheckSpeculativePrefixes(const Schedule& schedule, const PairOrders& orders);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_COMM_ORDER_H_
