#ifndef ZBPP_WORKER_RUNTIME_PASSES_H_
#define ZBPP_WORKER_RUNTIME_PASSES_H_

#include <ATen/core/Tensor.h>

#include "worker/model/model_chunk.h"
#include "worker/model/weight_grad_store.h"

namespace zbpp::worker {

/// What an F pass leaves for its B: the virtual stage's input (a leaf whose
/// .grad B fills; the tokens on the first virtual stage) and the output to
/// differentiate (the scaled loss on the last virtual stage).
struct ForwardState {
  at::Tensor input;
  at::Tensor output;
};

/// The training F pass of one microbatch on `chunk` (Zero Bubble paper §2):
/// runs the chunk inside a WeightGradScope of (`store`, `microbatch`), so
/// its B queues the W work there. `input`: tokens int64 [b, s] on the first
/// virtual stage, else a float32 [b, s, h] leaf with requires_grad.
/// `targets` (int64 [b, s], last virtual stage only): the output is then the
/// mean next-token loss divided by `microbatches` (a step's loss is the mean
/// over its microbatches) and `*loss`, when given, receives the undivided
/// loss (a float32 scalar). Elsewhere the output is the hidden state
/// [b, s, h]. What the executor and the calibration profile both run, so
/// that the profile measures the executor's passes. Thread-compatible.
ForwardState ForwardPass(const ModelChunk& chunk, WeightGradStore* store, int microbatch,
                         at::Tensor input, const at::Tensor& targets, int microbatches,
                         at::Tensor* loss = nullptr);

/// The B pass of `state` (its F's): differentiates the output with
/// `grad_output` (the next virtual stage's input gradient, [b, s, h]), or,
/// on the last virtual stage (`grad_output` undefined), the loss scaled by
/// `loss_scale` (> 0; 1 for none). The chunk's linear layers leave their
/// weight gradients queued for W (WeightGradStore::RunW); the other
/// parameters' gradients are added to their .grad. Returns the input's
/// gradient [b, s, h] (undefined on the first virtual stage, whose input is
/// tokens). Thread-compatible.
at::Tensor BackwardPass(const ForwardState& state, at::Tensor grad_output, double loss_scale);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_PASSES_H_
