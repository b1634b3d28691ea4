#ifndef ZBPP_SCHEDULER_SIMULATOR_H_
#define ZBPP_SCHEDULER_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// Start and end of one action, in seconds from the start of the step.
struct ActionTiming {
  double start_seconds = 0;
  double end_seconds = 0;
};

/// What the simulator computes for one (problem, schedule) pair. This is the
/// single definition of makespan, bubble rate and peak memory in zbpp.
struct SimulationResult {
  /// Parallel to `Schedule::actions`: timing of every action.
  std::vector<std::vector<ActionTiming>> timings;
  /// The paper's "cost" (§5.3): the largest per-worker span, from a worker's
  /// first start to its last end, in seconds.
  double makespan_seconds = 0;
  /// From the first start to the last end over all workers, in seconds: the
  /// wall-clock time of one step.
  double step_seconds = 0;
  /// Idle fraction in [0, 1]: 1 - sum_w busy_w / (p * makespan). For equal
  /// work on every worker this is the paper's (cost - m(T_F+T_B+T_W))/cost.
  double bubble_rate = 0;
  /// Per worker: seconds spent running passes.
  std::vector<double> busy_seconds;
  /// Per worker: makespan - busy, in seconds (the worker's bubble measured
  /// against the common makespan, so that sum_w idle / (p * makespan) is
  /// the bubble rate).
  std::vector<double> idle_seconds;
  /// Per worker: peak activation memory in bytes.
  std::vector<double> peak_memory_bytes;
  /// Per worker: peak in units of that worker's M_B (the sum of M_B over the
  /// virtual stages it holds, i.e. one microbatch's activations).
  std::vector<double> peak_memory_m_b;
  /// Max over workers of `peak_memory_m_b`.
  double max_peak_memory_m_b = 0;
};

/// Checks that `schedule` is well formed for `problem`: matching sizes, every
/// stage on the worker `worker_of_stage` names, every (stage, microbatch)
/// with exactly one F and either one B and one W or one BW, and on each
/// worker F before B before W of the same (stage, microbatch).
///
/// Returns InvalidArgument naming the worker, the position and the action,
/// e.g. `worker 1, action #7 (1W3): W before its B (1I3)`.
absl::Status CheckSchedule(const Problem& problem, const Schedule& schedule);

/// Runs `schedule` on `problem`'s cost model, event by event: an action
/// starts when its worker is free and its inputs are there. F of stage s
/// needs F of s-1, B of s needs F of s and B of s+1 (the last stage: its own
/// F), W needs its B; a dependency crossing workers arrives
/// `comm_seconds` after the producer ends, one between chunks of the same
/// worker at once. Memory: F holds M_B from its start, B frees M_B - M_W,
/// W frees M_W, BW frees M_B.
///
/// Errors: those of `Problem::Validate` and `CheckSchedule`;
/// FailedPrecondition for a deadlock, listing each stuck worker's next action
/// and the pass it waits for. O(number of actions). Thread-safe (pure).
absl::StatusOr<SimulationResult> Simulate(const Problem& problem,
                                          const Schedule& schedule);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_SIMULATOR_H_
