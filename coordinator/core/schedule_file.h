#ifndef ZBPP_COORDINATOR_CORE_SCHEDULE_FILE_H_
#define ZBPP_COORDINATOR_CORE_SCHEDULE_FILE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// A schedule a job spec carries (SchedulePolicy.file / file_text) instead
/// of naming a generated one.

/// The schedule in `spec.schedule.file_text` as written
/// (sched::ImportSchedule: zbpp's JSON or PyTorch pipelining's CSV), before
/// any check against the rest of the spec. Errors: a SpecRefusal
/// (spec_refusal.h) "schedule.file_text: <file>: <what the importer says>".
/// Thread-safe
/// (pure).
absl::StatusOr<sched::Schedule> ParseScheduleFile(
    const zbpp::v1::JobSpec& spec);

/// The schedule a job with `spec` runs from its file, checked against the
/// job: its workers equal pipeline.stages, its microbatches
/// pipeline.microbatches and, when set, its chunks pipeline.chunks; it
/// holds no REDUCE_GRAD (with pipeline.data_parallel > 1 the coordinator
/// places the reductions, sched::PlaceReductions kSolved, as for generated
/// schedules); it is complete and deadlock-free under `problem` (the spec's
/// InitialProblem, planning.h) and, when the spec sets a memory limit, within it on
/// every worker. Errors: a SpecRefusal (spec_refusal.h) naming the field
/// ("pipeline.stages: 4 but schedule.file \"x.csv\" has 2 workers", or
/// "schedule.file_text: ..." for what the simulator refuses, the limit's
/// field for a worker above it).
/// Thread-safe (pure).
absl::StatusOr<sched::Schedule> ScheduleFromFile(
    const zbpp::v1::JobSpec& spec, const sched::Problem& problem);

/// Whether the job keeps its first schedule: schedule.resolve.disabled when
/// set; when unset, true for a schedule file (a schedule the user wrote is
/// not replaced unless asked) and false otherwise. Thread-safe (pure).
bool ResolveDisabled(const zbpp::v1::JobSpec& spec);

/// The registry solver that re-solves a job running `current` from its
/// schedule file under measured costs: "zb-v" for the V placement, "zb-auto"
/// otherwise (a candidate that moves virtual stages is never published, see
/// ResolvePolicy::Decide). Thread-safe (pure).
std::string FileResolver(const sched::Schedule& current);

/// Schedule files' texts held once per content: every job whose file has
/// one SHA-256 (common/sha256.h) shares one immutable text, so a
/// 3 MiB file submitted with each job of a sweep is 3 MiB in all rather than
/// per job (the store keeps one copy likewise, store.h). A text goes when the
/// last job holding it does (the table keeps weak references).
///
/// Thread-compatible (JobTable uses it under the Coordinator's mutex); the
/// texts it hands out are immutable and may be read from any thread.
class ScheduleFileTexts {
 public:
  /// The text held for `sha256`; `text` (moved in) when none is held.
  /// `sha256` must be common/sha256.h's Sha256Hex(text): the caller has it.
  std::shared_ptr<const std::string> Intern(const std::string& sha256, std::string text);

  /// Texts held now (each once).
  size_t size() const;

 private:
  absl::flat_hash_map<std::string, std::weak_ptr<const std::string>> texts_;
};

/// Puts `text` (when not null) back into `spec`'s schedule.file_text: a job
/// holds its file beside its record (ScheduleFileTexts), and what reads the
/// file (planning, a full view) gets the spec as submitted. Thread-safe.
void AttachScheduleFileText(const std::shared_ptr<const std::string>& text,
                            zbpp::v1::JobSpec& spec);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_SCHEDULE_FILE_H_
