#include "worker/model/split_linear.h"

#include <cstdint>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace zbpp::worker {
namespace {

thread_local WeightGradStore* current_store = nullptr;
thread_local int current_microbatch = 0;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The custom autograd function. Its only tensor argument is x: weight and
// bias come by pointer (autograd treats non-tensor arguments as
// non-differentiable), so autograd builds no edge to them and never
// accumulates their gradient — the W pass does.
struct SplitLinearFunction : torch::autograd::Function<SplitLinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor* weight_in,
                            const at::Tensor* bias_in, int64_t store_address, int64_t microbatch,
                            int64_t compute_type) {
    const at::Tensor& weight = *weight_in;
    const at::Tensor& bias = *bias_in;
    const auto type = static_cast<at::ScalarType>(compute_type);
    // x in the compute type is what both the product and the W pass read.
    const at::Tensor x_compute = x.to(type);
    ctx->saved_data["x"] = x_compute;
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["weight"] = weight;
    ctx->saved_data["bias"] = bias;
    ctx->saved_data["store"] = store_address;
    ctx->saved_data["microbatch"] = microbatch;
    return at::linear(x_compute, weight.detach().to(type),
                      bias.defined() ? bias.detach().to(type) : bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& grad_output = grad_outputs[0];
    at::Tensor weight = ctx->saved_data["weight"].toTensor();
    const auto x_type = static_cast<at::ScalarType>(ctx->saved_data["x_type"].toInt());
    at::Tensor grad_input =
        grad_output.matmul(weight.detach().to(grad_output.scalar_type())).to(x_type);
    auto* store = reinterpret_cast<WeightGradStore*>(ctx->saved_data["store"].toInt());
    at::Tensor bias;
    if (!ctx->saved_data["bias"].isNone()) bias = ctx->saved_data["bias"].toTensor();
    // ∂L/∂y is copied, not aliased: the autograd engine may later accumulate
    // another path's gradient into this very buffer in place (a residual
    // branch hands the same tensor to both of its inputs), which would
    // corrupt the W pass without any version-counter error.
    store->Push(static_cast<int>(ctx->saved_data["microbatch"].toInt()),
                {ctx->saved_data["x"].toTensor().detach(), grad_output.detach().clone(), weight,
                 bias});
    // One gradient per forward argument; undefined for the non-differentiable
    // ones.
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

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
                       at::ScalarType compute_type) {
  if (current_store == nullptr || !at::GradMode::is_enabled() || !x.requires_grad()) {
    return at::linear(x.to(compute_type), weight.to(compute_type),
                      bias.defined() ? bias.to(compute_type) : bias);
  }
  return SplitLinearFunction::apply(x, &weight, &bias,
                                    reinterpret_cast<int64_t>(current_store),
                                    static_cast<int64_t>(current_microbatch),
                                    static_cast<int64_t>(compute_type));
}

}  // namespace zbpp::worker
