#ifndef ZBPP_COORDINATOR_CORE_VALIDATION_POLICY_H_
#define ZBPP_COORDINATOR_CORE_VALIDATION_POLICY_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "scheduler/schedule.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// Chooses the validation mode of a job's optimizer steps (paper §4).
///
/// Post-update validation removes the barrier before every optimizer step
/// but pays a rollback, a redo and a replay of the next step's speculative
/// forwards for each step that needed clipping or held an inf/nan. Under
/// JobSpec.validation AUTO the job starts SYNCHRONOUS, switches to POST
/// after `post_after_clean_steps` consecutive steps that needed no change
/// (the paper's authors use 10), and back to SYNCHRONOUS when
/// `sync_after_changes` steps within the last `window_steps` needed one
/// (a run that clips often gains nothing from speculating). SYNCHRONOUS and
/// POST jobs keep their mode.
///
/// Thread-compatible.
class ValidationPolicy {
 public:
  struct Options {
    int post_after_clean_steps = 10;  ///< >= 1.
    int sync_after_changes = 3;       ///< >= 1.
    int64_t window_steps = 100;       ///< >= 1.
  };

  /// `requested`: the job spec's mode (UNSPECIFIED means AUTO); `current`:
  /// the mode already in force (a restarted coordinator reloads it from the
  /// job), UNSPECIFIED for a new job.
  ValidationPolicy(v1::ValidationMode requested, v1::ValidationMode current, Options options);

  /// The mode new schedule versions get: SYNCHRONOUS or POST.
  v1::ValidationMode mode() const { return mode_; }

  /// Records a gathered outcome (in step order). Outcomes of steps that ran
  /// in another mode than mode() (those between a switch and its effective
  /// step) are ignored. Returns the mode to switch to when a switch is due,
  /// nullopt otherwise; mode() changes only with SwitchedTo, so a switch
  /// that could not be published is proposed again with the next outcome.
  std::optional<v1::ValidationMode> Record(const v1::ValidationOutcome& outcome);

  /// A version carrying `mode` was published: new versions get it.
  void SwitchedTo(v1::ValidationMode mode);

 private:
  const bool automatic_;
  const Options options_;
  v1::ValidationMode mode_;
  int clean_streak_ = 0;
  std::deque<int64_t> changed_steps_;  // Steps that needed a change, oldest first.
};

/// Why `schedule` may not run with post-update validation over
/// `transport`; empty when it may. Only NCCL restricts it: NCCL cannot
/// cancel a posted operation, so a discarded speculative step is settled
/// by completing exactly the speculative prefixes' messages, which needs
/// prefixes that are closed and lead their pairs' orders
/// (scheduler/comm_order.h CheckSpeculativePrefixes). A schedule that fails
/// runs SYNCHRONOUS under NCCL; the text says why, e.g. "NCCL needs closed
/// speculative prefixes: worker 0 runs 2F3 in its speculative prefix, but
/// ...". Costs a unit-cost simulation of `schedule` under NCCL (nothing
/// otherwise). Thread-safe (pure).
std::string PostValidationObstacle(v1::Transport transport, const sched::Schedule& schedule);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_VALIDATION_POLICY_H_
