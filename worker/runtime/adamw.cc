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
  // The fused kernel reads the bias-correction count from a float32 tensor
  // on the parameters' device (PyTorch's own fused AdamW keeps it so).
  if (!slots_.empty()) step_count_ = at::zeros({}, slots_[0].param.options().dtype(at::kFloat));
}

at::Tensor AdamW::Denominator(const Slot& s) const {
  // As the fused kernel computes it: sqrt(v) / sqrt(1 - beta2^t) + epsilon.
  const double correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, double(updates_)));
  return s.exp_avg_sq.sqrt().div_(correction2_sqrt).add_(options_.epsilon);
}

double AdamW::StepSize(int64_t step) const {
  return options_.LearningRateAt(step) / (1.0 - std::pow(options_.beta1, double(updates_)));
}

std::vector<AdamW::Slot*> AdamW::SlotsWithGradient() {
  std::vector<Slot*> out;
  for (Slot& s : slots_) {
    if (s.param.grad().defined()) out.push_back(&s);
  }
  return out;
}

void AdamW::Step(int64_t step, double grad_scale) {
  ++updates_;
  at::NoGradGuard no_grad;
  const std::vector<Slot*> slots = SlotsWithGradient();
  if (slots.empty()) return;
  step_count_.fill_(double(updates_));
  // One fused kernel per weight-decay group (at::_fused_adamw_: PyTorch's
  // torch.optim.AdamW(fused=True) on CUDA and the CPU): every element's
  // update in one pass instead of a kernel per operation and parameter.
  for (const bool decay : {true, false}) {
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    for (Slot* s : slots) {
      if (s->decay != decay) continue;
      params.push_back(s->param);
      grads.push_back(s->param.grad());
      exp_avgs.push_back(s->exp_avg);
      exp_avg_sqs.push_back(s->exp_avg_sq);
    }
    if (params.empty()) continue;
    // Scaled copies: the kernel's own grad_scale would divide .grad in
    // place, and InvertStep and a re-step after a rollback need it as is.
    if (grad_scale != 1.0) grads = at::_foreach_mul(grads, grad_scale);
    const std::vector<at::Tensor> steps(params.size(), step_count_);
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps,
                      options_.LearningRateAt(step), options_.beta1, options_.beta2,
                      decay ? options_.weight_decay : 0.0, options_.epsilon,
                      /*amsgrad=*/false, /*maximize=*/false);
    // The kernel does not bump the parameters' version counters; the
    // compute-type copies of the weights (ComputeTypeCopies) rely on them.
    for (const at::Tensor& p : params) p.unsafeGetTensorImpl()->bump_version();
  }
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
  at::NoGradGuard no_grad;
  const double decay = 1.0 - options_.LearningRateAt(step) * options_.weight_decay;
  const double step_size = StepSize(step);
  for (Slot* s : SlotsWithGradient()) {
    const at::Tensor g = grad_scale == 1.0 ? s->param.grad() : s->param.grad() * grad_scale;
    // The kernel's update, step_size · m / denominator, recomputed from the
    // same moments, added back.
    s->param.addcdiv_(s->exp_avg, Denominator(*s), step_size);
    if (s->decay) s->param.div_(decay);
    s->exp_avg.sub_(g, 1.0 - options_.beta1).div_(options_.beta1);
    s->exp_avg_sq.addcmul_(g, g, -(1.0 - options_.beta2)).div_(options_.beta2).clamp_min_(0);
  }
  --updates_;
}

void AdamW::ZeroGrad() {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (Slot* s : SlotsWithGradient()) grads.push_back(s->param.grad());
  if (!grads.empty()) at::_foreach_zero_(grads);
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
  // Squares summed in double without a double copy of the gradient, per
  // parameter, then over parameters on the device: one read back, not one
  // per parameter. No entry is negative, so an inf or nan anywhere leaves
  // the total non-finite.
  at::Tensor total;
  for (const Slot& s : slots_) {
    const at::Tensor& grad = s.param.grad();
    if (!grad.defined()) continue;
    const at::Tensor sq = at::sum(grad.square(), at::kDouble);
    total = total.defined() ? total.add_(sq) : sq;
  }
  const double sum = total.defined() ? total.item<double>() : 0.0;
  *found_inf_nan = !std::isfinite(sum);
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

