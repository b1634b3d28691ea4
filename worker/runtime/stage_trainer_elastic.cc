// StageTrainer between two attempts (docs/elastic.md): holding the stage's
// state after a fault, binding it to the next attempt's groups, and a
// heal's state copy over the data-parallel group (stage_trainer.h).

#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "worker/runtime/stage_trainer.h"

namespace zbpp::worker {

void StageTrainer::AbortReductions() {
  if (reducer_ != nullptr) reducer_->Abort();
}

absl::Status StageTrainer::Rejoin(Communicator* communicator, Communicator* data_parallel,
                                  int replica, int microbatch_offset, int microbatches) {
  StageTrainerOptions options = options_;
  options.communicator = communicator;
  options.data_parallel = data_parallel;
  options.replica = replica;
  options.microbatch_offset = microbatch_offset;
  options.microbatches = microbatches;
  if (absl::Status st = CheckPlace(options); !st.ok()) return st;
  options_ = std::move(options);
  Bind();
  return absl::OkStatus();
}

absl::Status StageTrainer::CopyStateFromReplica(int source, int64_t step) {
  Communicator* group = options_.data_parallel;
  const int d = group == nullptr ? 1 : group->size();
  if (source < 0 || source >= d) {
    return absl::InvalidArgumentError(absl::StrCat("state_source_replica ", source,
                                                   " is not a replica of ", d));
  }
  if (d == 1) return absl::OkStatus();
  // One float32 buffer of every float32 state tensor in StateForCheckpoint's
  // order, and one of the step count and the loss scaler's state.
  std::vector<NamedTensor> state = optimizer_->StateForCheckpoint();
  std::vector<at::Tensor> floats;
  for (const auto& [name, tensor] : state) {
    if (name == "optimizer.step") continue;
    if (tensor.scalar_type() != at::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("state tensor \"", name, "\" is not float32: no state copy"));
    }
    floats.push_back(tensor.reshape({-1}));
  }
  at::Tensor buffer = at::cat(floats).contiguous();
  at::Tensor counters = at::empty({3}, at::kDouble);
  int64_t updates = 0;
  for (const auto& [name, tensor] : state) {
    if (name == "optimizer.step") updates = tensor.item<int64_t>();
  }
  counters[0] = static_cast<double>(updates);
  counters[1] = loss_scaler_.scale();
  counters[2] = static_cast<double>(loss_scaler_.clean_steps());
  const uint32_t tags[2] = {MakeTag(step, MessageKind::kControl, 0, 0),
                            MakeTag(step, MessageKind::kControl, 0, 1)};
  const bool sending = group->rank() == source;
  std::vector<std::unique_ptr<PendingOp>> ops;
  for (int peer = 0; peer < d; ++peer) {
    if (sending == (peer == source)) continue;  // The source sends to all; others hear it.
    at::Tensor* tensors[2] = {&buffer, &counters};
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::unique_ptr<PendingOp>> op =
          sending ? group->Send(*tensors[i], peer, tags[i])
                  : group->Recv(*tensors[i], peer, tags[i]);
      if (!op.ok()) return op.status();
      ops.push_back(*std::move(op));
    }
  }
  for (auto& op : ops) {
    if (absl::Status st = op->Wait(options_.timeout); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("state copy from replica ", source, ": ",
                                                  std::string(st.message())));
    }
  }
  if (sending) return absl::OkStatus();
  std::vector<NamedTensor> received;
  int64_t offset = 0;
  for (const auto& [name, tensor] : state) {
    if (name == "optimizer.step") {
      received.emplace_back(name,
                            at::scalar_tensor(static_cast<int64_t>(counters[0].item<double>()),
                                              at::kLong));
      continue;
    }
    received.emplace_back(name, buffer.narrow(0, offset, tensor.numel()).view_as(tensor));
    offset += tensor.numel();
  }
  if (absl::Status st = optimizer_->RestoreFromCheckpoint(received); !st.ok()) return st;
  loss_scaler_.Restore(counters[1].item<double>(),
                       static_cast<int64_t>(counters[2].item<double>()));
  if (executor_ != nullptr) executor_->set_loss_scale(loss_scaler_.scale());
  return absl::OkStatus();
}

}  // namespace zbpp::worker
