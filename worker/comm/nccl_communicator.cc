#include "worker/comm/nccl_communicator.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "worker/comm/c10d_status.h"
#include "worker/comm/op_checks.h"

namespace zbpp::worker {
namespace {

// How often a blocking wait looks at its NCCL operation.
constexpr absl::Duration kPollInterval = absl::Microseconds(50);

// Blocks the caller's thread until `work` completed on the GPU, at most
// `timeout`; then orders the caller's current stream after it. c10d's
// WorkNCCL::isCompleted throws the error its watchdog recorded.
absl::Status WaitOnHost(c10d::Work& work, absl::Duration timeout, const std::string& what) {
  const absl::Time deadline = absl::Now() + timeout;
  try {
    while (!work.isCompleted()) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            what, ": not completed within ", absl::FormatDuration(timeout),
            " (a peer did not take part, or an earlier operation of the pair is still pending)"));
      }
      absl::SleepFor(kPollInterval);
    }
  } catch (...) {
    return CurrentExceptionToStatus(what);
  }
  return WaitForWork(work, absl::InfiniteDuration(), what);
}

class NcclOp final : public PendingOp {
 public:
  // `device`: the tensor NCCL moves; `host`: where the result goes once it
  // arrived, for a receive or an all-reduce of a host tensor (undefined
  // otherwise); `block`: Wait blocks the caller's thread until the operation
  // completed (a collective, or a result for the host) instead of only
  // ordering the caller's stream after it.
  NcclOp(c10::intrusive_ptr<c10d::Work> work, std::string what, at::Tensor device,
         at::Tensor host, bool block)
      : work_(std::move(work)),
        what_(std::move(what)),
        device_(std::move(device)),
        host_(std::move(host)),
        block_(block || host_.defined()) {}

  absl::Status Wait(absl::Duration timeout) override {
    if (!block_) {
      // The caller's stream waits on the GPU; its thread goes on.
      return WaitForWork(*work_, absl::InfiniteDuration(), what_);
    }
    absl::Status status = WaitOnHost(*work_, timeout, what_);
    if (status.ok() && host_.defined()) host_.copy_(device_);
    return status;
  }

 private:
  const c10::intrusive_ptr<c10d::Work> work_;
  const std::string what_;
  const at::Tensor device_;
  const at::Tensor host_;
  const bool block_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(c10::intrusive_ptr<c10d::ProcessGroupNCCL> group, const NcclOptions& options)
      : group_(std::move(group)),
        rank_(options.rank),
        size_(options.size),
        device_(options.device),
        timeout_(options.timeout) {}

  ~NcclCommunicator() override {
    if (aborted_.load()) return;  // abort() already tore the communicators down.
    try {
      group_->shutdown();
    } catch (...) {
      // A failed shutdown leaves nothing to do for a destructor; c10d logged it.
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor, int peer,
                                                  uint32_t tag) override {
    return PointToPoint(/*send=*/true, tensor, peer, tag);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> Recv(at::Tensor tensor, int peer,
                                                  uint32_t tag) override {
    return PointToPoint(/*send=*/false, tensor, peer, tag);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> StartAllReduceSum(at::Tensor tensor) override {
    const std::string what =
        absl::StrCat("rank ", rank_, " NCCL all-reduce of ", DescribeTensor(tensor));
    if (!tensor.defined() || !tensor.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the tensor must be defined and contiguous"));
    }
    if (aborted_.load()) return absl::AbortedError(absl::StrCat(what, ": aborted"));
    absl::StatusOr<at::Tensor> on_device = OnDevice(tensor, what);
    if (!on_device.ok()) return on_device.status();
    c10::cuda::CUDAGuard guard(device_);
    try {
      std::vector<at::Tensor> tensors{*on_device};
      c10d::AllreduceOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      c10::intrusive_ptr<c10d::Work> work = group_->allreduce(tensors, options);
      return std::make_unique<NcclOp>(std::move(work), what, *on_device,
                                      tensor.is_cpu() ? tensor : at::Tensor(), /*block=*/true);
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
  }

  absl::Status Barrier(absl::Duration timeout) override {
    return AllReduceSum(at::zeros({1}, at::TensorOptions().dtype(at::kFloat).device(device_)),
                        timeout);
  }

  void Abort() override {
    if (aborted_.exchange(true)) return;
    try {
      group_->abort();
    } catch (...) {
      // Aborting is best effort: the communicator is unusable either way.
    }
  }

  // Makes the communicator of every pair this rank belongs to, in one
  // global order of the pairs ((0,1), (0,2), ..., (1,2), ...): each pair
  // exchanges one small message. c10d makes a pair's communicator at its
  // first operation and blocks both ranks' threads until both arrived; in
  // the executor's order a rank could block there on a peer that blocks on
  // another peer first. In the global order the first pair not yet made
  // always has both ranks waiting for it, so all pairs get made.
  absl::Status ConnectPairs() {
    for (int low = 0; low < size_; ++low) {
      for (int high = low + 1; high < size_; ++high) {
        if (rank_ != low && rank_ != high) continue;
        const bool send = rank_ == low;
        const int peer = send ? high : low;
        at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device_));
        const std::string what = absl::StrCat("rank ", rank_, " connecting ranks ", low, " and ",
                                              high);
        absl::StatusOr<c10::intrusive_ptr<c10d::Work>> work = Issue(send, token, peer, what);
        if (!work.ok()) return work.status();
        c10::cuda::CUDAGuard guard(device_);
        if (absl::Status st = WaitOnHost(**work, timeout_, what); !st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }

 private:
  // The tensor NCCL moves for `tensor`: itself on this rank's device, a copy
  // there for a host tensor; InvalidArgument for another device.
  absl::StatusOr<at::Tensor> OnDevice(const at::Tensor& tensor, const std::string& what) const {
    if (tensor.is_cpu()) return tensor.to(device_);
    if (tensor.device() != device_) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the tensor is on ",
                                                     tensor.device().str(), ", this rank's NCCL "
                                                     "group on ", device_.str()));
    }
    return tensor;
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> PointToPoint(bool send, const at::Tensor& tensor,
                                                          int peer, uint32_t tag) {
    if (absl::Status valid = CheckPointToPoint(send, rank_, size_, peer, tag, tensor);
        !valid.ok()) {
      return valid;
    }
    const std::string what = absl::StrCat("NCCL ", DescribeOp(send, rank_, peer, tag));
    if (aborted_.load()) {
      return absl::AbortedError(absl::StrCat(what, ": the communicator was aborted"));
    }
    absl::StatusOr<at::Tensor> on_device =
        send ? OnDevice(tensor, what)
             : (tensor.is_cpu() ? absl::StatusOr<at::Tensor>(at::empty_like(tensor, device_))
                                : OnDevice(tensor, what));
    if (!on_device.ok()) return on_device.status();
    absl::StatusOr<c10::intrusive_ptr<c10d::Work>> work = Issue(send, *on_device, peer, what);
    if (!work.ok()) return work.status();
    at::Tensor host = !send && tensor.is_cpu() ? tensor : at::Tensor();
    return std::make_unique<NcclOp>(*std::move(work), what, *on_device, std::move(host),
                                    /*block=*/false);
  }

  // Queues NCCL's send or receive of `on_device` (on this rank's device)
  // on the pair's stream. c10d ignores NCCL tags: a pair's messages match
  // in issue order.
  absl::StatusOr<c10::intrusive_ptr<c10d::Work>> Issue(bool send, const at::Tensor& on_device,
                                                        int peer, const std::string& what) {
    c10::cuda::CUDAGuard guard(device_);
    try {
      std::vector<at::Tensor> tensors{on_device};
      return send ? group_->send(tensors, peer, 0) : group_->recv(tensors, peer, 0);
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
  }

  const c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;
  const int rank_;
  const int size_;
  const c10::Device device_;
  const absl::Duration timeout_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(NcclOptions options) {
  if (!options.store) return absl::InvalidArgumentError("NCCL communicator: no store");
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL communicator: rank ", options.rank,
                                                   " is not in [0, size) for size ",
                                                   options.size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("NCCL communicator: the timeout must be > 0");
  }
  if (!options.device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL communicator: device ", options.device.str(), " is not a CUDA device"));
  }
  const int devices = c10::cuda::device_count();
  if (!options.device.has_index() || options.device.index() >= devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL communicator: ", options.device.str(), " is not a usable GPU here (",
        devices, " CUDA device(s) visible); NCCL needs one GPU per rank"));
  }
  const std::string what = absl::StrCat("rank ", options.rank, " of ", options.size,
                                        " joining the NCCL group on ", options.device.str(),
                                        " (timeout ", absl::FormatDuration(options.timeout), ")");
  DisableFlightRecorderUnlessSet();
  // c10d's default on a failed or hung operation (SkipCleanUp) ends the
  // process; CleanUpOnly aborts the communicators and fails the operations,
  // which the attempt reports like any other transport failure.
  setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
  try {
    c10::cuda::CUDAGuard guard(options.device);
    // High-priority streams: a message is not queued behind compute kernels.
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create(/*is_high_priority_stream=*/true);
    nccl_options->timeout = std::chrono::milliseconds(ToMilliseconds(options.timeout));
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(options.store, options.rank,
                                                             options.size, nccl_options);
    auto communicator = std::make_unique<NcclCommunicator>(std::move(group), options);
    if (absl::Status st = communicator->ConnectPairs(); !st.ok()) {
      communicator->Abort();
      return absl::Status(st.code(), absl::StrCat(what, ": ", st.message()));
    }
    return communicator;
  } catch (...) {
    return CurrentExceptionToStatus(what);
  }
}

std::string GpuUuidText(const unsigned char (&bytes)[16]) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    absl::StrAppendFormat(&text, "%02x", bytes[i]);
  }
  return text;
}

absl::StatusOr<std::string> GpuIdentity(int index) {
  const int devices = c10::cuda::device_count();
  if (index < 0 || index >= devices) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", index, " is not a GPU here (", devices, " CUDA device(s) visible)"));
  }
  try {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
    unsigned char bytes[16];
    std::memcpy(bytes, prop->uuid.bytes, sizeof(bytes));
    return GpuUuidText(bytes);
  } catch (...) {
    return CurrentExceptionToStatus(absl::StrCat("reading the identity of cuda:", index));
  }
}

absl::Status ConfigureNcclForSharedGpuTests(const std::string& host_id) {
  if (host_id.empty()) {
    return absl::InvalidArgumentError("NCCL shared-GPU test setting: the host id is empty");
  }
  setenv("NCCL_HOSTID", host_id.c_str(), /*overwrite=*/1);
  setenv("NCCL_SOCKET_IFNAME", "lo", /*overwrite=*/1);
  setenv("NCCL_IB_DISABLE", "1", /*overwrite=*/1);
  return absl::OkStatus();
}

}  // namespace zbpp::worker
