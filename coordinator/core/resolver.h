#ifndef ZBPP_COORDINATOR_CORE_RESOLVER_H_
#define ZBPP_COORDINATOR_CORE_RESOLVER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/core/job_model.h"

namespace zbpp::coordinator {

/// Solves `task` (no lock held; the task holds copies): for a re-solve,
/// ResolvePolicy::Decide on the measured costs and, when it publishes, the
/// candidate's version (BuildVersion, with the old schedule's prediction
/// under the same costs and which stage moved most against the analytic
/// model) into task.record and task.candidate; for a calibration
/// (task.calibration) a version of reason CALIBRATION always — the
/// policy's candidate or the current order, whichever fits the measured
/// memory limit and predicts the shorter step (the current order when the
/// policy is empty or fixed) — or, when neither fits the limit of
/// task.memory_limit_field, task.failure naming that field, the measured
/// M_B and the peak needed. Thread-safe.
void SolveResolve(ResolveTask& task);

/// Runs re-solves outside the coordinator's mutex (docs/architecture.md,
/// Flow 2): a task a job decided (JobEffects::resolve) is queued under the
/// mutex (Submit, which never solves), then solved (SolveResolve) and
/// handed to `publish` in FIFO order, either on one background thread of
/// its own or, without it, by the caller once it has let go of the mutex
/// (SolveQueued).
///
/// Thread-safe.
class Resolver {
 public:
  struct Options {
    /// Solve on one background thread instead of the caller's.
    bool background = false;
    /// Hands a solved task back to its job (Coordinator::FinishResolve);
    /// takes the locks it needs.
    std::function<void(ResolveTask&)> publish;
    /// Called with the job id after solving, before `publish` (tests).
    std::function<void(const std::string&)> before_publish;
  };

  explicit Resolver(Options options);
  /// Stops the background thread; queued tasks are dropped.
  ~Resolver();

  /// Queues `task`; cheap, so it may be called under the caller's lock.
  void Submit(std::unique_ptr<ResolveTask> task) ABSL_LOCKS_EXCLUDED(mu_);

  /// Without a background thread: solves and publishes every queued task on
  /// the calling thread, which must not hold a lock `publish` takes. With
  /// one: nothing (its thread does).
  void SolveQueued() ABSL_LOCKS_EXCLUDED(mu_);

  /// Waits until every task queued so far has been published (without a
  /// background thread: solves them first, as SolveQueued).
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Solve(ResolveTask& task);
  /// The oldest queued task, marked busy; null when none.
  std::unique_ptr<ResolveTask> Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  absl::Mutex mu_;
  std::deque<std::unique_ptr<ResolveTask>> queue_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;  ///< Tasks being solved.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  ///< Joinable only with `background`.
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_RESOLVER_H_
