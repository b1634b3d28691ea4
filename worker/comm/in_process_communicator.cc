#include "worker/comm/in_process_communicator.h"

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "worker/comm/op_checks.h"

namespace zbpp::worker {
namespace {

/// What the ranks of one group share. One mutex and one condition variable
/// for everything: the fake is for tests, where contention does not matter
/// and one lock keeps it obviously correct.
class Group {
 public:
  explicit Group(int size) : size_(size), contributions_(size) {}

  int size() const { return size_; }

  void Post(int src, int dst, uint32_t tag, at::Tensor message)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mailboxes_[{src, dst, tag}].push_back(std::move(message));
    changed_.SignalAll();
  }

  /// Rank `rank` gave up: its pending and later receives fail at once.
  void Abort(int rank) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    aborted_.insert(rank);
    changed_.SignalAll();
  }

  bool Aborted(int rank) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return aborted_.count(rank) > 0;
  }

  /// The oldest message for (src, dst, tag), waiting until `deadline`;
  /// Aborted once `dst` aborted.
  absl::StatusOr<at::Tensor> Take(int src, int dst, uint32_t tag,
                                  absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::deque<at::Tensor>& box = mailboxes_[{src, dst, tag}];
    while (box.empty()) {
      if (aborted_.count(dst) > 0) {
        return absl::AbortedError(
            absl::StrCat(DescribeOp(false, dst, src, tag), ": aborted"));
      }
      if (changed_.WaitWithDeadline(&mu_, deadline) && box.empty()) {
        return absl::DeadlineExceededError(absl::StrCat(
            DescribeOp(false, dst, src, tag), ": no message arrived in time"));
      }
    }
    at::Tensor message = std::move(box.front());
    box.pop_front();
    return message;
  }

  /// Every rank contributes `tensor` (undefined for a barrier); the last to
  /// arrive sums the contributions in rank order (deterministic) and opens
  /// the next generation. `tensor` is read by the last arriver while its
  /// owner blocks here, so it needs no copy.
  absl::Status Collective(int rank, at::Tensor tensor, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    const int64_t generation = generation_;
    contributions_[rank] = tensor;
    if (++arrived_ == size_) {
      Reduce();
    } else {
      while (generation_ == generation) {
        if (changed_.WaitWithDeadline(&mu_, deadline) &&
            generation_ == generation) {
          const int arrived = arrived_;
          contributions_[rank] = at::Tensor();
          --arrived_;
          return absl::DeadlineExceededError(absl::StrCat(
              "rank ", rank, ": collective ", generation, " timed out after ",
              absl::FormatDuration(timeout), " with ", arrived, " of ", size_,
              " ranks joined"));
        }
      }
    }
    if (!result_status_.ok()) return result_status_;
    if (tensor.defined()) tensor.copy_(result_);
    return absl::OkStatus();
  }

 private:
  void Reduce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    result_status_ = absl::OkStatus();
    result_ = at::Tensor();
    const at::Tensor& first = contributions_[0];
    for (int r = 1; r < size_; ++r) {
      const at::Tensor& other = contributions_[r];
      if (first.defined() != other.defined() ||
          (first.defined() && (first.sizes() != other.sizes() ||
                               first.scalar_type() != other.scalar_type()))) {
        result_status_ = absl::InvalidArgumentError(absl::StrCat(
            "collective ", generation_, ": rank 0 passed ",
            DescribeTensor(first), " but rank ", r, " passed ",
            DescribeTensor(other)));
        break;
      }
    }
    if (result_status_.ok() && first.defined()) {
      result_ = first.clone();
      for (int r = 1; r < size_; ++r) result_.add_(contributions_[r]);
    }
    for (at::Tensor& t : contributions_) t = at::Tensor();
    arrived_ = 0;
    ++generation_;
    changed_.SignalAll();
  }

  const int size_;
  absl::Mutex mu_;
  /// Signalled on every new message and every completed collective.
  absl::CondVar changed_;
  std::map<std::tuple<int, int, uint32_t>, std::deque<at::Tensor>> mailboxes_
      ABSL_GUARDED_BY(mu_);
  /// The open collective: its number, how many ranks are in, their tensors.
  std::set<int> aborted_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<at::Tensor> contributions_ ABSL_GUARDED_BY(mu_);
  /// The outcome of the last completed collective. Ranks of that generation
  /// read it before they can join the next one, which alone replaces it.
  at::Tensor result_ ABSL_GUARDED_BY(mu_);
  absl::Status result_status_ ABSL_GUARDED_BY(mu_);
};

/// A send: the copy is already in the mailbox.
class DoneOp final : public PendingOp {
 public:
  absl::Status Wait(absl::Duration) override { return absl::OkStatus(); }
};

class RecvOp final : public PendingOp {
 public:
  RecvOp(std::shared_ptr<Group> group, int src, int dst, uint32_t tag,
         at::Tensor tensor)
      : group_(std::move(group)),
        src_(src),
        dst_(dst),
        tag_(tag),
        tensor_(std::move(tensor)) {}

  absl::Status Wait(absl::Duration timeout) override {
    absl::StatusOr<at::Tensor> message =
        group_->Take(src_, dst_, tag_, absl::Now() + timeout);
    if (!message.ok()) return message.status();
    if (message->sizes() != tensor_.sizes() ||
        message->scalar_type() != tensor_.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeOp(false, dst_, src_, tag_), ": the message is ",
          DescribeTensor(*message), ", the receive tensor ",
          DescribeTensor(tensor_)));
    }
    tensor_.copy_(*message);
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<Group> group_;
  const int src_;
  const int dst_;
  const uint32_t tag_;
  at::Tensor tensor_;
};

// An all-reduce: the rank joins the group's collective when it waits.
class CollectiveOp final : public PendingOp {
 public:
  CollectiveOp(std::shared_ptr<Group> group, int rank, at::Tensor tensor)
      : group_(std::move(group)), rank_(rank), tensor_(std::move(tensor)) {}

  absl::Status Wait(absl::Duration timeout) override {
    return group_->Collective(rank_, tensor_, timeout);
  }

 private:
  const std::shared_ptr<Group> group_;
  const int rank_;
  const at::Tensor tensor_;
};

absl::Status AbortedOp(bool send, int self, int peer, uint32_t tag) {
  return absl::AbortedError(
      absl::StrCat(DescribeOp(send, self, peer, tag), ": the communicator was aborted"));
}

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor,
                                                  int peer,
                                                  uint32_t tag) override {
    absl::Status valid =
        CheckPointToPoint(true, rank_, size(), peer, tag, tensor);
    if (!valid.ok()) return valid;
    if (group_->Aborted(rank_)) return AbortedOp(true, rank_, peer, tag);
    group_->Post(rank_, peer, tag, tensor.clone());
    return std::make_unique<DoneOp>();
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> Recv(at::Tensor tensor, int peer,
                                                  uint32_t tag) override {
    absl::Status valid =
        CheckPointToPoint(false, rank_, size(), peer, tag, tensor);
    if (!valid.ok()) return valid;
    if (group_->Aborted(rank_)) return AbortedOp(false, rank_, peer, tag);
    return std::make_unique<RecvOp>(group_, peer, rank_, tag,
                                    std::move(tensor));
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> StartAllReduceSum(at::Tensor tensor) override {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, ": all-reduce of an undefined tensor"));
    }
    return std::make_unique<CollectiveOp>(group_, rank_, std::move(tensor));
  }

  void Abort() override { group_->Abort(rank_); }

  absl::Status Barrier(absl::Duration timeout) override {
    return group_->Collective(rank_, at::Tensor(), timeout);
  }

 private:
  const std::shared_ptr<Group> group_;
  const int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> CreateInProcessGroup(int size) {
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.push_back(std::make_unique<InProcessCommunicator>(group, r));
  }
  return ranks;
}

}  // namespace zbpp::worker
