#ifndef ZBPP_WORKER_COMM_GLOO_COMMUNICATOR_H_
#define ZBPP_WORKER_COMM_GLOO_COMMUNICATOR_H_

#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// How one rank joins a Gloo group.
struct GlooOptions {
  // --- Rendezvous ---
  /// The store the ranks meet through: CreateRendezvousStore (the
  /// coordinator) in the worker, c10d::HashStore in tests. Required. One
  /// group per store (or per c10d::PrefixStore over it): Gloo's keys are
  /// not unique across groups.
  c10::intrusive_ptr<c10d::Store> store;
  /// This rank, in [0, size).
  int rank = -1;
  /// Number of ranks, >= 1.
  int size = 0;
  /// How long creation waits for every peer to join, and the longest any
  /// Gloo operation may run (Gloo's context timeout: a Wait with
  /// absl::InfiniteDuration() ends after it); > 0.
  absl::Duration timeout = absl::Seconds(60);

  // --- Network ---
  /// Host name or address to bind and advertise ("127.0.0.1" for tests on
  /// one machine); empty: c10d's default device (this machine's host name,
  /// else loopback).
  std::string hostname;
};

/// A Communicator over c10d::ProcessGroupGloo (CPU tensors).
/// Blocks until all `size` ranks joined through the store: create the ranks
/// concurrently (one process or thread each).
///
/// Errors: InvalidArgument for bad options; DeadlineExceeded when the peers
/// did not all join within `timeout`; Unavailable/Internal for a store or
/// network failure (the message carries c10d's / Gloo's). No exception
/// escapes, here or from the returned object's methods.
///
/// Behaviour the executor must know (pinned by tests/worker/comm):
///  * A send completes only after the peer posted the matching Recv (Gloo's
///    rendezvous protocol): post Recvs before waiting on Sends, or two ranks
///    waiting on sends to each other deadlock until the timeout. The
///    in-process fake completes sends at once and will not show this.
///  * Any Wait that times out breaks the connection to that peer: Gloo
///    closes the pair ("Application timeout caused pair closure") and later
///    operations with the peer fail with Unavailable. Treat
///    DeadlineExceeded as fatal for the attempt and recreate the group.
///  * Gloo does not check shapes or dtypes. A message smaller than the
///    receive tensor silently fills only its front; a larger one makes Gloo
///    throw on its I/O thread, which terminates the process. Receive
///    tensors must have the sender's exact shape and dtype.
///  * Send and Recv keep a reference to the tensor until the op is
///    destroyed; still, do not modify a sent tensor before its Wait
///    returned, nor read a received one before.
///  * Gloo moves host memory: tensors on another device (a GPU worker on
///    this backend) travel through pinned host copies. Send of a device
///    tensor returns at once: the copy to the host runs on a stream of the
///    communicator's own, after the work already queued on the caller's
///    current stream (the pass that produced the tensor), and a thread of
///    the communicator issues the Gloo send when the copy is done, so the
///    caller's next pass is queued meanwhile. A receive lands in host
///    memory; its Wait queues the copy into the device tensor on the
///    caller's current stream, before whatever reads it. An all-reduce
///    copies synchronously. All device tensors a communicator sends must
///    be on one device (InvalidArgument otherwise). A staged send whose
///    PendingOp is destroyed before it was issued is not issued; Abort
///    gives up the queued ones at once (one whose copy is running, when the
///    copy ends).
///  * c10d's flight recorder (a process-wide record of every operation, for
///    post-mortem dumps zbpp never takes) is switched off at the first
///    group unless TORCH_FR_BUFFER_SIZE is set: with several groups in one
///    process (the thread-per-rank tests) torch 2.11's recorder corrupts its
///    own map and crashes.
///  * Wait(timeout) rounds the timeout up to whole milliseconds (>= 1 ms);
///    absl::InfiniteDuration() waits up to the group's `timeout`. Only the
///    wait of a collective is bounded by its `timeout`: Gloo keeps running
///    it until the group's `timeout`, and destroying the communicator
///    blocks until it ended (sooner when the peers' connections close).
///
/// Thread-safety: as Communicator's: Send/Recv from any thread, Waits from
/// other threads; collectives from one thread per rank, in the same order.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    GlooOptions options);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_GLOO_COMMUNICATOR_H_
