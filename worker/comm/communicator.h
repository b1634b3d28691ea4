#ifndef ZBPP_WORKER_COMM_COMMUNICATOR_H_
#define ZBPP_WORKER_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zbpp::worker {

/// One point-to-point operation in flight (a send or a receive).
///
/// Thread-compatible: one thread waits on it.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  /// Blocks until the operation completed. For a receive, the tensor given
  /// to Recv holds the data afterwards. Returns DeadlineExceeded naming the
  /// peer and tag when `timeout` passed first, Unavailable/Internal when the
  /// transport failed (a peer died, a connection broke). Call at most once.
  virtual absl::Status Wait(absl::Duration timeout) = 0;
};

/// Moves tensors between the pipeline ranks of one job attempt (tensors never
/// travel over gRPC). Ranks are pipeline ranks in [0, size()).
///
/// Every point-to-point operation carries {peer, tag}; the caller keeps tags
/// unique among operations in flight between the same two ranks (derive them
/// from step, microbatch, pass and chunk: see MakeTag). Messages between two
/// ranks with different tags may complete in any order; a send matches the
/// receive with the same (sender, receiver, tag).
///
/// Thread-safety: Send and Recv may be called from one thread while other
/// threads wait on PendingOps; collectives (StartAllReduceSum, AllReduceSum,
/// Barrier) must be called by every rank in the same order, from one thread
/// per rank.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This rank, in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks (p).
  virtual int size() const = 0;

  /// Starts sending `tensor` (contiguous; on any device: Gloo stages a
  /// device tensor through host memory) to `peer`. The caller must keep
  /// `tensor` alive and unmodified until the op's Wait returned.
  /// InvalidArgument for a bad peer (self or out of range) or a
  /// non-contiguous tensor.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor,
                                                          int peer, uint32_t tag) = 0;

  /// Starts receiving into `tensor` (preallocated with the sender's shape and
  /// dtype, contiguous) from `peer`. Same errors as Send.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> Recv(at::Tensor tensor, int peer,
                                                          uint32_t tag) = 0;

  /// Starts the in-place element-wise sum of `tensor` (same shape and dtype
  /// on every rank) over all ranks; the op's Wait(timeout) returns when the
  /// sum is in `tensor` (readable by the caller's thread), DeadlineExceeded
  /// when some rank did not join within `timeout`. Every rank starts its
  /// all-reduces in the same order, from one thread, and may wait for them
  /// on another; the caller keeps `tensor` alive and unread until Wait
  /// returned. Where the transport launches the operation is where Start is
  /// called (NCCL enqueues it on its stream there): starting collectives in
  /// the schedule's order gives every rank one launch order across its
  /// communicators (docs/transport.md). InvalidArgument for an undefined or
  /// non-contiguous tensor.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> StartAllReduceSum(at::Tensor tensor) = 0;

  /// StartAllReduceSum and its Wait(timeout), on the calling thread.
  absl::Status AllReduceSum(at::Tensor tensor, absl::Duration timeout) {
    absl::StatusOr<std::unique_ptr<PendingOp>> op = StartAllReduceSum(std::move(tensor));
    if (!op.ok()) return op.status();
    return (*op)->Wait(timeout);
  }

  /// Returns when every rank called Barrier; DeadlineExceeded after `timeout`.
  virtual absl::Status Barrier(absl::Duration timeout) = 0;

  /// Gives the attempt up: every point-to-point op in flight returns Aborted
  /// from its Wait at once (a thread blocked there is released), and later
  /// Send/Recv calls fail with Aborted. Collectives already started still
  /// end only when they complete or time out. The communicator is then only
  /// good for destruction. Thread-safe: meant to be called from another
  /// thread than the one running the step (e.g. on the coordinator's
  /// AbortCommand). Idempotent.
  virtual void Abort() = 0;
};

/// The pass a point-to-point message belongs to: activations flow forward
/// (F), input gradients flow backward (B), control messages (latency
/// probes) use kControl and the post-update validation states (paper §4)
/// kValidation.
enum class MessageKind : uint32_t {
  kActivation = 0,
  kGradient = 1,
  kControl = 2,
  kValidation = 3
};

/// A tag unique among the messages of a window of 16 consecutive steps:
/// bits [0,9] microbatch, [10,18] receiving virtual stage, [19,20] kind,
/// [21,24] step mod 16, [25] generation mod 2 (a step replayed after a
/// rollback runs as generation 1, so its messages never match the discarded
/// speculative ones). Requires microbatch < 1024 and stage < 512, the
/// job-spec caps (coordinator/core/job_spec_check.h); Gloo takes tags as
/// int, and the result stays below 2^26.
inline uint32_t MakeTag(int64_t step, MessageKind kind, int stage, int microbatch,
                        int generation = 0) {
  return (static_cast<uint32_t>(generation & 1) << 25) |
         (static_cast<uint32_t>(step & 0xF) << 21) |
         (static_cast<uint32_t>(kind) << 19) |
         (static_cast<uint32_t>(stage & 0x1FF) << 10) |
         static_cast<uint32_t>(microbatch & 0x3FF);
}

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_COMM_COMMUNICATOR_H_
