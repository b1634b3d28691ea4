#include "worker/runtime/passes.h"

#include <utility>

#include <ATen/ATen.h>

#include "worker/model/split_linear.h"

namespace zbpp::worker {

ForwardState ForwardPass(const ModelChunk& chunk, WeightGradStore* store, int microbatch,
                         at::Tensor input, const at::Tensor& targets, int microbatches,
                         at::Tensor* loss) {
  ForwardState state;
  state.input = std::move(input);
  WeightGradScope scope(store, microbatch);
  at::Tensor out = chunk.Forward(state.input);
  if (!chunk.computes_loss()) {
    state.output = std::move(out);
    return state;
  }
  at::Tensor mean = LanguageModelLoss(out, targets);
  state.output = mean / double(microbatches);
  if (loss != nullptr) *loss = std::move(mean);
  return state;
}

at::Tensor BackwardPass(const ForwardState& state, at::Tensor grad_output, double loss_scale) {
  if (!grad_output.defined() && loss_scale != 1) {
    grad_output = at::full({}, loss_scale, state.output.options());
  }
  state.output.backward(grad_output);
  return state.input.grad();
}

}  // namespace zbpp::worker
