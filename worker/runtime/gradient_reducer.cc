#include "worker/runtime/gradient_reducer.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace zbpp::worker {

GradientReducer::GradientReducer(Communicator* data_parallel, absl::Duration timeout)
    : data_parallel_(data_parallel), timeout_(timeout), thread_([this] { Loop(); }) {}

GradientReducer::~GradientReducer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void GradientReducer::Abort() {
  absl::MutexLock lock(&mu_);
  aborted_ = true;
}

void GradientReducer::Issue(std::vector<at::Tensor> parameters) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> pieces;
  pieces.reserve(parameters.size());
  for (const at::Tensor& p : parameters) {
    const at::Tensor& g = p.grad();
    pieces.push_back(g.defined() ? g.reshape(-1).to(at::kFloat)
                                 : at::zeros({p.numel()}, p.options().dtype(at::kFloat)));
  }
  auto reduction = std::make_shared<Reduction>();
  reduction->parameters = std::move(parameters);
  reduction->flat = at::cat(pieces);
  // Started here, on the executor's thread, in the schedule's order: every
  // replica launches its collectives in one order (docs/transport.md).
  reduction->timing.start = Clock::now();
  absl::StatusOr<std::unique_ptr<PendingOp>> op =
      data_parallel_->StartAllReduceSum(reduction->flat);
  issued_.push_back(reduction);
  absl::MutexLock lock(&mu_);
  if (op.ok()) {
    reduction->op = *std::move(op);
    queue_.push_back(std::move(reduction));
  } else {
    reduction->status = op.status();
    reduction->done = true;
  }
}

void GradientReducer::Loop() {
  while (true) {
    std::shared_ptr<Reduction> next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](GradientReducer* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
            return r->stopping_ || !r->queue_.empty();
          },
          this));
      if (queue_.empty()) return;
      next = queue_.front();
      queue_.pop_front();
    }
    absl::Status status = next->op->Wait(timeout_);
    const Clock::time_point end = Clock::now();
    absl::MutexLock lock(&mu_);
    next->status = std::move(status);
    // A reduction starts on the wire once the one before it ended.
    next->timing.start = std::max(next->timing.start, last_end_);
    next->timing.end = last_end_ = end;
    next->done = true;
  }
}

absl::StatusOr<std::vector<GradientReducer::Timing>> GradientReducer::WaitAll() {
  std::vector<std::shared_ptr<Reduction>> issued = std::move(issued_);
  issued_.clear();
  std::vector<Timing> timings;
  absl::Status first_error;
  at::NoGradGuard no_grad;
  for (const std::shared_ptr<Reduction>& r : issued) {
    {
      absl::MutexLock lock(&mu_);
      auto ended = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return r->done || aborted_; };
      mu_.Await(absl::Condition(&ended));
      if (!r->done) return absl::AbortedError("data-parallel gradient reduction aborted");
      if (!r->status.ok() && first_error.ok()) first_error = r->status;
    }
    if (!first_error.ok()) continue;
    timings.push_back(r->timing);
    r->flat.div_(replicas());
    int64_t offset = 0;
    for (at::Tensor& p : r->parameters) {
      const int64_t n = p.numel();
      at::Tensor average = r->flat.narrow(0, offset, n).view(p.sizes());
      offset += n;
      at::Tensor& slot = p.mutable_grad();
      if (slot.defined()) {
        slot.copy_(average);
      } else {
        slot = average.to(p.scalar_type()).clone();
      }
    }
  }
  if (!first_error.ok()) return first_error;
  return timings;
}

}  // namespace zbpp::worker
