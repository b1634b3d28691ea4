#include "worker/runtime/adamw.h"

#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

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

at::Tensor AdamW::Denominator(const Slot& s) const {
  const double correction2 = 1.0 - std::pow(options_.beta2, double(updates_));
  return (s.exp_avg_sq / correction2).sqrt_().add_(options_.epsilon);
}

double AdamW::StepSize(int64_t step) const {
  return options_.LearningRateAt(step) / (1.0 - std::pow(options_.beta1, double(updates_)));
}

template <typename Update>
void AdamW::ForEachGradient(double grad_scale, Update update) {
  at::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    const at::Tensor& grad = s.param.grad();
    if (!grad.defined()) continue;
    update(s, grad_scale == 1.0 ? grad : grad * grad_scale);
  }
}

void AdamW::Step(int64_t step, double grad_scale) {
  ++updates_;
  const double decay = 1.0 - options_.LearningRateAt(step) * options_.weight_decay;
  const double step_size = StepSize(step);
  ForEachGradient(grad_scale, [&](Slot& s, const at::Tensor& g) {
    if (s.decay) s.param.mul_(decay);
    s.exp_avg.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    s.exp_avg_sq.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    s.param.addcdiv_(s.exp_avg, Denominator(s), -step_size);
  });
}

void AdamW::Snapshot() {
  snapshot_.resize(slots_.size());
  snapshot_updates_ = updates_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    std::array<at::Tensor, 3>& saved = snapshot_[i];
    if (!s.param.grad().defined()) {
      saved = {};
      continue;
    }
    const at::Tensor* from[3] = {&s.param, &s.exp_avg, &s.exp_avg_sq};
    for (int k = 0; k < 3; ++k) {
      if (!saved[k].defined()) saved[k] = at::empty_like(*from[k]);
      saved[k].copy_(*from[k]);
    }
  }
}

void AdamW::RestoreSnapshot() {
  at::NoGradGuard no_grad;
  updates_ = snapshot_updates_;
  for (size_t i = 0; i < snapshot_.size(); ++i) {
    Slot& s = slots_[i];
    const std::array<at::Tensor, 3>& saved = snapshot_[i];
    if (!saved[0].defined()) continue;
    s.param.copy_(saved[0]);
    s.exp_avg.copy_(saved[1]);
    s.exp_avg_sq.copy_(saved[2]);
  }
}

void AdamW::InvertStep(int64_t step, double grad_scale) {
  const double decay = 1.0 - options_.LearningRateAt(step) * options_.weight_decay;
  const double step_size = StepSize(step);
  ForEachGradient(grad_scale, [&](Slot& s, const at::Tensor& g) {
    s.param.addcdiv_(s.exp_avg, Denominator(s), step_size);
    if (s.decay) s.param.div_(decay);
    s.exp_avg.sub_(g, 1.0 - options_.beta1).div_(options_.beta1);
    s.exp_avg_sq.addcmul_(g, g, -(1.0 - options_.beta2)).div_(options_.beta2).clamp_min_(0);
  });
  --updates_;
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

void AdamW::ScaleGradients(double factor) {
  at::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    at::Tensor& grad = s.param.mutable_grad();
    if (grad.defined()) grad.mul_(factor);
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

