#include "worker/model/split_linear.h"

#include <cstdint>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace zbpp::worker {
namespace {

thread_local WeightGradStore* current_store = nullptr;
thread_local int current_microbatch = 0;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The custom autograd function. Its only tensor argument is x: the weight,
// the bias and their compute-type copies come by pointer (autograd treats
// non-tensor arguments as non-differentiable), so autograd builds no edge to
// them and never accumulates their gradient — the W pass does.
struct SplitLinearFunction : torch::autograd::Function<SplitLinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor* weight,
                            const at::Tensor* bias, const at::Tensor* weight_compute,
                            const at::Tensor* bias_compute, int64_t store_address,
                            int64_t microbatch) {
    // x in the compute type is what both the product and the W pass read.
    const at::Tensor x_compute = x.to(weight_compute->scalar_type());
    ctx->saved_data["x"] = x_compute;
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["weight"] = *weight;
    ctx->saved_data["weight_compute"] = *weight_compute;
    ctx->saved_data["bias"] = *bias;
    ctx->saved_data["store"] = store_address;
    ctx->saved_data["microbatch"] = microbatch;
    return at::linear(x_compute, *weight_compute, *bias_compute);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    const auto x_type = static_cast<at::ScalarType>(ctx->saved_data["x_type"].toInt());
    // The product reads the compute-type weight of the forward: no cast here.
    at::Tensor grad_input =
        grad_output.matmul(ctx->saved_data["weight_compute"].toTensor()).to(x_type);
    auto* store = reinterpret_cast<WeightGradStore*>(ctx->saved_data["store"].toInt());
    at::Tensor bias;
    if (!ctx->saved_data["bias"].isNone()) bias = ctx->saved_data["bias"].toTensor();
    // ∂L/∂y is queued as the engine's own tensor, not copied. The engine
    // writes into a gradient in place only when it holds the last reference
    // to it (InputBuffer also requires the storage's; AccumulateGrad, which
    // may keep a leaf's incoming gradient as its .grad and add into it
    // later, counts the tensor's references only), so queuing this very
    // tensor, not a detached alias, keeps every later accumulation out of it
    // (tests/worker/model/split_backward_test.cc, a residual whose gradient
    // also reaches a leaf).
    store->Push(static_cast<int>(ctx->saved_data["microbatch"].toInt()),
                {ctx->saved_data["x"].toTensor(), grad_output,
                 ctx->saved_data["weight"].toTensor(), bias});
    // One gradient per forward argument; undefined for the non-differentiable
    // ones.
    return {grad_input,   at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// `t` in `type` for a product, without autograd history.
at::Tensor ComputeCopy(const at::Tensor& t, at::ScalarType type, ComputeTypeCopies* copies) {
  if (!t.defined()) return t;
  if (copies != nullptr) return copies->Get(t, type);
  at::NoGradGuard no_grad;
  return t.detach().to(type);
}

}  // namespace

at::Tensor ComputeTypeCopies::Get(const at::Tensor& param, at::ScalarType type) {
  if (param.scalar_type() == type) return param.detach();
  const int64_t version = param._version();
  const void* data = param.data_ptr();
  absl::MutexLock lock(&mu_);
  Copy& copy = copies_[param.unsafeGetTensorImpl()];
  if (!copy.tensor.defined() || copy.version != version || copy.data != data ||
      copy.tensor.scalar_type() != type) {
    at::NoGradGuard no_grad;
    copy = {param.detach().to(type), version, data};
  }
  return copy.tensor;
}

WeightGradScope::WeightGradScope(WeightGradStore* store, int microbatch)
    : previous_store_(current_store), previous_microbatch_(current_microbatch) {
  current_store = store;
  current_microbatch = microbatch;
}

WeightGradScope::~WeightGradScope() {
  current_store = previous_store_;
  current_microbatch = previous_microbatch_;
}

at::Tensor SplitLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                       at::ScalarType compute_type, ComputeTypeCopies* copies) {
  if (!at::GradMode::is_enabled()) {
    return at::linear(x.to(compute_type), ComputeCopy(weight, compute_type, copies),
                      ComputeCopy(bias, compute_type, copies));
  }
  if (current_store == nullptr || !x.requires_grad()) {
    // The fused backward: autograd differentiates through the casts.
    return at::linear(x.to(compute_type), weight.to(compute_type),
                      bias.defined() ? bias.to(compute_type) : bias);
  }
  const at::Tensor weight_compute = ComputeCopy(weight, compute_type, copies);
  const at::Tensor bias_compute = ComputeCopy(bias, compute_type, copies);
  return SplitLinearFunction::apply(x, &weight, &bias, &weight_compute, &bias_compute,
                                    reinterpret_cast<int64_t>(current_store),
                                    static_cast<int64_t>(current_microbatch));
}

}  // namespace zbpp::worker
