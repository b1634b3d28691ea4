#include "coordinator/core/data_parallel.h"

#include "coordinator/core/model_costs.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"

namespace zbpp::coordinator {

double StageParameterCount(const zbpp::v1::ModelSpec& model, int blocks, int stage,
                           int num_virtual_stages) {
  return blocks * BlockCostsOf(model, 1).parameters +
         EndParameters(model, stage, num_virtual_stages);
}

absl::StatusOr<sched::Schedule> GenerateSchedule(std::string_view name,
                                                 const sched::Problem& problem,
                                                 int data_parallel) {
  absl::StatusOr<sched::Schedule> schedule = sched::Generate(name, problem);
  if (!schedule.ok() || data_parallel <= 1) return schedule;
  return sched::PlaceReductions(problem, *schedule,
                                sched::ReducePlacement::kSolved);
}

}  // namespace zbpp::coordinator
