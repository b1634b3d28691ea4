#include "coordinator/core/schedule_file.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "api/pipeline_shape.h"
#include "coordinator/core/spec_refusal.h"
#include "scheduler/reduce_placement.h"
#include "scheduler/schedule_io.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

// "schedule.file \"x.csv\"", for messages.
std::string FileName(const zbpp::v1::JobSpec& spec) {
  return absl::StrCat("schedule.file \"", spec.schedule().file(), "\"");
}

absl::Status ShapeMismatch(const zbpp::v1::JobSpec& spec, const char* field,
                           int64_t wanted, int in_file, const char* what) {
  return RefuseField(field, wanted, " but ", FileName(spec), " has ", in_file, " ", what);
}

}  // namespace

absl::StatusOr<sched::Schedule> ParseScheduleFile(
    const zbpp::v1::JobSpec& spec) {
  absl::StatusOr<sched::PytorchCsvImport> imported =
      sched::ImportSchedule(spec.schedule().file_text());
  if (!imported.ok()) {
    return RefuseField("schedule.file_text", FileName(spec), ": ",
                       imported.status().message());
  }
  return std::move(imported->schedule);
}

absl::StatusOr<sched::Schedule> ScheduleFromFile(
    const zbpp::v1::JobSpec& spec, const sched::Problem& problem) {
  absl::StatusOr<sched::Schedule> schedule = ParseScheduleFile(spec);
  if (!schedule.ok()) return schedule.status();
  const zbpp::v1::PipelineSpec& pipeline = spec.pipeline();
  if (schedule->stages != pipeline.stages()) {
    return ShapeMismatch(spec, "pipeline.stages", pipeline.stages(),
                         schedule->stages, "workers (rows)");
  }
  if (schedule->microbatches != pipeline.microbatches()) {
    return ShapeMismatch(spec, "pipeline.microbatches",
                         pipeline.microbatches(), schedule->microbatches,
                         "microbatches");
  }
  if (pipeline.has_chunks() && schedule->chunks != pipeline.chunks()) {
    return ShapeMismatch(spec, "pipeline.chunks", pipeline.chunks(),
                         schedule->chunks, "chunks per worker");
  }
  for (const auto& actions : schedule->actions) {
    for (const sched::Action& action : actions) {
      if (action.kind == sched::PassKind::kReduce) {
        return RefuseField("schedule.file_text", FileName(spec),
                           " holds REDUCE_GRAD actions; the coordinator places the "
                           "reductions itself (pipeline.data_parallel > 1)");
      }
    }
  }
  absl::StatusOr<sched::SimulationResult> sim =
      sched::Simulate(problem, *schedule);
  if (!sim.ok()) {
    return RefuseField("schedule.file_text", FileName(spec), ": ", sim.status().message());
  }
  for (int w = 0; w < schedule->stages; ++w) {
    if (sched::OverMemoryLimit(sim->peak_memory_bytes[w], problem.limit_of(w))) {
      const char* field =
          spec.schedule().has_memory_limit_bytes()
              ? "schedule.memory_limit_bytes"
              : "schedule.memory_limit_m_b";
      return RefuseField(field, FileName(spec), " peaks at ", sim->peak_memory_bytes[w],
                         " bytes on stage ", w, ", over the limit of ", problem.limit_of(w));
    }
  }
  if (DataParallelOf(pipeline) <= 1) return schedule;
  return sched::PlaceReductions(problem, *schedule,
                                sched::ReducePlacement::kSolved);
}

bool ResolveDisabled(const zbpp::v1::JobSpec& spec) {
  const zbpp::v1::ResolvePolicy& resolve = spec.schedule().resolve();
  return resolve.has_disabled() ? resolve.disabled()
                                : !spec.schedule().file().empty();
}

std::string FileResolver(const sched::Schedule& current) {
  absl::StatusOr<sched::Placement> placement = sched::PlacementOf(current);
  return placement.ok() && *placement == sched::Placement::kV ? "zb-v"
                                                              : "zb-auto";
}

std::shared_ptr<const std::string> ScheduleFileTexts::Intern(const std::string& sha256,
                                                             std::string text) {
  // Texts no job holds any more go first (as many as the jobs erased).
  absl::erase_if(texts_, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<const std::string>& held = texts_[sha256];
  if (std::shared_ptr<const std::string> shared = held.lock()) return shared;
  auto shared = std::make_shared<const std::string>(std::move(text));
  held = shared;
  return shared;
}

size_t ScheduleFileTexts::size() const {
  size_t live = 0;
  for (const auto& [sha256, text] : texts_) live += text.expired() ? 0 : 1;
  return live;
}

void AttachScheduleFileText(const std::shared_ptr<const std::string>& text,
                            zbpp::v1::JobSpec& spec) {
  if (text != nullptr) spec.mutable_schedule()->set_file_text(*text);
}

}  // namespace zbpp::coordinator
