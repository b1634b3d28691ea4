#ifndef ZBPP_COORDINATOR_STORE_STORE_H_
#define ZBPP_COORDINATOR_STORE_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator {

/// One re-solve of the adaptive policy, published or not, with the predicted
/// old and new makespan.
struct ResolveRecord {
  std::string job_id;
  int64_t step = 0;                        ///< Step at which it was decided.
  bool published = false;                  ///< A new version came out of it.
  int64_t version = 0;                     ///< The version published, or 0.
  double old_makespan_seconds = 0;         ///< Current schedule, measured costs.
  double new_makespan_seconds = 0;         ///< Candidate, same costs.
  double solve_seconds = 0;                ///< Wall time of the solver.
  std::string reason;                      ///< One line, for humans.
};

/// A checkpoint of one job at one step: complete once every stage
/// (of replica 0, with data parallelism) has written its shard.
struct CheckpointRecord {
  std::string job_id;
  int64_t step = 0;
  std::string directory;
  std::vector<int32_t> stages_written;  ///< Stages done, ascending.
  bool complete = false;                ///< All `pipeline.stages` written.
  /// pipeline.data_parallel of the job that wrote it (>= 1): the optimizer
  /// state in it is that of a global batch of d replicas' microbatches.
  int32_t data_parallel = 1;
};

/// Everything the coordinator persists, read back in full after a restart
/// (it restores state, then serves: docs/control-plane.md, "The control plane").
struct StoredState {
  /// Ordered by creation. A job's schedule file is not in its spec
  /// (schedule.file_text empty) but in `schedule_files`, under the hash
  /// `schedule_file_of_job` names.
  std::vector<zbpp::v1::Job> jobs;
  /// The text of every schedule file a job carries, once per content, by
  /// SHA-256 (64 lowercase hex digits, common/sha256.h Sha256Hex).
  std::map<std::string, std::string> schedule_files;
  /// By job id, the SHA-256 of the job's schedule file; jobs without one
  /// are not in it.
  std::map<std::string, std::string> schedule_file_of_job;
  /// Every published version of every job, by (job, version).
  std::vector<zbpp::v1::ScheduleVersion> schedule_versions;
  std::vector<CheckpointRecord> checkpoints;  ///< By (job, step).
};

/// Durable state of the coordinator. Each call is one transaction: it
/// happens entirely or not at all, and a failed call leaves what was stored
/// unchanged. Implementations are thread-safe.
///
/// Replayed steps. A recovery (a lost worker, a restarted coordinator)
/// resumes a job at its last checkpoint's next step, or at step 0 without
/// one, so the new attempt runs again steps whose records are stored. The
/// stored history is the one of the run the job's parameters now come
/// from: what a step's last run measured and decided, one record per key,
/// none lost that no later run redid. Per record:
///   * step summary, validation outcome, cost snapshot — keyed by (job,
///     step): the Put call replaces the stored one (the step ran again; its
///     times, its outcome, possibly in another validation mode, and the
///     costs a re-solve at it decided on are the new run's). A step the
///     new attempt did not reach keeps the earlier run's. The job's
///     validation counters count the stored outcomes (Job::RecordValidation).
///   * checkpoint record — keyed by (job, step): replaced likewise (a
///     replay that writes it again rewrote its files).
///   * re-solve record — a log, in the order decided: a replayed step's
///     re-solve is a decision of its own (another attempt's costs, maybe a
///     version of its own) and is added; the first run's stays, as its
///     version does.
///   * schedule version — numbered by the job across attempts, never
///     repeated: a recovery's versions are new ones.
/// So no replay meets AlreadyExists; it is left to real conflicts.
///
/// Errors: AlreadyExists (a job id or (job, version) stored twice),
/// NotFound (unknown job), InvalidArgument (a record that cannot be
/// stored, naming the field), Internal / Unavailable for storage failures
/// (with the SQLite message).
class Store {
 public:
  virtual ~Store() = default;

  /// Stores a new job (AlreadyExists when `job.id()` is taken).
  ///
  /// Schedule files (CreateJob and UpdateJob): a spec's
  /// schedule.file_text is stored once per content, under its SHA-256,
  /// however many jobs carry it, and the job's record without it. A file
  /// no job carries any more goes with the last DeleteJob that carried it.
  virtual absl::Status CreateJob(const zbpp::v1::Job& job) = 0;
  /// Replaces a stored job (NotFound when absent). A spec without
  /// schedule.file_text keeps the job's stored schedule file (the
  /// coordinator holds the text apart from the record it updates); one with
  /// it is stored as CreateJob does.
  virtual absl::Status UpdateJob(const zbpp::v1::Job& job) = 0;
  /// The job `job_id` (NotFound when absent), its schedule file's text in
  /// spec.schedule.file_text as it was given.
  virtual absl::StatusOr<zbpp::v1::Job> GetJob(const std::string& job_id) = 0;

  /// Appends a published schedule version; (job, version) must be new.
  virtual absl::Status AddScheduleVersion(
      const zbpp::v1::ScheduleVersion& version) = 0;
  /// Inserts or replaces the cost-model snapshot of `job_id` at `step`
  /// (the costs a re-solve at that step decided on; a replayed step's
  /// replaces its first run's: the class comment).
  virtual absl::Status PutCostSnapshot(const std::string& job_id, int64_t step,
                                       const zbpp::v1::CostModel& costs) = 0;
  /// Inserts or replaces the summary of step `step.step()` of `job_id` (a
  /// replayed step's replaces its first run's: the class comment).
  virtual absl::Status PutStepSummary(const std::string& job_id,
                                      const zbpp::v1::StepSummary& step) = 0;
  /// Step summaries of `job_id` with step >= `from_step`, ascending, at most
  /// `limit` of them.
  virtual absl::StatusOr<std::vector<zbpp::v1::StepSummary>> ListStepSummaries(
      const std::string& job_id, int64_t from_step, int limit) = 0;
  /// Inserts or replaces the validation outcome of step `outcome.step()`
  /// (a replayed step's replaces its first run's: the class comment).
  virtual absl::Status PutValidationOutcome(
      const std::string& job_id, const zbpp::v1::ValidationOutcome& outcome) = 0;
  /// Validation outcomes of `job_id`, ascending by step.
  virtual absl::StatusOr<std::vector<zbpp::v1::ValidationOutcome>>
  ListValidationOutcomes(const std::string& job_id) = 0;
  /// Inserts or replaces the checkpoint record (job, step).
  virtual absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) = 0;
  /// Complete checkpoint records of any job at `step` in `directory` (the
  /// same path up to trailing slashes), by job id: what a job resuming from
  /// that directory and step would restore.
  virtual absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpointsAt(
      const std::string& directory, int64_t step) = 0;
  /// Logs one re-solve decision (appended, never replacing one: the class
  /// comment).
  virtual absl::Status AddResolveRecord(const ResolveRecord& record) = 0;
  /// Re-solve decisions of `job_id`, in the order they were logged.
  virtual absl::StatusOr<std::vector<ResolveRecord>> ListResolveRecords(
      const std::string& job_id) = 0;
  /// Cost-model snapshots of `job_id` as (step, costs), ascending by step.
  virtual absl::StatusOr<std::vector<std::pair<int64_t, zbpp::v1::CostModel>>>
  ListCostSnapshots(const std::string& job_id) = 0;

  /// Deletes job `job_id` and every record of it (schedule versions, cost
  /// snapshots, step summaries, validation outcomes, checkpoint records,
  /// re-solve records): the coordinator's retention of finished jobs. A
  /// checkpoint's files are not touched, but a job can no longer resume
  /// from it (its record is gone). NotFound when absent.
  virtual absl::Status DeleteJob(const std::string& job_id) = 0;

  /// Everything needed to resume serving after a restart.
  virtual absl::StatusOr<StoredState> LoadAll() = 0;

  /// OK while the storage is usable as far as a cheap check without a
  /// transaction tells (SqliteStore: its files are still the ones it
  /// opened); the storage failure otherwise. The Coordinator queues one
  /// behind its writes at each Tick when none is waiting, so a lost
  /// database is reported while nothing else is written.
  virtual absl::Status Probe() = 0;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_STORE_STORE_H_
