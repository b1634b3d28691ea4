#include "coordinator/core/resolve_policy.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/core/data_parallel.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

std::string Seconds(double seconds) {
  return absl::StrFormat("%.6g s", seconds);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResolvePolicy>> ResolvePolicy::Create(
    Options options) {
  if (options.clock == nullptr) {
    return absl::InvalidArgumentError("ResolvePolicy::Options.clock is null");
  }
  if (!(options.min_improvement_fraction >= 0 &&
        options.min_improvement_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_improvement_fraction must be in [0, 1), got ",
                     options.min_improvement_fraction));
  }
  if (!(options.max_cost_drift_fraction >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_cost_drift_fraction must be >= 0, got ",
                     options.max_cost_drift_fraction));
  }
  if (options.data_parallel < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_parallel must be >= 1, got ", options.data_parallel));
  }
  return std::unique_ptr<ResolvePolicy>(new ResolvePolicy(options));
}

absl::StatusOr<ResolveDecision> ResolvePolicy::Decide(
    std::string_view policy, const sched::Schedule& current,
    int64_t current_version, const sched::Problem& measured,
    double cost_drift) const {
  const std::string name(policy);
  absl::StatusOr<sched::ScheduleTraits> traits = sched::FindSchedule(name);
  if (!traits.ok()) return traits.status();
  absl::StatusOr<sched::SimulationResult> old_sim =
      sched::Simulate(measured, current);
  if (!old_sim.ok()) return old_sim.status();

  ResolveDecision decision;
  decision.policy = std::string(policy);
  decision.current_version = current_version;
  decision.old_makespan_seconds = old_sim->makespan_seconds;
  decision.new_makespan_seconds = old_sim->makespan_seconds;
  decision.current_simulation = *std::move(old_sim);

  if (!traits->limit_is_input) {
    decision.reason = absl::StrCat(
        "fixed schedule ", name,
        " does not depend on costs; predicted makespan ",
        Seconds(decision.old_makespan_seconds), " under the measured costs");
    return decision;
  }

  if (cost_drift > options_.max_cost_drift_fraction) {
    decision.reason = absl::StrFormat(
        "measured costs still moving (%.3g%% within the window, limit "
        "%.3g%%); keeping version %d until they settle",
        100 * cost_drift, 100 * options_.max_cost_drift_fraction,
        current_version);
    return decision;
  }

  const absl::Time start = options_.clock->Now();
  absl::StatusOr<sched::Schedule> candidate =
      GenerateSchedule(name, measured, options_.data_parallel);
  decision.solve_seconds = absl::ToDoubleSeconds(options_.clock->Now() - start);
  if (!candidate.ok()) {
    // The job can go on with what it has; the log says why nothing changed.
    decision.reason =
        absl::StrCat("re-solve failed, keeping version ", current_version, ": ",
                     candidate.status().ToString());
    return decision;
  }
  if (candidate->stage_of != current.stage_of) {
    decision.reason = absl::StrCat(
        "candidate ", name,
        " places virtual stages on other workers; keeping version ",
        current_version);
    return decision;
  }
  absl::StatusOr<sched::SimulationResult> new_sim =
      sched::Simulate(measured, *candidate);
  if (!new_sim.ok()) {
    decision.reason =
        absl::StrCat("candidate does not simulate, keeping version ",
                     current_version, ": ", new_sim.status().ToString());
    return decision;
  }
  decision.new_makespan_seconds = new_sim->makespan_seconds;
  decision.improvement_fraction =
      decision.old_makespan_seconds > 0
          ? (decision.old_makespan_seconds - decision.new_makespan_seconds) /
                decision.old_makespan_seconds
          : 0;
  decision.publish =
      decision.improvement_fraction > options_.min_improvement_fraction;
  decision.reason = absl::StrFormat(
      "predicted makespan %s -> %s (%.3g%% shorter, threshold %.3g%%): %s",
      Seconds(decision.old_makespan_seconds),
      Seconds(decision.new_makespan_seconds),
      100 * decision.improvement_fraction,
      100 * options_.min_improvement_fraction,
      decision.publish ? "publish" : "keep");
  decision.candidate = *std::move(candidate);
  decision.candidate_simulation = *std::move(new_sim);
  return decision;
}

}  // namespace zbpp::coordinator
