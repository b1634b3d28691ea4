#include "worker/runtime/step_messages.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {

using sched::Action;
using sched::PassKind;
using SteadyClock = std::chrono::steady_clock;

std::string DescribeAction(const Action& a) {
  if (a.kind == PassKind::kReduce) {
    return absl::StrCat(sched::ActionToString(a),
                        " (data-parallel gradient reduction, virtual stage ", a.virtual_stage.value(), ")");
  }
  const char* pass = a.kind == PassKind::kF   ? "F"
                     : a.kind == PassKind::kB ? "B"
                     : a.kind == PassKind::kW ? "W"
                     : a.kind == PassKind::kS ? "S, vocabulary shard"
                     : a.kind == PassKind::kT ? "T, vocabulary shard"
                                              : "BW";
  return absl::StrCat(sched::ActionToString(a), " (pass ", pass, ", virtual stage ", a.virtual_stage.value(),
                      ", microbatch ", a.microbatch, ")");
}

StepMessages::StepMessages(const ExecutorOptions& options, int64_t step, int generation,
                           const sched::Schedule& schedule, const sched::PairOrders& orders,
                           const std::vector<int>& prefix, bool speculative,
                           SteadyClock::time_point start, StepTimeline& timeline)
    : o_(options), step_(step), generation_(generation), schedule_(schedule),
      actions_(schedule.actions[options.stage]), start_(start), timeline_(timeline) {
  Plan(orders, prefix, speculative);
}

double StepMessages::Seconds() const {
  return std::chrono::duration<double>(SteadyClock::now() - start_).count();
}

int StepMessages::StageOf(int virtual_stage) const {
  return schedule_.StageOf(VirtualStage(virtual_stage)).value();
}

void StepMessages::Plan(const sched::PairOrders& orders, const std::vector<int>& prefix,
                        bool speculative) {
  for (const auto& [pair, messages] : orders) {
    if (pair.first != o_.stage && pair.second != o_.stage) continue;
    PeerQueue queue;
    queue.peer = pair.first == o_.stage ? pair.second : pair.first;
    for (const sched::Message& m : messages) {
      PeerMessage message;
      message.send = m.from == o_.stage;
      message.action = static_cast<size_t>(message.send ? m.producer : m.consumer);
      // Both stages name a message by its consumer, which they both know
      // from the schedule.
      const Action& consumer = schedule_.actions[static_cast<size_t>(m.to)]
                                                [static_cast<size_t>(m.consumer)];
      const auto [kind, to_stage] = InputKey(consumer);
      message.tag = MakeTag(step_, kind, to_stage, consumer.microbatch, generation_);
      message.speculative = speculative && m.producer < prefix[m.from];
      if (!message.send) receive_queue_[{message.action, queue.peer}] = queues_.size();
      queue.messages.push_back(message);
    }
    queues_.push_back(std::move(queue));
  }
}

// The kind and receiving virtual stage that name the input of `consumer`
// in tags and local hand-offs: an F's or B's own virtual stage; for the
// vocabulary passes, one past the last virtual stage (the shards' inputs:
// the hidden state for S as an activation, the statistics for T as a
// gradient). A B of the last virtual stage receives the T's parts under
// its own virtual stage, the one input it has then.
std::pair<MessageKind, int> StepMessages::InputKey(const Action& consumer) const {
  switch (consumer.kind) {
    case PassKind::kF:
      return {MessageKind::kActivation, consumer.virtual_stage.value()};
    case PassKind::kS:
      return {MessageKind::kActivation, num_virtual_stages()};
    case PassKind::kT:
      return {MessageKind::kGradient, num_virtual_stages()};
    default:
      return {MessageKind::kGradient, consumer.virtual_stage.value()};
  }
}

// A receive buffer for the input of `consumer`: the softmax statistics of a
// vocabulary shard [3, b, s] for a T, else a tensor between virtual stages
// [b, s, h]; float32.
at::Tensor StepMessages::ReceiveBuffer(const Action& consumer) const {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(o_.device);
  if (consumer.kind == PassKind::kT) {
    return at::empty({3, o_.microbatch_size, o_.seq_len}, options);
  }
  return at::empty({o_.microbatch_size, o_.seq_len, o_.hidden}, options);
}

absl::Status StepMessages::Issue(bool speculative_only) {
  for (PeerQueue& queue : queues_) {
    for (; queue.next < queue.messages.size(); ++queue.next) {
      const PeerMessage& m = queue.messages[queue.next];
      if (speculative_only && !m.speculative) break;
      if (m.send && produced_.count(m.action) == 0) break;
      if (absl::Status st = IssueMessage(queue, m); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

// Issues one message of `queue`: sends the tensor its producer left, or
// posts a receive buffer for its consumer.
absl::Status StepMessages::IssueMessage(const PeerQueue& queue, const PeerMessage& m) {
  if (m.send) {
    auto it = produced_.find(m.action);
    if (it == produced_.end()) {
      return absl::InternalError(absl::StrCat("the message of ",
                                              DescribeAction(actions_[m.action]),
                                              " to stage ", queue.peer, " was not produced"));
    }
    const double before = Seconds();
    absl::StatusOr<std::unique_ptr<PendingOp>> op =
        o_.communicator->Send(it->second, queue.peer, m.tag);
    timeline_.send_wait_seconds += Seconds() - before;
    if (!op.ok()) return op.status();
    // The tensor must outlive the send: keep it with the op. (It stays in
    // produced_ too: an S's statistics, and the last virtual stage's F
    // output under vocabulary parallelism, go to every other stage.)
    sends_.emplace_back(*std::move(op), absl::StrCat("the output of ",
                                                     DescribeAction(actions_[m.action]),
                                                     " to stage ", queue.peer));
    send_buffers_.push_back(it->second);
    return absl::OkStatus();
  }
  PostedRecv posted;
  posted.buffer = ReceiveBuffer(actions_[m.action]);
  absl::StatusOr<std::unique_ptr<PendingOp>> op =
      o_.communicator->Recv(posted.buffer, queue.peer, m.tag);
  if (!op.ok()) return op.status();
  posted.op = *std::move(op);
  posted_.emplace(std::make_pair(m.action, queue.peer), std::move(posted));
  return absl::OkStatus();
}

absl::Status StepMessages::CompleteSpeculative() {
  for (PeerQueue& queue : queues_) {
    for (; queue.next < queue.messages.size() && queue.messages[queue.next].speculative;
         ++queue.next) {
      if (absl::Status st = IssueMessage(queue, queue.messages[queue.next]); !st.ok()) {
        return st;
      }
    }
  }
  for (auto& [input, posted] : posted_) {
    if (absl::Status st = posted.op->Wait(o_.recv_timeout); !st.ok()) {
      return absl::Status(st.code(),
                          absl::StrCat("step ", step_, ", draining the discarded message for ",
                                       DescribeAction(actions_[input.first]), " from stage ",
                                       input.second, ": ", std::string(st.message())));
    }
  }
  posted_.clear();
  return WaitSends();
}

absl::Status StepMessages::WaitSends() {
  for (auto& [op, what] : sends_) {
    if (absl::Status st = op->Wait(o_.recv_timeout); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("step ", step_, ", sending ", what, ": ",
                                                  std::string(st.message())));
    }
  }
  sends_.clear();
  return absl::OkStatus();
}

// The tensor action j consumes from stage `from`: a posted receive, or from
// this stage a local hand-off.
absl::StatusOr<at::Tensor> StepMessages::TakeInputFrom(size_t j, int from) {
  const auto [kind, stage] = InputKey(actions_[j]);
  const int microbatch = actions_[j].microbatch;
  if (auto queue = receive_queue_.find({j, from}); queue != receive_queue_.end()) {
    auto it = posted_.find({j, from});
    if (it == posted_.end()) {
      // CheckPairOrders refuses a schedule where this can happen.
      const PeerQueue& q = queues_[queue->second];
      return absl::FailedPreconditionError(absl::StrCat(
          "its input from stage ", q.peer, " comes after message #", q.next,
          " of the pair's order, which this stage cannot issue yet"));
    }
    PostedRecv posted = std::move(it->second);
    posted_.erase(it);
    const double before = Seconds();
    absl::Status st = posted.op->Wait(o_.recv_timeout);
    timeline_.input_wait_seconds += Seconds() - before;
    if (!st.ok()) return st;
    return posted.buffer;
  }
  auto it = local_.find({kind, stage, microbatch});
  if (it == local_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no local ", kind == MessageKind::kActivation ? "activation" : "gradient",
                     " for virtual stage ", stage, " microbatch ", microbatch,
                     " (the producing pass has not run on this stage)"));
  }
  at::Tensor t = std::move(it->second);
  local_.erase(it);
  return t;
}

absl::StatusOr<at::Tensor> StepMessages::TakeInput(size_t j) {
  const Action& a = actions_[j];
  const int producer_vs = a.kind == PassKind::kF   ? a.virtual_stage.value() - 1
                          : a.kind == PassKind::kS ? num_virtual_stages() - 1
                                                   : a.virtual_stage.value() + 1;
  return TakeInputFrom(j, StageOf(producer_vs));
}

absl::StatusOr<std::vector<at::Tensor>> StepMessages::TakeInputsFromEveryStage(size_t j) {
  std::vector<at::Tensor> inputs;
  for (int r = 0; r < schedule_.stages; ++r) {
    absl::StatusOr<at::Tensor> in = TakeInputFrom(j, r);
    if (!in.ok()) return in.status();
    inputs.push_back(*std::move(in));
  }
  return inputs;
}

void StepMessages::Deliver(size_t j, at::Tensor tensor, MessageKind kind, int to_stage,
                           int microbatch) {
  if (StageOf(to_stage) == o_.stage) {
    local_[{kind, to_stage, microbatch}] = std::move(tensor);
  } else {
    produced_[j] = tensor.contiguous();
  }
}

void StepMessages::DeliverToEveryStage(size_t j, const at::Tensor& tensor, MessageKind kind,
                                       int microbatch) {
  local_[{kind, num_virtual_stages(), microbatch}] = tensor;
  if (schedule_.stages > 1) produced_[j] = tensor.contiguous();
}

}  // namespace zbpp::worker
