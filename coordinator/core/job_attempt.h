#ifndef ZBPP_COORDINATOR_CORE_JOB_ATTEMPT_H_
#define ZBPP_COORDINATOR_CORE_JOB_ATTEMPT_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/pipeline_shape.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/schedule_versions.h"
#include "coordinator/core/step_summary.h"
#include "coordinator/core/worker_registry.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// The workers' reports of one step, until every (stage, replica) has
/// reported.
struct PendingStep {
  int64_t step = 0;
  int64_t version = 0;                 ///< The schedule version it ran.
  std::map<int, StageReport> reports;  ///< By worker index.
};

/// How an attempt runs each step's global batch of d·m microbatches
/// (docs/elastic.md): the spec's d replicas of m each, or, resuming from
/// what surviving workers hold in memory, d' replicas of m' = d·m / d'
/// each, replica i taking microbatches [i·m', (i+1)·m').
struct AttemptShape {
  /// d' in [1, d]; 0 means the spec's d.
  int replicas = 0;
  /// m' per replica (d'·m' = d·m); 0 means the spec's m.
  int microbatches = 0;
  /// Every worker starts from the stage state it holds in memory
  /// (Assignment.resume_from_memory), not from the checkpoint or the seed.
  bool from_memory = false;
  /// A heal (docs/elastic.md): the replicas [0, live_replicas) resume from
  /// memory; the others' workers take their stage's state from replica
  /// 0's, a copy every worker of the attempt joins (Assignment.
  /// receive_state on all, state_source_replica 0). 0: every replica is
  /// live.
  int live_replicas = 0;
};

/// A job's current attempt (job.h): its p × d' workers by worker index
/// (`WorkerIndex`, api/pipeline_shape.h), the steps granted to them, the step each completed, and the
/// step reports and validation results gathered until every worker has
/// sent its own. Attempts are numbered from 1; between two attempts it
/// holds no workers and keeps its number.
///
/// Thread-compatible (its Job is used under the coordinator's mutex).
class JobAttempt {
 public:
  /// `stages` p >= 1 and `replicas` d >= 1 of the job's spec.
  JobAttempt(int stages, int replicas) : stages_(stages), spec_replicas_(replicas) {}

  int stages() const { return stages_; }
  /// The spec's d (pipeline.data_parallel).
  int spec_replicas() const { return spec_replicas_; }
  /// This attempt's replicas d' (the spec's d unless it resumed degraded:
  /// AttemptShape); its workers are p × d'.
  int replicas() const { return shape_.replicas > 0 ? shape_.replicas : spec_replicas_; }
  /// How it runs the global batch, as Start got it.
  const AttemptShape& shape() const { return shape_; }
  /// The stage and replica of worker index `index`.
  int stage_of(int index) const { return StageOfWorker(index, stages_); }
  int replica_of(int index) const { return ReplicaOfWorker(index, stages_); }

  /// The attempt's number; 0 before the first.
  int64_t number() const { return number_; }
  /// True while it holds workers.
  bool active() const { return !workers_.empty(); }
  const std::vector<std::string>& workers() const { return workers_; }
  bool Holds(const std::string& worker_id) const;
  /// The first step it runs (after the job's last checkpoint).
  int64_t start_step() const { return start_step_; }
  void set_start_step(int64_t step) { start_step_ = step; }
  /// The highest step granted; start_step() - 1 before the first grant, -1
  /// without workers.
  int64_t granted() const { return granted_; }
  /// Calibration (job_spec.proto SchedulePolicy.calibrate) is pending: the
  /// workers were asked for a profile (Assignment.profile) and the
  /// calibrated version is not published yet. Nothing is granted meanwhile.
  bool calibrating() const { return calibrating_; }
  /// Every worker's profile is in and the calibration is being solved.
  bool calibration_solving() const { return calibration_solving_; }
  /// The calibrated version is published (or the attempt gave up on it):
  /// grants may begin.
  void EndCalibration() { calibrating_ = calibration_solving_ = false; }
  /// The highest step worker index `index` reported; start_step() - 1
  /// before its first report.
  int64_t last_reported(int index) const { return last_completed_[index]; }

  /// The rendezvous scope of this attempt of job `job_id`,
  /// "<job id>/attempt-<n>".
  std::string scope(const std::string& job_id) const;

  /// The Assignment (worker.proto) of worker index `index` of this attempt
  /// of `job`: stage, replica, virtual stages and the version in force at
  /// the start step (of `versions`), every peer with its description (from
  /// `registry`), the rendezvous scope, the checkpoint to restore, the
  /// transport (job.transport, resolved when the attempt began), and
  /// `profile` while calibrating(). An attempt that resumes from memory
  /// (AttemptShape.from_memory) sets resume_from_memory, replicas,
  /// microbatch_offset and microbatches (replica·m', m') and no `restore`;
  /// in a heal, a worker of a replica past live_replicas has no
  /// resume_from_memory, and every worker receive_state (the copy is a
  /// collective: replica 0's worker sends) with state_source_replica 0.
  SessionMessage AssignmentMessage(int index, const zbpp::v1::Job& job,
                                   const ScheduleVersions& versions,
                                   const WorkerRegistry& registry) const;
  /// The grant of steps through granted() to this attempt of `job_id`.
  SessionMessage GrantMessage(const std::string& job_id) const;

  /// Starts attempt number() + 1 on `workers` (p × d' of them, d' of
  /// `shape`, by worker index) from start_step(): nothing granted, reported
  /// or acknowledged; calibrating() when `calibrate`.
  void Start(std::vector<std::string> workers, bool calibrate = false,
             AttemptShape shape = {});
  /// Drops the workers and what they reported (the number stays).
  void End();
  /// The next attempt is numbered after `number` at least: the attempts of
  /// the coordinator's previous life (a restart's restored attempt).
  void NumberAfter(int64_t number) { number_ = std::max(number_, number); }

  /// Grants steps through min(slowest worker's last completed step +
  /// `lookahead`, `last_step`) when that is beyond granted(); true then.
  /// Nothing while calibrating().
  bool NextGrant(int64_t lookahead, int64_t last_step);
  /// Records that `worker_id` holds the attempt; true once every worker
  /// does.
  bool Acknowledge(const std::string& worker_id);

  /// OK when a report from worker index `index` names that worker's stage
  /// and replica and a granted step of this attempt; InvalidArgument naming
  /// the field (stage, replica, step) otherwise.
  absl::Status CheckReportPlace(const zbpp::v1::ReportStepRequest& report,
                                int index) const;
  /// Records worker `index`'s report of `step` (run under `version`),
  /// replacing an earlier one, and its last completed step. Returns the
  /// step, no longer pending, once every worker reported it.
  std::optional<PendingStep> AddReport(int index, int64_t step, int64_t version,
                                       StageReport report);
  /// Records worker `index`'s calibration profile (checked by the caller),
  /// replacing an earlier one; once every worker sent one, returns them all
  /// by worker index and calibration_solving() holds. Nothing (nullopt)
  /// when not calibrating() or already solving.
  std::optional<std::map<int, zbpp::v1::ReportProfileRequest>> AddProfile(
      int index, const zbpp::v1::ReportProfileRequest& profile);
  /// Worker indexes whose calibration profile has not come, ascending;
  /// empty when not calibrating() or every profile is in.
  std::vector<int> MissingProfiles() const;
  /// Records worker `index`'s validation result; returns the results of
  /// its step by worker index, no longer kept, once every worker sent one.
  std::optional<std::map<int, zbpp::v1::ValidationResult>> AddValidation(
      int index, const zbpp::v1::ValidationResult& result);

 private:
  const int stages_;
  const int spec_replicas_;
  AttemptShape shape_;
  int64_t number_ = 0;
  int64_t start_step_ = 0;
  std::vector<std::string> workers_;     ///< By worker index.
  std::set<std::string> acknowledged_;   ///< Workers that hold the attempt.
  std::vector<int64_t> last_completed_;  ///< By worker index.
  int64_t granted_ = -1;
  bool calibrating_ = false;
  bool calibration_solving_ = false;
  std::map<int, zbpp::v1::ReportProfileRequest> profiles_;  ///< By worker index.
  std::map<int64_t, PendingStep> pending_;  ///< By step.
  /// By step, then worker index.
  std::map<int64_t, std::map<int, zbpp::v1::ValidationResult>> validations_;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_ATTEMPT_H_
