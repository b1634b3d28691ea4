#ifndef ZBPP_COORDINATOR_CORE_PREDICTED_STATS_H_
#define ZBPP_COORDINATOR_CORE_PREDICTED_STATS_H_

#include "scheduler/simulator.h"

namespace zbpp::coordinator {

/// What the simulator predicts for a schedule under a cost model: the
/// figures the coordinator stores with each schedule version and exports as
/// the dashboards' "predicted" series.
struct PredictedStats {
  double makespan_seconds = 0;     ///< Largest per-worker span (paper §5.3).
  double step_seconds = 0;         ///< First start to last end.
  double bubble_rate = 0;          ///< Idle fraction in [0, 1].
  double max_peak_memory_m_b = 0;  ///< Worst worker's peak, units of M_B.
};

/// The summary of one simulation.
inline PredictedStats Summarize(const sched::SimulationResult& result) {
  return PredictedStats{result.makespan_seconds, result.step_seconds,
                        result.bubble_rate, result.max_peak_memory_m_b};
}

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_PREDICTED_STATS_H_
