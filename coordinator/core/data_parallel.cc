#include "coordinator/core/data_parallel.h"

#include "scheduler/reduce_placement.h"
#include "scheduler/registry.h"

namespace zbpp::coordinator {

double StageParameterCount(const zbpp::v1::ModelSpec& model, int stage,
                           int num_stages) {
  // In doubles: 4h² and vocab·h overflow int32 for sizes the spec check
  // admits (h <= 65536, vocab <= 2^20).
  const double h = model.hidden();
  const double vocab = model.vocab();
  const double f = model.has_ffn_hidden() ? model.ffn_hidden() : 4 * h;
  const double blocks = static_cast<double>(model.layers()) / num_stages;
  double count = blocks * (4 * h * h + 2 * h * f + 9 * h + f);
  if (stage == 0) count += (vocab + model.seq_len()) * h;
  if (stage == num_stages - 1) count += 2 * h + vocab * h;
  return count;
}

double RingAllReduceSeconds(double bytes, int replicas) {
  if (replicas <= 1) return 0;
  const double d = replicas;
  return 2 * (d - 1) / d * bytes / kAllReduceBytesPerSecond +
         2 * (d - 1) * kAllReduceHopLatencySeconds;
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
