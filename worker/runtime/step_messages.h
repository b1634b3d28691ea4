// The messages of one stage's step in the pipeline executor
// (worker/runtime/executor.h): each pair of stages' messages in the order
// sched::DerivePairOrders gives them, issued as soon as they can go, and the
// tensors passes hand each other on one stage. Internal to the executor.

#ifndef ZBPP_WORKER_RUNTIME_STEP_MESSAGES_H_
#define ZBPP_WORKER_RUNTIME_STEP_MESSAGES_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/comm_order.h"
#include "scheduler/schedule.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/executor.h"
#include "worker/runtime/step_timeline.h"

namespace zbpp::worker {

/// "1F0 (pass F, virtual stage 1, microbatch 0)": an error names the pass
/// and the microbatch in words, not only in the schedule's compact form.
std::string DescribeAction(const sched::Action& a);

/// One stage's messages during one step (docs/transport.md): the sends of
/// its passes' outputs and the receives of their inputs, per peer in the
/// pair's order, with tags named by the consumer (MakeTag), and the
/// hand-offs between its own virtual stages. Waits are added to the step's
/// timeline (StepTimeline::input_wait_seconds, send_wait_seconds). Lives for
/// the step only. Thread-compatible: the stage's training thread.
class StepMessages {
 public:
  /// `orders`: the schedule's messages per pair of stages; `prefix`: each
  /// stage's speculative prefix length, read when `speculative` (a
  /// post-update validation check precedes the first B: messages produced
  /// inside the senders' prefixes are speculative). `start`: the step's
  /// start, for the waits' times. `schedule`, `options` and `timeline` must
  /// outlive this object.
  StepMessages(const ExecutorOptions& options, int64_t step, int generation,
               const sched::Schedule& schedule, const sched::PairOrders& orders,
               const std::vector<int>& prefix, bool speculative,
               std::chrono::steady_clock::time_point start, StepTimeline& timeline);

  /// Issues, for every peer, the messages next in the pair's order that can
  /// go: a send once its producing pass delivered its output, a receive at
  /// once (its buffer waits for its consumer). With `speculative_only`
  /// (before the post-update validation check) only speculative messages: a
  /// discarded step must not leave operations a replay would meet.
  absl::Status Issue(bool speculative_only);

  /// The step is given up before the first backward (only forwards ran):
  /// completes exactly the speculative messages — issues the rest of them
  /// in each pair's order (every send's producer ran: it is in this stage's
  /// prefix), receives what is addressed to this stage into buffers nobody
  /// reads and completes this stage's sends — so that every pair's order
  /// stands where both stages expect it for the replay.
  absl::Status CompleteSpeculative();

  /// Waits for every send issued (their buffers can go then).
  absl::Status WaitSends();

  /// The one input of action j (an F's activation, a B's gradient, an S's
  /// hidden state), from the stage that produces it.
  absl::StatusOr<at::Tensor> TakeInput(size_t j);
  /// The inputs of action j that every stage sends it (a T's statistics, a
  /// B of the last virtual stage's gradient parts under vocabulary
  /// parallelism), in stage order.
  absl::StatusOr<std::vector<at::Tensor>> TakeInputsFromEveryStage(size_t j);

  /// Hands `tensor`, the output of action j, to the consumer named by
  /// (kind, to_stage, microbatch) on the stage holding virtual stage
  /// `to_stage`: locally, or as a message Issue sends in the pair's order.
  void Deliver(size_t j, at::Tensor tensor, MessageKind kind, int to_stage, int microbatch);
  /// Hands `tensor` to a consumer on every stage (the S passes, the T
  /// passes): locally to this stage's, and as one message per other stage.
  void DeliverToEveryStage(size_t j, const at::Tensor& tensor, MessageKind kind, int microbatch);

 private:
  // One message of this stage with one peer, in the pair's order.
  struct PeerMessage {
    bool send = false;
    // This stage's action producing (send) or consuming (receive) it.
    size_t action = 0;
    uint32_t tag = 0;
    // Produced inside the sender's speculative prefix (docs/transport.md).
    bool speculative = false;
  };
  // This stage's messages with one peer and how far it has issued them.
  struct PeerQueue {
    int peer = 0;
    std::vector<PeerMessage> messages;
    size_t next = 0;
  };
  // A receive posted ahead of its action.
  struct PostedRecv {
    at::Tensor buffer;
    std::unique_ptr<PendingOp> op;
  };

  void Plan(const sched::PairOrders& orders, const std::vector<int>& prefix, bool speculative);
  std::pair<MessageKind, int> InputKey(const sched::Action& consumer) const;
  at::Tensor ReceiveBuffer(const sched::Action& consumer) const;
  absl::Status IssueMessage(const PeerQueue& queue, const PeerMessage& m);
  absl::StatusOr<at::Tensor> TakeInputFrom(size_t j, int from);
  double Seconds() const;
  int num_virtual_stages() const { return schedule_.num_virtual_stages(); }
  int StageOf(int virtual_stage) const;

  const ExecutorOptions& o_;
  const int64_t step_;
  const int generation_;
  const sched::Schedule& schedule_;
  const std::vector<sched::Action>& actions_;
  const std::chrono::steady_clock::time_point start_;
  StepTimeline& timeline_;
  std::vector<PeerQueue> queues_;
  // (Action, sending stage) -> queues_ index of that input.
  std::map<std::pair<size_t, int>, size_t> receive_queue_;
  std::map<size_t, at::Tensor> produced_;  // Action -> its output for other stages.
  std::map<std::pair<size_t, int>, PostedRecv> posted_;  // By (action, sending stage).
  std::map<std::tuple<MessageKind, int, int>, at::Tensor> local_;
  std::vector<std::pair<std::unique_ptr<PendingOp>, std::string>> sends_;
  std::vector<at::Tensor> send_buffers_;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_STEP_MESSAGES_H_
