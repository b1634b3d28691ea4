// libFuzzer target (bench/results/fuzz.md): the schedule importers. The first
// byte picks the reader (0: JSON, 1: CSV with loop placement, 2: CSV with V
// placement, 3: PyTorch pipelining's CSV with communication actions and
// OVERLAP_F_B, placement from the rows; taken mod 4, so that the ASCII digits
// '0'..'3' select the same), the rest is the text. A schedule that imports is
// simulated on a uniform problem of its shape: CheckSchedule and Simulate must
// answer with a Status (a malformed or deadlocking schedule is an error, not a
// crash or a hang).

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/schedule_io.h"
#include "scheduler/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1,
                              size - 1);
  absl::StatusOr<zbpp::sched::Schedule> schedule;
  switch (data[0] % 4) {
    case 0:
      schedule = zbpp::sched::ScheduleFromJson(text);
      break;
    case 1:
      schedule = zbpp::sched::ScheduleFromCsv(text, zbpp::sched::Placement::kLoop);
      break;
    case 2:
      schedule = zbpp::sched::ScheduleFromCsv(text, zbpp::sched::Placement::kV);
      break;
    default: {
      absl::StatusOr<zbpp::sched::PytorchCsvImport> imported =
          zbpp::sched::ScheduleFromPytorchCsv(text);
      if (!imported.ok()) return 0;
      schedule = std::move(imported->schedule);
      break;
    }
  }
  if (!schedule.ok()) return 0;
  // M_W = M_B / 2 and T_comm > 0, so that memory and cross-worker hops are
  // both exercised.
  const zbpp::sched::Problem problem = zbpp::sched::Problem::Uniform(
      schedule->stages, schedule->chunks, schedule->microbatches,
      zbpp::sched::VirtualStageCost{}, /*comm_seconds=*/0.25);
  (void)zbpp::sched::Simulate(problem, *schedule);
  return 0;
}
