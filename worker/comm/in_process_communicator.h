#ifndef ZBPP_WORKER_COMM_IN_PROCESS_COMMUNICATOR_H_
#define ZBPP_WORKER_COMM_IN_PROCESS_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// A group of `size` (>= 1) Communicators that move tensors through shared
/// memory: element r is rank r. For thread-per-rank tests of pipeline logic
/// (one thread per rank, one process) and the conformance suite's reference
/// backend.
///
/// Semantics, as Communicator's with these specifics:
///  * Send copies the tensor into the peer's mailbox for (sender, receiver,
///    tag) and completes at once (its Wait returns OK at once), so the
///    caller may reuse the tensor right after Send. Gloo instead completes
///    a send only when the peer posted its Recv: code that passes here may
///    still deadlock there (see gloo_communicator.h).
///  * Recv's Wait takes the oldest message of its (sender, receiver, tag)
///    mailbox and copies it into the tensor; InvalidArgument naming both
///    shapes and dtypes when they differ from the message's (the message is
///    consumed); DeadlineExceeded naming rank, peer and tag when none came
///    within the timeout.
///  * An all-reduce joins the group when its op is waited for (the start
///    only records the tensor). AllReduceSum and Barrier meet at a
///    generation-counted barrier; a rank
///    that times out withdraws its contribution, so the others can still
///    complete with a later arriving rank. InvalidArgument for every rank
///    when the ranks' tensors differ in shape or dtype (or some ranks call
///    Barrier while others call AllReduceSum).
///
/// Thread-safe: Send, Recv and Waits from any number of threads at once;
/// collectives from one thread per rank, as Communicator says. The
/// communicators share state and may be destroyed in any order.
std::vector<std::unique_ptr<Communicator>> CreateInProcessGroup(int size);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_IN_PROCESS_COMMUNICATOR_H_
