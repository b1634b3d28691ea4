#ifndef ZBPP_WORKER_DAEMON_CONTROL_STATE_H_
#define ZBPP_WORKER_DAEMON_CONTROL_STATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::worker {

/// What the coordinator told this worker on its Session stream, and what the
/// worker reports back in heartbeats: the meeting point of the session
/// thread (which applies SessionResponses) and the training thread (which
/// waits on them).
///
/// Follows the protocol of proto/zbpp/v1/worker.proto: repeats are no-ops,
/// messages for another job or an older attempt are ignored, grants are
/// monotone, a RestartFromCheckpointCommand replaces the attempt.
///
/// Thread-safe.
class ControlState {
 public:
  /// Applies one coordinator message.
  void Apply(const v1::SessionResponse& message);

  /// Waits up to `timeout` for an assignment to start; nullopt if none came.
  /// An assignment is "started" once: the training thread runs it until it
  /// ends (Finish) or is aborted.
  std::optional<v1::Assignment> WaitForAssignment(absl::Duration timeout);

  enum class GrantWait { kGranted, kAborted, kTimedOut };
  /// Waits until `step` of the held attempt is granted, the attempt is
  /// aborted or replaced, or `timeout` passes.
  GrantWait WaitForGrant(const std::string& job_id, int64_t attempt, int64_t step,
                         absl::Duration timeout);

  /// A schedule version as held: immutable and shared, so that handing it
  /// out copies a pointer, not the version's p·m·3 actions.
  using VersionPtr = std::shared_ptr<const v1::ScheduleVersion>;

  /// The schedule version of the attempt in force at `step`
  /// (VersionInForce, api/schedule_version.h; the assignment's version
  /// included); null when none applies.
  VersionPtr VersionFor(const std::string& job_id, int64_t attempt, int64_t step) const;

  /// What the coordinator's messages hold for the attempt (job_id, attempt)
  /// while the coordinator is talking about it (current, not orphaned).
  struct Held {
    /// The highest step granted; -1: none yet.
    int64_t granted = -1;
    /// Every schedule version received (the assignment's included), by
    /// ascending version number.
    std::vector<VersionPtr> versions;
  };
  /// The attempt's grants and versions; nullopt when it is not held. For
  /// fakes that drive the coordinator with this state and no training
  /// thread (the coordinator's tests, fuzzer and load benchmark).
  std::optional<Held> HeldFor(const std::string& job_id, int64_t attempt) const;

  /// True when the attempt was aborted or replaced (restart); the reason in
  /// `reason` when not null.
  bool Aborted(const std::string& job_id, int64_t attempt, std::string* reason = nullptr) const;

  /// The training thread is done with the attempt (finished, failed or
  /// aborted): forget it; the worker is idle unless a restart already queued
  /// a new assignment.
  void Finish(const std::string& job_id, int64_t attempt);

  /// Forgets everything (a new registration: the coordinator knows a new
  /// worker). An attempt the training thread still runs is aborted keeping
  /// its state (KeepsState: the coordinator's new life may resume from it,
  /// docs/elastic.md, "Coordinator restart") and orphaned: messages,
  /// heartbeats (but for Heartbeat.held, once the state is held) and the
  /// next assignment no longer refer to it (a restarted coordinator numbers
  /// attempts afresh, so its first attempt of the same job may carry the
  /// same number), while the training thread's calls (Aborted, KeepsState,
  /// Finish, ...) still find it. A state held already stays held.
  void Reset();

  /// While the training thread runs the attempt: `hook` runs (under this
  /// object's lock: it must be quick and must not call back) the moment the
  /// attempt is aborted or replaced, or at once if it already was; it
  /// releases the step blocked in communication (Communicator::Abort). Not
  /// while the training thread is quiet (SetQuiet): no step is blocked, and
  /// the groups stay usable for what the held state still needs of them
  /// (StageTrainer::Hold's wait for a validation state already sent).
  void SetAbortHook(const std::string& job_id, int64_t attempt, std::function<void()> hook);
  /// Removes the hook (before what it refers to is destroyed).
  void ClearAbortHook();

  /// Waits until the heartbeat's contents changed since `*revision` (an
  /// attempt started or ended, a phase other than the per-step RUNNING <->
  /// WAITING flip), Poke is called, or `timeout` passes; updates
  /// `*revision`. The heartbeat writer uses it to report a change at once
  /// instead of at the next interval.
  void WaitForChange(int64_t* revision, absl::Duration timeout);
  /// Wakes WaitForChange callers (e.g. a stream that ended).
  void Poke();

  /// True when the attempt (job, attempt) was aborted with
  /// AbortCommand.keep_state: the training thread keeps its stage's state
  /// (docs/elastic.md, "Held state"). Call before Finish.
  bool KeepsState(const std::string& job_id, int64_t attempt) const;
  /// The training thread communicates no more until its next grant (it
  /// reports a step, then waits for the grant, which it then gets only if
  /// the attempt was not aborted meanwhile): an abort until then does not
  /// run the abort hook.
  void SetQuiet();
  /// The stage state the training thread holds, reported in every
  /// heartbeat (Heartbeat.held); nullopt: none.
  void SetHeld(std::optional<v1::HeldState> held);
  /// True once, after an AbortCommand without keep_state for the job of
  /// the held state came: the training thread drops it (and SetHeld
  /// nullopt).
  bool TakeHeldDrop();

  /// Heartbeat contents: phase, held attempt, progress, error.
  v1::Heartbeat Heartbeat() const;
  /// `error` and `job_error` for WORKER_PHASE_FAILED (Heartbeat fields).
  void SetPhase(v1::WorkerPhase phase, const std::string& error = "", bool job_error = false);
  void SetProgress(int64_t last_completed_step, int64_t schedule_version);

 private:
  struct Attempt {
    v1::Assignment assignment;
    std::map<int64_t, VersionPtr> versions;  // By version number.
    int64_t granted = -1;
    bool started = false;
    bool aborted = false;
    std::string abort_reason;
    // The abort asked to keep the stage's state (AbortCommand.keep_state).
    bool keep_state = false;
    // Held from before a new registration (Reset): only the training thread
    // still knows it.
    bool orphaned = false;
  };
  // The training thread's view: the current attempt is (job, attempt).
  bool Holds(const std::string& job_id, int64_t attempt) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The coordinator's view: the current attempt, unless orphaned.
  bool HoldsForCoordinator(const std::string& job_id, int64_t attempt) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The attempt a message for (job, attempt) is about: current, queued, or
  // none (ignored).
  Attempt* Find(const std::string& job_id, int64_t attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Queue(const v1::Assignment& assignment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The queued attempt (if any) becomes current.
  void Promote() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::optional<Attempt> current_ ABSL_GUARDED_BY(mu_);
  // The next attempt (a restart's, or a new job's sent while the aborted one
  // winds down), with the versions and grants that came for it meanwhile;
  // it becomes current when the training thread finishes the current one.
  std::optional<Attempt> queued_ ABSL_GUARDED_BY(mu_);
  std::function<void()> abort_hook_ ABSL_GUARDED_BY(mu_);
  v1::WorkerPhase phase_ ABSL_GUARDED_BY(mu_) = v1::WORKER_PHASE_IDLE;
  std::string error_ ABSL_GUARDED_BY(mu_);
  bool job_error_ ABSL_GUARDED_BY(mu_) = false;
  int64_t last_completed_step_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t schedule_version_ ABSL_GUARDED_BY(mu_) = 0;
  // Bumped by every change a heartbeat reports, and by Poke.
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1::HeldState> held_ ABSL_GUARDED_BY(mu_);
  bool held_drop_ ABSL_GUARDED_BY(mu_) = false;
  // SetQuiet until the next grant (or attempt).
  bool quiet_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_CONTROL_STATE_H_
