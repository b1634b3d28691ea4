#include "worker/runtime/adamw.h"

#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {

AdamWOptions AdamWOptions::FromSpec(const v1::OptimizerSpec& spec) {
  AdamWOptions o;
  o.learning_rate = spec.learning_rate();
  if (spec.has_beta1()) o.beta1 = spec.beta1();
  if (spec.has_beta2()) o.beta2 = spec.beta2();
  if (spec.has_epsilon()) o.epsilon = spec.epsilon();
  if (spec.has_weight_decay()) o.weight_decay = spec.weight_decay();
  if (spec.has_warmup_steps()) o.warmup_steps = spec.warmup_steps();
  if (spec.has_max_grad_norm()) o.max_grad_norm = spec.max_grad_norm();
  return o;
}

double AdamWOptions::LearningRateAt(int64_t step) const {
  if (step < warmup_steps) return learning_rate * double(step + 1) / double(warmup_steps);
  return learning_rate;
}

AdamW::AdamW(std::vector<NamedTensor> parameters, AdamWOptions options)
    : options_(options) {
  for (auto& [name, param] : parameters) {
    slots_.push_back({name, param, at::zeros_like(param), at::zeros_like(param),
                      param.dim() >= 2});
  }
}

void AdamW::Step(int64_t step, double grad_scale) {
  at::NoGradGuard no_grad;
  ++updates_;
  const double lr = options_.LearningRateAt(step);
  const double correction1 = 1.0 - std::pow(options_.beta1, double(updates_));
  const double correction2 = 1.0 - std::pow(options_.beta2, double(updates_));
  for (Slot& s : slots_) {
    const at::Tensor& grad = s.param.grad();
    if (!grad.defined()) continue;
    at::Tensor g = grad_scale == 1.0 ? grad : grad * grad_scale;
    if (s.decay) s.param.mul_(1.0 - lr * options_.weight_decay);
    s.exp_avg.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    s.exp_avg_sq.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    at::Tensor denom = (s.exp_avg_sq / correction2).sqrt_().add_(options_.epsilon);
    s.param.addcdiv_(s.exp_avg, denom, -lr / correction1);
  }
}

void AdamW::ZeroGrad() {
  for (Slot& s : slots_) {
    at::Tensor& grad = s.param.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
}

void AdamW::PoisonGradient() {
  for (Slot& s : slots_) {
    at::Tensor& grad = s.param.mutable_grad();
    if (!grad.defined()) continue;
    grad.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
}

double AdamW::LocalGradNormSquared(bool* found_inf_nan) const {
  double sum = 0;
  bool bad = false;
  for (const Slot& s : slots_) {
    const at::Tensor& grad = s.param.grad();
    if (!grad.defined()) continue;
    // Squares summed in double without a double copy of the gradient.
    const double sq = at::sum(grad.square(), at::kDouble).item<double>();
    if (!std::isfinite(sq)) bad = true;
    sum += sq;
  }
  *found_inf_nan = bad;
  return sum;
}

std::vector<NamedTensor> AdamW::StateForCheckpoint() const {
  std::vector<NamedTensor> out;
  for (const Slot& s : slots_) {
    out.emplace_back(s.name, s.param.detach());
    out.emplace_back(s.name + ".exp_avg", s.exp_avg);
    out.emplace_back(s.name + ".exp_avg_sq", s.exp_avg_sq);
  }
  out.emplace_back("optimizer.step", at::scalar_tensor(updates_, at::kLong));
  return out;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> AdamW::CheckpointLayout() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> layout;
  for (const auto& [name, tensor] : StateForCheckpoint()) {
    layout.emplace_back(name, tensor.sizes().vec());
  }
  return layout;
}

absl::Status AdamW::RestoreFromCheckpoint(const std::vector<NamedTensor>& state) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  std::vector<NamedTensor> targets = StateForCheckpoint();
  for (const auto& [name, target] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint lacks tensor \"", name, "\""));
    }
    if (!it->second.sizes().equals(target.sizes())) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint tensor \"", name,
                                                     "\" does not match the model's shape"));
    }
  }
  at::NoGradGuard no_grad;
  for (auto& [name, target] : targets) {
    if (name == "optimizer.step") {
      updates_ = by_name.at(name).item<int64_t>();
    } else {
      target.copy_(by_name.at(name));
    }
  }
  return absl::OkStatus();
}

}  // namespace zbpp::worker

