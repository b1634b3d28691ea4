#include "worker/comm/order_strict_communicator.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "worker/comm/in_process_communicator.h"
#include "worker/comm/op_checks.h"

namespace zbpp::worker {
namespace {

// One point-to-point operation, from its issue until it met its partner.
struct Op {
  bool send = false;
  int rank = 0;
  int peer = 0;
  uint32_t tag = 0;
  at::Tensor tensor;      // Send: a copy of the message; receive: the target.
  int64_t position = 0;   // Its place in the pair's order, from 0.
  bool done = false;
  absl::Status status;

  std::string Describe() const {
    return absl::StrCat(DescribeOp(send, rank, peer, tag), ", ", DescribeTensor(tensor));
  }
};

// What the ranks share: per pair of ranks, the operations each side issued
// that have not met their partner yet. One mutex, as in the in-process fake.
class Pairs {
 public:
  void Issue(const std::shared_ptr<Op>& op) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) {
      Settle(*op, broken_);
      return;
    }
    if (aborted_.count(op->rank) > 0) {
      Settle(*op, absl::AbortedError(absl::StrCat(op->Describe(), ": the communicator was aborted")));
      return;
    }
    Pair& pair = pairs_[{std::min(op->rank, op->peer), std::max(op->rank, op->peer)}];
    std::deque<std::shared_ptr<Op>>& mine = pair.issued[op->rank < op->peer ? 0 : 1];
    op->position = pair.next[op->rank < op->peer ? 0 : 1]++;
    mine.push_back(op);
    std::deque<std::shared_ptr<Op>>& low = pair.issued[0];
    std::deque<std::shared_ptr<Op>>& high = pair.issued[1];
    while (!low.empty() && !high.empty()) {
      Op& a = *low.front();
      Op& b = *high.front();
      if (a.send == b.send || a.tag != b.tag || a.tensor.sizes() != b.tensor.sizes() ||
          a.tensor.scalar_type() != b.tensor.scalar_type()) {
        Break(absl::FailedPreconditionError(absl::StrCat(
            "order mismatch between ranks ", a.rank, " and ", b.rank, " at their message #",
            a.position, ": rank ", a.rank, " issued ", a.Describe(), "; rank ", b.rank,
            " issued ", b.Describe())));
        return;
      }
      Op& send = a.send ? a : b;
      Op& recv = a.send ? b : a;
      recv.tensor.copy_(send.tensor);
      Settle(a, absl::OkStatus());
      Settle(b, absl::OkStatus());
      low.pop_front();
      high.pop_front();
    }
  }

  absl::Status Wait(const std::shared_ptr<Op>& op, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + timeout;
    while (!op->done) {
      if (changed_.WaitWithDeadline(&mu_, deadline) && !op->done) {
        return absl::DeadlineExceededError(
            absl::StrCat(op->Describe(), " (message #", op->position,
                         " of the pair's order): not matched within ",
                         absl::FormatDuration(timeout)));
      }
    }
    return op->status;
  }

  void Abort(int rank) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    aborted_.insert(rank);
    for (auto& [key, pair] : pairs_) {
      for (auto& side : pair.issued) {
        for (const std::shared_ptr<Op>& op : side) {
          if (op->rank == rank) {
            Settle(*op, absl::AbortedError(
                            absl::StrCat(op->Describe(), ": the communicator was aborted")));
          }
        }
      }
    }
  }

  absl::Status CheckIdle() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    std::vector<std::string> pending;
    for (const auto& [key, pair] : pairs_) {
      for (const auto& side : pair.issued) {
        for (const std::shared_ptr<Op>& op : side) {
          pending.push_back(absl::StrCat(op->Describe(), " (message #", op->position, ")"));
        }
      }
    }
    if (pending.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("operations never matched: ", absl::StrJoin(pending, "; ")));
  }

 private:
  struct Pair {
    // [0]: issued by the lower rank, [1]: by the higher one.
    std::deque<std::shared_ptr<Op>> issued[2];
    int64_t next[2] = {0, 0};
  };

  void Settle(Op& op, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (op.done) return;
    op.done = true;
    op.status = std::move(status);
    changed_.SignalAll();
  }

  // A mismatch: every operation in flight and every later one fails with
  // `why`; the unmatched ones stay listed for CheckIdle.
  void Break(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = why;
    for (auto& [key, pair] : pairs_) {
      for (auto& side : pair.issued) {
        for (const std::shared_ptr<Op>& op : side) Settle(*op, why);
      }
    }
  }

  absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::pair<int, int>, Pair> pairs_ ABSL_GUARDED_BY(mu_);
  std::set<int> aborted_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

class StrictOp final : public PendingOp {
 public:
  StrictOp(std::shared_ptr<Pairs> pairs, std::shared_ptr<Op> op)
      : pairs_(std::move(pairs)), op_(std::move(op)) {}
  absl::Status Wait(absl::Duration timeout) override { return pairs_->Wait(op_, timeout); }

 private:
  const std::shared_ptr<Pairs> pairs_;
  const std::shared_ptr<Op> op_;
};

class OrderStrictCommunicator final : public Communicator {
 public:
  OrderStrictCommunicator(std::shared_ptr<Pairs> pairs, std::unique_ptr<Communicator> collectives)
      : pairs_(std::move(pairs)), collectives_(std::move(collectives)) {}

  int rank() const override { return collectives_->rank(); }
  int size() const override { return collectives_->size(); }

  absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor, int peer,
                                                  uint32_t tag) override {
    return PointToPoint(true, tensor.defined() ? tensor.clone() : tensor, peer, tag);
  }
  absl::StatusOr<std::unique_ptr<PendingOp>> Recv(at::Tensor tensor, int peer,
                                                  uint32_t tag) override {
    return PointToPoint(false, std::move(tensor), peer, tag);
  }
  absl::StatusOr<std::unique_ptr<PendingOp>> StartAllReduceSum(at::Tensor tensor) override {
    return collectives_->StartAllReduceSum(std::move(tensor));
  }
  absl::Status Barrier(absl::Duration timeout) override { return collectives_->Barrier(timeout); }
  void Abort() override {
    pairs_->Abort(rank());
    collectives_->Abort();
  }

 private:
  absl::StatusOr<std::unique_ptr<PendingOp>> PointToPoint(bool send, at::Tensor tensor, int peer,
                                                          uint32_t tag) {
    if (absl::Status valid = CheckPointToPoint(send, rank(), size(), peer, tag, tensor);
        !valid.ok()) {
      return valid;
    }
    auto op = std::make_shared<Op>();
    op->send = send;
    op->rank = rank();
    op->peer = peer;
    op->tag = tag;
    op->tensor = std::move(tensor);
    pairs_->Issue(op);
    return std::make_unique<StrictOp>(pairs_, std::move(op));
  }

  const std::shared_ptr<Pairs> pairs_;
  const std::unique_ptr<Communicator> collectives_;
};

}  // namespace

OrderStrictGroup CreateOrderStrictGroup(int size) {
  auto pairs = std::make_shared<Pairs>();
  std::vector<std::unique_ptr<Communicator>> collectives = CreateInProcessGroup(size);
  OrderStrictGroup group;
  for (int r = 0; r < size; ++r) {
    group.ranks.push_back(
        std::make_unique<OrderStrictCommunicator>(pairs, std::move(collectives[r])));
  }
  group.check_idle = [pairs] { return pairs->CheckIdle(); };
  return group;
}

}  // namespace zbpp::worker
