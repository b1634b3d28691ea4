#include "coordinator/core/validation_policy.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "scheduler/comm_order.h"

namespace zbpp::coordinator {

ValidationPolicy::ValidationPolicy(v1::ValidationMode requested, v1::ValidationMode current,
                                   Options options)
    : automatic_(requested == v1::VALIDATION_MODE_AUTO ||
                 requested == v1::VALIDATION_MODE_UNSPECIFIED),
      options_(options),
      mode_(requested == v1::VALIDATION_MODE_POST ? v1::VALIDATION_MODE_POST
                                                  : v1::VALIDATION_MODE_SYNCHRONOUS) {
  if (automatic_ && current == v1::VALIDATION_MODE_POST) mode_ = current;
}

std::optional<v1::ValidationMode> ValidationPolicy::Record(
    const v1::ValidationOutcome& outcome) {
  if (outcome.mode() != v1::VALIDATION_MODE_UNSPECIFIED && outcome.mode() != mode_) {
    return std::nullopt;
  }
  const bool changed = outcome.decision() != v1::VALIDATION_DECISION_COMMITTED;
  if (changed) {
    clean_streak_ = 0;
    changed_steps_.push_back(outcome.step());
  } else {
    ++clean_streak_;
  }
  while (!changed_steps_.empty() &&
         changed_steps_.front() <= outcome.step() - options_.window_steps) {
    changed_steps_.pop_front();
  }
  if (!automatic_) return std::nullopt;
  if (mode_ == v1::VALIDATION_MODE_SYNCHRONOUS &&
      clean_streak_ >= options_.post_after_clean_steps) {
    return v1::VALIDATION_MODE_POST;
  }
  if (mode_ == v1::VALIDATION_MODE_POST &&
      static_cast<int>(changed_steps_.size()) >= options_.sync_after_changes) {
    return v1::VALIDATION_MODE_SYNCHRONOUS;
  }
  return std::nullopt;
}

void ValidationPolicy::SwitchedTo(v1::ValidationMode mode) {
  mode_ = mode;
  clean_streak_ = 0;
  changed_steps_.clear();  // Only what the new mode meets counts.
}

std::string PostValidationObstacle(v1::Transport transport, const sched::Schedule& schedule) {
  if (transport != v1::TRANSPORT_NCCL) return "";
  absl::StatusOr<sched::PairOrders> orders = sched::DerivePairOrders(schedule);
  absl::Status prefixes = orders.ok() ? sched::CheckSpeculativePrefixes(schedule, *orders)
                                      : orders.status();
  if (prefixes.ok()) return "";
  return absl::StrCat("NCCL needs closed speculative prefixes: ", prefixes.message());
}

}  // namespace zbpp::coordinator
