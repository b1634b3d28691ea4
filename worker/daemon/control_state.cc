#include "worker/daemon/control_state.h"

#include <utility>

namespace zbpp::worker {

bool ControlState::Holds(const std::string& job_id, int64_t attempt) const {
  return current_.has_value() && current_->assignment.job_id() == job_id &&
         current_->assignment.attempt() == attempt;
}

void ControlState::Assign(const v1::Assignment& assignment) {
  current_.emplace();
  current_->assignment = assignment;
  current_->versions[assignment.schedule().version()] = assignment.schedule();
  last_completed_step_ = -1;
  schedule_version_ = 0;
  error_.clear();
}

void ControlState::Apply(const v1::SessionResponse& message) {
  absl::MutexLock lock(&mu_);
  switch (message.message_case()) {
    case v1::SessionResponse::kAssignment: {
      const v1::Assignment& a = message.assignment();
      if (Holds(a.job_id(), a.attempt())) return;  // A repeat on a reopened stream.
      if (current_.has_value() && !current_->aborted) return;  // Only idle workers start jobs.
      if (current_.has_value()) {
        queued_ = a;  // Starts when the aborted attempt is finished.
      } else {
        Assign(a);
      }
      return;
    }
    case v1::SessionResponse::kSchedule: {
      const v1::ScheduleVersion& v = message.schedule();
      if (!current_.has_value() || current_->assignment.job_id() != v.job_id()) return;
      current_->versions[v.version()] = v;
      return;
    }
    case v1::SessionResponse::kGrant: {
      const v1::StepGrant& g = message.grant();
      if (!Holds(g.job_id(), g.attempt())) return;
      current_->granted = std::max(current_->granted, g.through_step());
      return;
    }
    case v1::SessionResponse::kCommand: {
      const v1::Command& c = message.command();
      if (!Holds(c.job_id(), c.attempt())) return;
      current_->aborted = true;
      if (abort_hook_) abort_hook_();
      if (c.has_abort()) {
        current_->abort_reason = c.abort().reason();
      } else if (c.has_restart()) {
        current_->abort_reason = "restarted from a checkpoint";
        queued_ = c.restart().assignment();
      }
      if (!current_->started) {
        // Never started: nothing to wind down.
        current_.reset();
        if (queued_.has_value()) {
          Assign(*queued_);
          queued_.reset();
        }
      }
      return;
    }
    case v1::SessionResponse::MESSAGE_NOT_SET:
      return;
  }
}

std::optional<v1::Assignment> ControlState::WaitForAssignment(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return current_.has_value() && !current_->started && !current_->aborted;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) return std::nullopt;
  current_->started = true;
  return current_->assignment;
}

ControlState::GrantWait ControlState::WaitForGrant(const std::string& job_id, int64_t attempt,
                                                   int64_t step, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !Holds(job_id, attempt) || current_->aborted || current_->granted >= step;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) return GrantWait::kTimedOut;
  if (!Holds(job_id, attempt) || current_->aborted) return GrantWait::kAborted;
  return GrantWait::kGranted;
}

std::optional<v1::ScheduleVersion> ControlState::VersionFor(const std::string& job_id,
                                                            int64_t attempt,
                                                            int64_t step) const {
  absl::MutexLock lock(&mu_);
  if (!Holds(job_id, attempt)) return std::nullopt;
  std::optional<v1::ScheduleVersion> best;
  for (const auto& [number, version] : current_->versions) {
    if (version.effective_step() <= step) best = version;
  }
  return best;
}

bool ControlState::Aborted(const std::string& job_id, int64_t attempt,
                           std::string* reason) const {
  absl::MutexLock lock(&mu_);
  if (!Holds(job_id, attempt)) {
    if (reason != nullptr) *reason = "the attempt is no longer held";
    return true;
  }
  if (current_->aborted && reason != nullptr) *reason = current_->abort_reason;
  return current_->aborted;
}

void ControlState::Finish(const std::string& job_id, int64_t attempt) {
  absl::MutexLock lock(&mu_);
  if (!Holds(job_id, attempt)) return;
  current_.reset();
  if (queued_.has_value()) {
    Assign(*queued_);
    queued_.reset();
  }
}

void ControlState::Reset() {
  absl::MutexLock lock(&mu_);
  if (current_.has_value()) {
    current_->aborted = true;
    current_->abort_reason = "registered again: the coordinator lost this worker";
    if (abort_hook_) abort_hook_();
    if (!current_->started) current_.reset();
  }
  queued_.reset();
}

void ControlState::SetAbortHook(const std::string& job_id, int64_t attempt,
                                std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  if (!Holds(job_id, attempt) || current_->aborted) {
    hook();
    return;
  }
  abort_hook_ = std::move(hook);
}

void ControlState::ClearAbortHook() {
  absl::MutexLock lock(&mu_);
  abort_hook_ = nullptr;
}

v1::Heartbeat ControlState::Heartbeat() const {
  absl::MutexLock lock(&mu_);
  v1::Heartbeat hb;
  hb.set_phase(phase_);
  if (current_.has_value()) {
    hb.set_job_id(current_->assignment.job_id());
    hb.set_attempt(current_->assignment.attempt());
  }
  hb.set_last_completed_step(last_completed_step_);
  hb.set_schedule_version(schedule_version_);
  hb.set_error(error_);
  return hb;
}

void ControlState::SetPhase(v1::WorkerPhase phase, const std::string& error) {
  absl::MutexLock lock(&mu_);
  phase_ = phase;
  error_ = error;
}

void ControlState::SetProgress(int64_t last_completed_step, int64_t schedule_version) {
  absl::MutexLock lock(&mu_);
  last_completed_step_ = last_completed_step;
  schedule_version_ = schedule_version;
}

}  // namespace zbpp::worker
