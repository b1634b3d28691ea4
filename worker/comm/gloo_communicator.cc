#include "worker/comm/gloo_communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/c10d_status.h"
#include "worker/comm/op_checks.h"

namespace zbpp::worker {
namespace {

/// The point-to-point ops in flight, so that Abort can release their
/// waiters (c10d's Send/RecvWork::abort cancels Gloo's wait).
class InFlight {
 public:
  /// False when already aborted (the op is then aborted at once).
  bool Add(const c10::intrusive_ptr<c10d::Work>& work) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (aborted_) return false;
    works_.insert(work.get());
    return true;
  }
  void Remove(const c10::intrusive_ptr<c10d::Work>& work) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    works_.erase(work.get());
  }
  bool aborted() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return aborted_;
  }
  /// Aborts every op in flight. The ops stay alive meanwhile: each is owned
  /// by its GlooOp, which removes it (under this lock) before releasing it.
  void AbortAll() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    for (c10d::Work* work : works_) work->abort();
  }

 private:
  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::set<c10d::Work*> works_ ABSL_GUARDED_BY(mu_);
};

class GlooOp final : public PendingOp {
 public:
  // `staged_into`: for a receive of a device tensor through a host buffer,
  // the device tensor the buffer is copied into once it arrived.
  GlooOp(c10::intrusive_ptr<c10d::Work> work, std::string what,
         std::shared_ptr<InFlight> in_flight, at::Tensor host, at::Tensor staged_into)
      : work_(std::move(work)),
        what_(std::move(what)),
        in_flight_(std::move(in_flight)),
        host_(std::move(host)),
        staged_into_(std::move(staged_into)) {}
  ~GlooOp() override { in_flight_->Remove(work_); }

  absl::Status Wait(absl::Duration timeout) override {
    absl::Status status = WaitForWork(*work_, timeout, what_);
    // From pinned memory: queued on the caller's stream, before the pass
    // that reads the tensor.
    if (status.ok() && staged_into_.defined()) staged_into_.copy_(host_, /*non_blocking=*/true);
    return status;
  }

 private:
  // Holds the tensor (c10d's SendWork/RecvWork keep a reference).
  const c10::intrusive_ptr<c10d::Work> work_;
  const std::string what_;
  const std::shared_ptr<InFlight> in_flight_;
  const at::Tensor host_;
  const at::Tensor staged_into_;
};

// Gloo moves host memory: a tensor on another device (a GPU worker on this
// backend) travels through a host copy. This one is pinned, so that the
// copy between it and the device runs asynchronously on a stream;
// contiguous, like `tensor`.
at::Tensor PinnedLike(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
}

// A send of a device tensor on its way: its copy to the host is queued on
// the stager's stream; the stager's thread issues the Gloo send once the
// copy is done. Shared by the stager and the PendingOp; the last one to let
// go takes the send off the communicator's ops in flight.
struct StagedSend {
  explicit StagedSend(std::shared_ptr<InFlight> ops) : in_flight(std::move(ops)) {}
  ~StagedSend() {
    if (work) in_flight->Remove(work);
  }
  // Settles the send as given up, for `why`, unless it is settled already.
  void GiveUp(absl::Status why) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    if (settled) return;
    settled = true;
    status = std::move(why);
  }

  const std::shared_ptr<InFlight> in_flight;
  absl::Mutex mu;
  // Issued (`work`) or given up (`status` says why): no longer pending.
  bool settled ABSL_GUARDED_BY(mu) = false;
  // The PendingOp is gone: nobody waits for the send, it is not issued.
  bool abandoned ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
  // Set under `mu` when issued; read without it only in the destructor.
  c10::intrusive_ptr<c10d::Work> work;
};

// Sends of device tensors without blocking the caller (the executor's
// compute thread) on the pass that produced them: the copy to pinned host
// memory waits for that pass on a stream of its own, ordered after the
// caller's stream by an event, and a thread issues each Gloo send when its
// copy is done. The caller's next pass is queued meanwhile. Thread-safe.
class DeviceSendStager {
 public:
  // `issue` starts the Gloo send of a host tensor and adds it to the ops in
  // flight; it runs on the stager's thread and throws nothing.
  using Issue = std::function<absl::StatusOr<c10::intrusive_ptr<c10d::Work>>(at::Tensor host,
                                                                             int peer, int tag)>;

  DeviceSendStager(const c10::Device& device, Issue issue)
      : device_(device),
        guard_(c10::impl::getDeviceGuardImpl(device.type())),
        stream_(guard_->getStreamFromGlobalPool(device, /*isHighPriority=*/false)),
        issue_(std::move(issue)),
        thread_([this] { Loop(); }) {}

  // Sends still queued are given up, not issued.
  ~DeviceSendStager() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  const c10::Device& device() const { return device_; }

  // Gives up the sends whose copies are still queued (Communicator::Abort),
  // so that their waiters return at once.
  void AbortQueued() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (Item& item : queue_) item.send->GiveUp(absl::AbortedError("the communicator was aborted"));
  }

  // Queues the copy of `tensor` (on this stager's device) after the work
  // already queued on the caller's current stream, and its send.
  std::shared_ptr<StagedSend> Stage(const at::Tensor& tensor, int peer, int tag,
                                    std::shared_ptr<InFlight> in_flight) {
    c10::Event produced(device_.type());
    produced.record(guard_->getStream(device_));
    produced.block(stream_);
    // The caching allocator must not hand the tensor's memory out again
    // before the copy on this stream read it.
    guard_->recordDataPtrOnStream(tensor.storage().data_ptr(), stream_);
    Item item{PinnedLike(tensor), peer, tag,
              std::make_unique<c10::Event>(device_.type()),
              std::make_shared<StagedSend>(std::move(in_flight))};
    {
      c10::StreamGuard on_stream(stream_);
      item.host.copy_(tensor, /*non_blocking=*/true);
    }
    item.copied->record(stream_);
    std::shared_ptr<StagedSend> send = item.send;
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(item));
    return send;
  }

 private:
  struct Item {
    at::Tensor host;
    int peer;
    int tag;
    std::unique_ptr<c10::Event> copied;
    std::shared_ptr<StagedSend> send;
  };

  void Loop() {
    while (true) {
      Item item;
      bool stopping = false;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](DeviceSendStager* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
              return s->stopping_ || !s->queue_.empty();
            },
            this));
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
        stopping = stopping_;
      }
      if (stopping) {
        item.send->GiveUp(absl::CancelledError("the communicator was destroyed first"));
        continue;
      }
      absl::Status copied;
      try {
        item.copied->synchronize();
      } catch (...) {
        copied = CurrentExceptionToStatus("copying the device tensor to the host");
      }
      absl::MutexLock lock(&item.send->mu);
      if (item.send->settled || item.send->abandoned) continue;  // Aborted, or unwanted.
      item.send->settled = true;
      if (!copied.ok()) {
        item.send->status = copied;
        continue;
      }
      absl::StatusOr<c10::intrusive_ptr<c10d::Work>> work = issue_(item.host, item.peer, item.tag);
      if (work.ok()) {
        item.send->work = *std::move(work);
      } else {
        item.send->status = work.status();
      }
    }
  }

  const c10::Device device_;
  const c10::impl::DeviceGuardImplInterface* const guard_;
  const c10::Stream stream_;
  const Issue issue_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Last: starts once the members above exist.
};

// The PendingOp of a staged send: waits for the stager to issue it, then
// for Gloo.
class StagedSendOp final : public PendingOp {
 public:
  StagedSendOp(std::shared_ptr<StagedSend> send, std::string what)
      : send_(std::move(send)), what_(std::move(what)) {}
  ~StagedSendOp() override {
    absl::MutexLock lock(&send_->mu);
    send_->abandoned = true;
  }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    c10::intrusive_ptr<c10d::Work> work;
    {
      absl::MutexLock lock(&send_->mu);
      if (!send_->mu.AwaitWithDeadline(absl::Condition(&send_->settled), deadline)) {
        return absl::DeadlineExceededError(
            absl::StrCat(what_, ": the device tensor's copy to the host did not finish within ",
                         absl::FormatDuration(timeout)));
      }
      if (!send_->status.ok()) {
        return absl::Status(send_->status.code(),
                            absl::StrCat(what_, ": ", send_->status.message()));
      }
      work = send_->work;
    }
    return WaitForWork(*work, std::max(deadline - absl::Now(), absl::ZeroDuration()), what_);
  }

 private:
  const std::shared_ptr<StagedSend> send_;
  const std::string what_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group, int rank,
                   int size)
      : group_(std::move(group)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor,
                                                  int peer,
                                                  uint32_t tag) override {
    return PointToPoint(true, tensor, peer, tag);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> Recv(at::Tensor tensor, int peer,
                                                  uint32_t tag) override {
    return PointToPoint(false, tensor, peer, tag);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> StartAllReduceSum(at::Tensor tensor) override {
    std::string what = absl::StrCat("rank ", rank_, " all-reduce of ", DescribeTensor(tensor));
    if (!tensor.defined() || !tensor.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the tensor must be defined and contiguous"));
    }
    try {
      c10d::AllreduceOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      // Gloo sums host memory: a device tensor goes through a host copy,
      // copied back when the op is waited for.
      at::Tensor host = tensor.is_cpu() ? tensor : tensor.to(at::kCPU);
      std::vector<at::Tensor> tensors{host};
      c10::intrusive_ptr<c10d::Work> work = group_->allreduce(tensors, options);
      // Not among the ops Abort cancels: a collective runs to its end.
      return std::make_unique<GlooOp>(std::move(work), std::move(what), in_flight_,
                                      std::move(host),
                                      tensor.is_cpu() ? at::Tensor() : tensor);
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
  }

  // Only the wait is bounded by `timeout` (c10d's Gloo does not honour the
  // timeout in BarrierOptions); the barrier itself runs until Gloo's context
  // timeout.
  absl::Status Barrier(absl::Duration timeout) override {
    const std::string what = absl::StrCat("rank ", rank_, " barrier");
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = group_->barrier();
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
    return WaitForWork(*work, timeout, what);
  }

  void Abort() override {
    in_flight_->AbortAll();
    absl::MutexLock lock(&stager_mu_);
    if (stager_ != nullptr) stager_->AbortQueued();
  }

 private:
  absl::StatusOr<std::unique_ptr<PendingOp>> PointToPoint(
      bool send, at::Tensor tensor, int peer, uint32_t tag) {
    absl::Status valid =
        CheckPointToPoint(send, rank_, size_, peer, tag, tensor);
    if (!valid.ok()) return valid;
    std::string what = DescribeOp(send, rank_, peer, tag);
    if (tag > static_cast<uint32_t>(INT_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": Gloo tags are int, the tag is too large"));
    }
    if (in_flight_->aborted()) {
      return absl::AbortedError(absl::StrCat(what, ": the communicator was aborted"));
    }
    try {
      if (send && !tensor.is_cpu()) {
        absl::StatusOr<DeviceSendStager*> stager = Stager(tensor.device());
        if (!stager.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": ", stager.status().message()));
        }
        return std::make_unique<StagedSendOp>(
            (*stager)->Stage(tensor, peer, static_cast<int>(tag), in_flight_), std::move(what));
      }
      at::Tensor host = tensor;
      at::Tensor staged_into;
      if (!tensor.is_cpu()) {
        host = PinnedLike(tensor);
        staged_into = tensor;
      }
      c10::intrusive_ptr<c10d::Work> work = Start(send, host, peer, static_cast<int>(tag));
      return std::make_unique<GlooOp>(std::move(work), std::move(what), in_flight_,
                                      std::move(host), std::move(staged_into));
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
  }

  const c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  const int rank_;
  const int size_;
  // Starts Gloo's send or receive of the host tensor `host` and adds it to
  // the ops in flight (aborted at once when the communicator was). Throws
  // c10d's and Gloo's errors.
  c10::intrusive_ptr<c10d::Work> Start(bool send, const at::Tensor& host, int peer, int tag) {
    std::vector<at::Tensor> tensors{host};
    c10::intrusive_ptr<c10d::Work> work;
    {
      absl::MutexLock lock(&p2p_mu_);
      work = send ? group_->send(tensors, peer, tag) : group_->recv(tensors, peer, tag);
    }
    if (!in_flight_->Add(work)) work->abort();
    return work;
  }

  // The stager of this rank's device tensors, made at the first send of
  // one: every device tensor must be on that device.
  absl::StatusOr<DeviceSendStager*> Stager(const c10::Device& device)
      ABSL_LOCKS_EXCLUDED(stager_mu_) {
    absl::MutexLock lock(&stager_mu_);
    if (stager_ == nullptr) {
      stager_ = std::make_unique<DeviceSendStager>(
          device, [this](at::Tensor host, int peer, int tag) { return IssueSend(host, peer, tag); });
    } else if (device != stager_->device()) {
      return absl::InvalidArgumentError(absl::StrCat("the tensor is on ", device.str(),
                                                     ", earlier sends' on ",
                                                     stager_->device().str()));
    }
    return stager_.get();
  }

  // The Gloo send of a staged tensor, on the stager's thread.
  absl::StatusOr<c10::intrusive_ptr<c10d::Work>> IssueSend(const at::Tensor& host, int peer,
                                                           int tag) {
    if (in_flight_->aborted()) return absl::AbortedError("the communicator was aborted");
    try {
      return Start(/*send=*/true, host, peer, tag);
    } catch (...) {
      return CurrentExceptionToStatus("sending the device tensor's host copy");
    }
  }

  const std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  // ProcessGroupGloo counts its operations in a plain integer: its
  // point-to-point calls from the caller's thread and the stager's are
  // made one at a time (each only posts the operation).
  absl::Mutex p2p_mu_;
  absl::Mutex stager_mu_;
  // Last: destroyed first, its thread done before the group goes.
  std::unique_ptr<DeviceSendStager> stager_ ABSL_GUARDED_BY(stager_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    GlooOptions options) {
  if (!options.store) {
    return absl::InvalidArgumentError("Gloo communicator: no store");
  }
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gloo communicator: rank ", options.rank,
                     " is not in [0, size) for size ", options.size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "Gloo communicator: the timeout must be > 0");
  }
  const std::string what =
      absl::StrCat("rank ", options.rank, " of ", options.size,
                   " joining the Gloo group (timeout ",
                   absl::FormatDuration(options.timeout), ")");
  DisableFlightRecorderUnlessSet();
  try {
    auto gloo_options =
        c10d::ProcessGroupGloo::Options::create(ToMilliseconds(options.timeout));
    gloo_options->devices.push_back(
        options.hostname.empty()
            ? c10d::ProcessGroupGloo::createDefaultDevice()
            : c10d::ProcessGroupGloo::createDeviceForHostname(
                  options.hostname));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        options.store, options.rank, options.size, gloo_options);
    return std::make_unique<GlooCommunicator>(std::move(group), options.rank,
                                              options.size);
  } catch (...) {
    return CurrentExceptionToStatus(what);
  }
}

}  // namespace zbpp::worker
