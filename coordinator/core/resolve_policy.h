#ifndef ZBPP_COORDINATOR_CORE_RESOLVE_POLICY_H_
#define ZBPP_COORDINATOR_CORE_RESOLVE_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

/// The outcome of one re-solve, to be logged and stored whatever it says
/// (every re-solve is logged with its predicted old and new makespan).
struct ResolveDecision {
  /// True when `candidate` should be published as a new version.
  bool publish = false;
  /// The policy as given ("zb-1p", "1f1b", ...).
  std::string policy;
  /// The version that was in force when deciding.
  int64_t current_version = 0;
  /// The current schedule simulated under the measured costs: the whole
  /// result, so that publishing needs no second simulation (a new version's
  /// `previous_predicted`).
  sched::SimulationResult current_simulation;
  /// `candidate` simulated under the same costs: the new version's
  /// `predicted`. Set whenever `candidate` is.
  std::optional<sched::SimulationResult> candidate_simulation;
  /// The makespans of the two simulations (the candidate's: the current
  /// one's when there is no candidate).
  double old_makespan_seconds = 0;
  double new_makespan_seconds = 0;
  /// (old - new) / old: > 0 when the candidate is shorter.
  double improvement_fraction = 0;
  /// One line for the log, e.g. "predicted makespan 38 s -> 36 s (5.26%
  /// shorter, threshold 2%): publish".
  std::string reason;
  /// Wall-clock seconds spent in the scheduler (0 for a fixed policy).
  double solve_seconds = 0;
  /// The re-solved schedule, set whenever one was produced and simulated
  /// (empty otherwise: fixed policy, solver refusal, other placement).
  /// Publish it, with `candidate_simulation`, when `publish` is true.
  sched::Schedule candidate;
};

/// Adaptive re-solve (docs/control-plane.md, "The control plane"): given
/// the schedule in force and the measured cost model, re-runs the scheduler
/// for the job's policy, simulates both the current order and the candidate
/// under the measured costs (sched::Simulate, the single definition of
/// makespan) and publishes when the candidate is shorter by more than
/// `min_improvement_fraction`. This covers a straggler (one stage slower:
/// the solver moves W passes into its neighbours' bubbles) as well as its
/// recovery (the straggler-tuned order is then re-solved away).
///
/// Policies are registry names: those whose generator takes costs and the
/// memory limit as input (zb-1p, zb-2p, zb-auto, zb-v, v-half, v-min) are
/// re-solved. Fixed shapes (gpipe, 1f1b, 1f1b-interleaved, zb-h1, zb-h2,
/// dualpipe-v) do not depend on costs: only the prediction is refreshed and
/// nothing is published. A job's "auto" is not a policy here: it re-solves
/// the schedule its plan picked for it (PlanJob, planning.h).
///
/// Thread-safe (no mutable state).
class ResolvePolicy {
 public:
  struct Options {
    /// Source of time for `solve_seconds`; not owned, must outlive this.
    Clock* clock = RealClock();
    /// Publish only when (old - new) / old is larger than this. In [0, 1).
    double min_improvement_fraction = 0.02;
    /// Hysteresis: do not re-solve while the measured costs still move by
    /// more than this fraction within the window (CostModel::Drift), e.g.
    /// a straggler that appeared a few steps ago. Its medians would mix the
    /// two regimes and the candidate would suit neither; the next window,
    /// once settled, decides. >= 0; +infinity turns the check off.
    double max_cost_drift_fraction = 0.5;
    /// The job's data-parallel replicas d (>= 1): with d > 1 every candidate
    /// gets its reductions placed (GenerateSchedule) before it is simulated
    /// against the current schedule, which holds them too.
    int data_parallel = 1;
  };

  /// InvalidArgument for a null clock, a fraction outside [0, 1) or
  /// data_parallel < 1.
  static absl::StatusOr<std::unique_ptr<ResolvePolicy>> Create(Options options);

  /// Decides whether to replace `current` (version `current_version`).
  /// `measured` is the cost model's problem (CostModel::ToProblem) with the
  /// job's memory limit in `memory_limit_bytes` (empty: the policy's own
  /// limit, e.g. p·M_B for zb-1p). A candidate that moves virtual stages to
  /// other workers is never published (that would move weights).
  ///
  /// `cost_drift` is the cost model's Drift() over the window `measured`
  /// summarises; above `max_cost_drift_fraction` nothing is solved and the
  /// decision keeps the current version, saying why.
  ///
  /// Errors: NotFound for an unknown policy; InvalidArgument when
  /// `measured` is invalid or `current` does not fit it (CheckSchedule),
  /// FailedPrecondition when `current` deadlocks under it. A solver that
  /// refuses the problem is not an error: the decision says so and keeps
  /// the current version.
  absl::StatusOr<ResolveDecision> Decide(std::string_view policy,
                                         const sched::Schedule& current,
                                         int64_t current_version,
                                         const sched::Problem& measured,
                                         double cost_drift = 0) const;

 private:
  explicit ResolvePolicy(Options options) : options_(options) {}

  const Options options_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_RESOLVE_POLICY_H_
