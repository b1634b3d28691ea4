#ifndef ZBPP_COORDINATOR_CORE_JOB_TABLE_H_
#define ZBPP_COORDINATOR_CORE_JOB_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/core/job.h"
#include "coordinator/core/schedule_file.h"
#include "coordinator/store/store.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

/// Every job the coordinator holds, by creation number ("job-<n>", n from
/// 1); only finished jobs past the retention are erased (EraseFinishedBeyond),
/// and never the newest job, so a number is never given twice, restarts
/// included. Iteration (ForEach) is oldest first, the order in which waiting
/// jobs get workers.
///
/// Thread-compatible: the Coordinator uses it under its mutex.
class JobTable {
 public:
  /// `context` is handed to every Job; it must outlive the table.
  explicit JobTable(const JobContext& context) : context_(context) {}

  /// The job with id `job_id`; null for an unknown one.
  Job* Find(const std::string& job_id) const;

  /// A new job of `spec` as SubmitJob stores it: the next id ("job-<n>"),
  /// PENDING, created at `now`, every "{job_id}" of checkpoint.directory
  /// replaced by that id (checkpoint_directory.h); a resumed spec's
  /// checkpoint counts as the last one (its steps as completed). Not added.
  zbpp::v1::Job NewJob(const zbpp::v1::JobSpec& spec, absl::Time now) const;
  /// OK unless a job that has not finished uses the checkpoint directory
  /// `spec` uses (UsesCheckpointDirectory) and one of the two writes
  /// checkpoints there: then InvalidArgument naming checkpoint.directory,
  /// the directory and the other job (its checkpoint steps would clash, and
  /// the second job fail at its first checkpoint). `spec` as NewJob made it
  /// (placeholder expanded). O(jobs).
  absl::Status CheckCheckpointDirectoryFree(const zbpp::v1::JobSpec& spec) const;
  /// Adds `proto` (made by NewJob) as a new job; its schedule file's text
  /// moves out of the spec into the texts held once per content
  /// (ScheduleFileTexts): the job's proto() no longer carries it, its full
  /// view does.
  Job& Add(zbpp::v1::Job proto);
  /// Loads every job and schedule version from `store` (a job keeps the
  /// number of its id "job-<n>" when n is free; its schedule file from
  /// StoredState.schedule_files, held once per content), restores each job
  /// (Job::Restore, with its stored validation outcomes; a job whose state
  /// changed decides its store write, as every transition does, for the
  /// caller to apply: Job::TakeEffects). Errors of the store,
  /// ScheduleFromProto and Job::Restore; Internal naming the job for a
  /// schedule file the store does not hold.
  absl::Status Recover(Store& store);

  /// Calls `visit` on every job, oldest first, until it returns false.
  void ForEach(const std::function<bool(Job&)>& visit) const;

  /// Coordinator::ListJobs: newest first, paged by creation number.
  /// InvalidArgument for a malformed page token.
  absl::StatusOr<zbpp::v1::ListJobsResponse> List(
      const zbpp::v1::ListJobsRequest& request) const;

  /// Jobs per state name ("PENDING", ...), every state present. O(jobs).
  std::map<std::string, int> Counts() const;

  /// Jobs not in a terminal state. O(jobs).
  int ActiveCount() const;
  /// Erases finished (terminal) jobs until `keep` are left (`keep` >= 1)
  /// and returns their ids: first those that never completed a step
  /// (Job.first_step unset), oldest first, then the others, oldest first,
  /// so jobs that never ran cannot push out those that did. A job that is
  /// not terminal, and the newest job (its number must survive a restart),
  /// are never erased. O(jobs).
  std::vector<std::string> EraseFinishedBeyond(int keep);

 private:
  Job& Insert(int64_t seq, zbpp::v1::Job proto, std::shared_ptr<const std::string> file);
  /// Recover()'s second half: restores each loaded job.
  absl::Status RestoreAll(Store& store);

  const JobContext& context_;
  std::map<int64_t, std::unique_ptr<Job>> jobs_;  ///< By creation number.
  std::map<std::string, int64_t> seq_of_job_;
  int64_t next_seq_ = 1;
  ScheduleFileTexts schedule_files_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_TABLE_H_
