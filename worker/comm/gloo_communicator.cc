#include "worker/comm/gloo_communicator.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gloo/common/error.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/exception.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker/comm/op_checks.h"

namespace zbpp::worker {
namespace {

/// The exception in flight as a Status: "<context>: <what>". c10d's
/// TimeoutError is DeadlineExceeded; other c10d and Gloo timeouts are told
/// only in words ("Timed out waiting 200ms for recv", "Operation timed out!",
/// HashStore's "Wait timeout", the RendezvousStore's "DEADLINE_EXCEEDED"),
/// hence the text match, which
/// leaves Gloo's "Application timeout caused pair closure" (an earlier
/// timeout broke the connection) Unavailable with the other I/O errors;
/// anything else is Internal. Call only inside a catch block.
absl::Status CurrentExceptionToStatus(const std::string& context) {
  std::string what;
  absl::StatusCode code = absl::StatusCode::kInternal;
  try {
    throw;
  } catch (const c10d::TimeoutError& e) {
    what = e.what_without_backtrace();
    code = absl::StatusCode::kDeadlineExceeded;
  } catch (const c10::Error& e) {
    // what() appends a stack trace; the message alone is what helps.
    what = e.what_without_backtrace();
  } catch (const gloo::IoException& e) {
    what = e.what();
    code = absl::StatusCode::kUnavailable;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  std::string lower = what;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (absl::StrContains(lower, "timed out") ||
      absl::StrContains(lower, "wait timeout") ||
      absl::StrContains(lower, "deadline_exceeded")) {
    code = absl::StatusCode::kDeadlineExceeded;
  }
  return absl::Status(code, absl::StrCat(context, ": ", what));
}

/// A Wait timeout in c10d's terms. c10d reads 0 ms (kNoTimeout, declared at
/// global scope in c10d/Work.hpp) as "no timeout", after which Gloo's
/// context timeout applies, so finite timeouts become >= 1 ms.
std::chrono::milliseconds ToMilliseconds(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return kNoTimeout;
  return std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(
                               timeout, absl::Milliseconds(1)))));
}

/// Waits for a c10d work item, naming `what` in every error.
absl::Status WaitForWork(c10d::Work& work, absl::Duration timeout,
                         const std::string& what) {
  try {
    if (!work.wait(ToMilliseconds(timeout))) {
      return absl::AbortedError(absl::StrCat(what, ": aborted"));
    }
    return absl::OkStatus();
  } catch (...) {
    return CurrentExceptionToStatus(what);
  }
}

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
    if (status.ok() && staged_into_.defined()) staged_into_.copy_(host_);
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
// backend) travels through a host copy. Contiguous, like `tensor`.
at::Tensor HostCopy(const at::Tensor& tensor, bool with_data) {
  return with_data ? tensor.to(at::kCPU)
                   : at::empty(tensor.sizes(), tensor.options().device(at::kCPU));
}

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

  absl::Status AllReduceSum(at::Tensor tensor,
                            absl::Duration timeout) override {
    const std::string what = absl::StrCat("rank ", rank_, " all-reduce of ",
                                          DescribeTensor(tensor));
    if (!tensor.defined() || !tensor.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the tensor must be defined and contiguous"));
    }
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    const at::Tensor host = tensor.is_cpu() ? tensor : HostCopy(tensor, /*with_data=*/true);
    absl::Status status = Collective(
        [&] {
          std::vector<at::Tensor> tensors{host};
          return group_->allreduce(tensors, options);
        },
        timeout, what);
    if (status.ok() && !tensor.is_cpu()) tensor.copy_(host);
    return status;
  }

  absl::Status Barrier(absl::Duration timeout) override {
    return Collective([&] { return group_->barrier(); }, timeout,
                      absl::StrCat("rank ", rank_, " barrier"));
  }

  void Abort() override { in_flight_->AbortAll(); }

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
      at::Tensor host = tensor;
      at::Tensor staged_into;
      if (!tensor.is_cpu()) {
        host = HostCopy(tensor, /*with_data=*/send);
        if (!send) staged_into = tensor;
      }
      std::vector<at::Tensor> tensors{host};
      c10::intrusive_ptr<c10d::Work> work =
          send ? group_->send(tensors, peer, static_cast<int>(tag))
               : group_->recv(tensors, peer, static_cast<int>(tag));
      if (!in_flight_->Add(work)) work->abort();
      return std::make_unique<GlooOp>(std::move(work), std::move(what), in_flight_,
                                      std::move(host), std::move(staged_into));
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
  }

  /// Starts a collective and waits for it. Only the wait is bounded by
  /// `timeout` (c10d's Gloo did not honour the timeout in
  /// AllreduceOptions/BarrierOptions); the collective itself runs until
  /// Gloo's context timeout.
  template <typename Start>
  absl::Status Collective(Start start, absl::Duration timeout,
                          const std::string& what) {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = start();
    } catch (...) {
      return CurrentExceptionToStatus(what);
    }
    return WaitForWork(*work, timeout, what);
  }

  const c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  const int rank_;
  const int size_;
  const std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
};

// c10d reads TORCH_FR_BUFFER_SIZE when its flight recorder is first used,
// i.e. by the first group's first operation; 0 turns it off (see the
// header). A value the user set is kept.
void DisableFlightRecorderUnlessSet() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0); });
}

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
