#include "worker/daemon/control_state.h"

#include <utility>

#include "api/schedule_version.h"

namespace zbpp::worker {

bool ControlState::Holds(const std::string& job_id, int64_t attempt) const {
  return current_.has_value() && current_->assignment.job_id() == job_id &&
         current_->assignment.attempt() == attempt;
}

bool ControlState::HoldsForCoordinator(const std::string& job_id, int64_t attempt) const {
  return Holds(job_id, attempt) && !current_->orphaned;
}

ControlState::Attempt* ControlState::Find(const std::string& job_id, int64_t attempt) {
  if (HoldsForCoordinator(job_id, attempt)) return &*current_;
  if (queued_.has_value() && queued_->assignment.job_id() == job_id &&
      queued_->assignment.attempt() == attempt) {
    return &*queued_;
  }
  return nullptr;
}

void ControlState::Queue(const v1::Assignment& assignment) {
  queued_ = Attempt{};
  queued_->assignment = assignment;
  queued_->versions[assignment.schedule().version()] =
      std::make_shared<const v1::ScheduleVersion>(assignment.schedule());
}

void ControlState::Promote() {
  ++revision_;
  current_ = std::move(queued_);
  queued_.reset();
  last_completed_step_ = -1;
  schedule_version_ = 0;
  quiet_ = false;
  // Whatever the previous attempt ended in is not the new one's phase.
  phase_ = v1::WORKER_PHASE_IDLE;
  error_.clear();
  job_error_ = false;
}

void ControlState::Apply(const v1::SessionResponse& message) {
  absl::MutexLock lock(&mu_);
  switch (message.message_case()) {
    case v1::SessionResponse::kAssignment: {
      const v1::Assignment& a = message.assignment();
      if (Find(a.job_id(), a.attempt()) != nullptr) return;  // A repeat.
      if (current_.has_value() && !current_->aborted) return;  // Only idle workers start jobs.
      Queue(a);
      // Starts now, or when the aborted attempt is finished.
      if (!current_.has_value()) Promote();
      return;
    }
    case v1::SessionResponse::kSchedule: {
      // Versions belong to the job; the newest attempt of it holds them.
      const v1::ScheduleVersion& v = message.schedule();
      if (queued_.has_value() && queued_->assignment.job_id() == v.job_id()) {
        queued_->versions[v.version()] = std::make_shared<const v1::ScheduleVersion>(v);
      } else if (current_.has_value() && !current_->orphaned &&
                 current_->assignment.job_id() == v.job_id()) {
        current_->versions[v.version()] = std::make_shared<const v1::ScheduleVersion>(v);
      }
      return;
    }
    case v1::SessionResponse::kGrant: {
      const v1::StepGrant& g = message.grant();
      if (Attempt* attempt = Find(g.job_id(), g.attempt())) {
        attempt->granted = std::max(attempt->granted, g.through_step());
      }
      return;
    }
    case v1::SessionResponse::kCommand: {
      const v1::Command& c = message.command();
      // The job ended: what this worker holds of it is of no more use.
      if (c.has_abort() && !c.abort().keep_state() && held_.has_value() &&
          held_->job_id() == c.job_id()) {
        held_drop_ = true;
        ++revision_;
      }
      if (!HoldsForCoordinator(c.job_id(), c.attempt())) return;
      current_->aborted = true;
      if (abort_hook_ && !quiet_) abort_hook_();
      if (c.has_abort()) {
        current_->abort_reason = c.abort().reason();
        current_->keep_state = c.abort().keep_state();
      } else if (c.has_restart()) {
        current_->abort_reason = "restarted from a checkpoint";
        Queue(c.restart().assignment());
      }
      // Never started: nothing to wind down.
      if (!current_->started) Promote();
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
  quiet_ = false;  // The step communicates: an abort must release it.
  return GrantWait::kGranted;
}

ControlState::VersionPtr ControlState::VersionFor(const std::string& job_id,
                                                 int64_t attempt, int64_t step) const {
  absl::MutexLock lock(&mu_);
  if (!Holds(job_id, attempt)) return nullptr;
  const v1::ScheduleVersion* version = VersionInForce(current_->versions, step);
  if (version == nullptr) return nullptr;
  return current_->versions.at(version->version());
}

std::optional<ControlState::Held> ControlState::HeldFor(const std::string& job_id,
                                                       int64_t attempt) const {
  absl::MutexLock lock(&mu_);
  if (!HoldsForCoordinator(job_id, attempt)) return std::nullopt;
  Held held;
  held.granted = current_->granted;
  for (const auto& [number, version] : current_->versions) held.versions.push_back(version);
  return held;
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
  Promote();
}

void ControlState::SetQuiet() {
  absl::MutexLock lock(&mu_);
  quiet_ = true;
}

bool ControlState::KeepsState(const std::string& job_id, int64_t attempt) const {
  absl::MutexLock lock(&mu_);
  return Holds(job_id, attempt) && current_->aborted && current_->keep_state;
}

void ControlState::SetHeld(std::optional<v1::HeldState> held) {
  absl::MutexLock lock(&mu_);
  held_ = std::move(held);
  held_drop_ = false;
  ++revision_;  // Worth a heartbeat at once: the coordinator waits for it.
}

bool ControlState::TakeHeldDrop() {
  absl::MutexLock lock(&mu_);
  return std::exchange(held_drop_, false);
}

void ControlState::Reset() {
  absl::MutexLock lock(&mu_);
  if (current_.has_value()) {
    current_->aborted = true;
    current_->abort_reason = "registered again: the coordinator lost this worker";
    // A restarted coordinator may resume from the stage this worker holds
    // (docs/elastic.md, "Coordinator restart"); one that does not want it
    // says so (an Abort without keep_state for its job).
    current_->keep_state = true;
    current_->orphaned = true;
    if (abort_hook_ && !quiet_) abort_hook_();
    if (!current_->started) current_.reset();
    ++revision_;
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

void ControlState::WaitForChange(int64_t* revision, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const int64_t seen = *revision;
  auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return revision_ != seen; };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  *revision = revision_;
}

void ControlState::Poke() {
  absl::MutexLock lock(&mu_);
  ++revision_;
}

v1::Heartbeat ControlState::Heartbeat() const {
  absl::MutexLock lock(&mu_);
  v1::Heartbeat hb;
  if (held_.has_value()) *hb.mutable_held() = *held_;
  if (current_.has_value() && current_->orphaned) {
    // Winding down an attempt of the coordinator's previous life: to this
    // one the worker is idle until that ends (and then takes assignments).
    hb.set_phase(v1::WORKER_PHASE_IDLE);
    hb.set_last_completed_step(-1);
    return hb;
  }
  hb.set_phase(phase_);
  if (current_.has_value()) {
    hb.set_job_id(current_->assignment.job_id());
    hb.set_attempt(current_->assignment.attempt());
  }
  hb.set_last_completed_step(last_completed_step_);
  hb.set_schedule_version(schedule_version_);
  hb.set_error(error_);
  hb.set_job_error(job_error_);
  return hb;
}

void ControlState::SetPhase(v1::WorkerPhase phase, const std::string& error, bool job_error) {
  absl::MutexLock lock(&mu_);
  // Worth a heartbeat at once: anything but the RUNNING <-> WAITING flip
  // of every step (the interval reports progress).
  auto stepping = [](v1::WorkerPhase p) {
    return p == v1::WORKER_PHASE_RUNNING || p == v1::WORKER_PHASE_WAITING;
  };
  if (phase != phase_ && !(stepping(phase) && stepping(phase_))) ++revision_;
  phase_ = phase;
  error_ = error;
  job_error_ = job_error;
}

void ControlState::SetProgress(int64_t last_completed_step, int64_t schedule_version) {
  absl::MutexLock lock(&mu_);
  last_completed_step_ = last_completed_step;
  schedule_version_ = schedule_version;
}

}  // namespace zbpp::worker
