#ifndef ZBPP_WORKER_COMM_NCCL_COMMUNICATOR_H_
#define ZBPP_WORKER_COMM_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zbpp::worker {

/// How one rank joins an NCCL group.
struct NcclOptions {
  /// The store the ranks meet through (CreateRendezvousStore in the worker,
  /// c10d::FileStore / TCPStore in tests). Required. One group per store
  /// (or per c10d::PrefixStore over it).
  c10::intrusive_ptr<c10d::Store> store;
  /// This rank, in [0, size).
  int rank = -1;
  /// Number of ranks, >= 1.
  int size = 0;
  /// This rank's GPU (a CUDA device). One rank per GPU, except under the
  /// test setting of ConfigureNcclForSharedGpuTests.
  c10::Device device = c10::Device(c10::kCUDA, 0);
  /// The longest any operation may run before c10d's watchdog declares it
  /// hung, and the longest a blocking wait waits; > 0.
  absl::Duration timeout = absl::Seconds(60);
};

/// A Communicator over c10d::ProcessGroupNCCL (the wheel's libtorch_cuda;
/// nothing of zbpp's below it). docs/transport.md describes how the
/// executor orders the messages for it.
///
/// Errors: InvalidArgument for bad options; FailedPrecondition when this
/// process cannot use NCCL on `options.device` (no GPU, no driver, a device
/// index out of range: a CPU-only machine gets this, in one line);
/// Unavailable/Internal for a store or NCCL failure (the message carries
/// c10d's). No exception escapes, here or from the returned object.
///
/// Behaviour the executor must know (pinned by tests/worker/comm):
///  * Messages between two ranks match by their order, not by tag: the
///    tags are checked for range and otherwise ignored. Both ranks must
///    issue a pair's sends and receives, in both directions, in one order
///    (scheduler/comm_order.h), or they deadlock or exchange the wrong
///    tensors (a shape mismatch corrupts or hangs; NCCL does not check).
///  * Each pair of ranks talks on a communicator and CUDA stream of its own
///    (c10d's two-rank communicators for single sends and receives), made
///    at the creation of this object for every pair, in one global order,
///    so that lazy creation cannot make two ranks wait for each other. A
///    pair's operations run one at a time in issue order; operations of
///    different pairs never wait for one another.
///  * Send and Recv return at once: the operation is queued on the pair's
///    stream after the work already queued on the caller's current stream
///    (the pass that produced a sent tensor). Wait(timeout) makes the
///    caller's current stream wait for the operation — the compute that
///    follows waits on the GPU, the caller's thread does not — and returns
///    OK; it returns an error when c10d already saw the operation fail. For
///    a tensor on the host (the post-update validation states), Send copies
///    it to the device first and Wait of a receive copies the result back
///    and blocks until it is there.
///  * StartAllReduceSum enqueues the all-reduce at once; its Wait (and
///    AllReduceSum, and Barrier) blocks the caller's thread until it is done
///    (at most `timeout`); a host tensor goes through the device.
///  * A silent peer: a Wait does not notice it; the operation hangs on the
///    GPU until c10d's watchdog reaches `timeout` and aborts the
///    communicators, after which every operation fails. Abort does the same
///    at once.
///
/// Thread-safety: as Communicator's.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(NcclOptions options);

/// The identity of CUDA device `index`, the same for every process that
/// sees the device on any host (its UUID, GpuUuidText of
/// cudaDeviceProp::uuid, e.g. "GPU-5f0c9e7a-1b3d-4c6e-8f2a-0b1c3d5e7f90";
/// in Kubernetes two pods on one node are two hosts, and their GPU's UUID
/// still tells that they share it): ranks with the same identity share a
/// GPU. FailedPrecondition when there is no such device (a CPU-only
/// machine).
absl::StatusOr<std::string> GpuIdentity(int index);

/// A GPU's 16-byte UUID as nvidia-smi prints it: "GPU-" and 32 lower-case
/// hex digits in groups of 8-4-4-4-12. Pure.
std::string GpuUuidText(const unsigned char (&bytes)[16]);

/// TEST-ONLY: lets several NCCL ranks share one GPU by presenting this
/// process to NCCL as its own host (`host_id`, distinct per process) that
/// talks over sockets on loopback: sets NCCL_HOSTID, NCCL_SOCKET_IFNAME=lo
/// and NCCL_IB_DISABLE=1 in the environment. Correct and ordered, never
/// fast; a kernel that fills every SM can starve the peer's NCCL kernel.
/// Call before the first NCCL group is made. InvalidArgument for an empty
/// `host_id`.
absl::Status ConfigureNcclForSharedGpuTests(const std::string& host_id);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_NCCL_COMMUNICATOR_H_
