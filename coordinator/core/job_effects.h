#ifndef ZBPP_COORDINATOR_CORE_JOB_EFFECTS_H_
#define ZBPP_COORDINATOR_CORE_JOB_EFFECTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "coordinator/core/coordinator_observer.h"
#include "coordinator/core/job_model.h"
#include "coordinator/core/job_watchers.h"
#include "coordinator/core/outbox.h"
#include "coordinator/core/rendezvous_store.h"
#include "coordinator/core/store_writer.h"
#include "coordinator/core/worker_registry.h"
#include "coordinator/store/store.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator {

// What a job decided must happen, as data (docs/architecture.md, "Decide,
// then act"). A Job (job.h) changes only itself and collects these; the
// Coordinator takes them (Job::TakeEffects) and applies them in one place
// (ApplyJobEffects), as etcd's raft hands its caller a Ready of entries to
// persist and messages to send. Nothing here points into a job: every
// record is a copy, every message an immutable shared one, the solve
// request owns its inputs.

/// A step summary of a job (Store::PutStepSummary).
struct StepSummaryWrite {
  std::string job_id;
  zbpp::v1::StepSummary summary;
};
/// A validation outcome of a job (Store::PutValidationOutcome).
struct ValidationOutcomeWrite {
  std::string job_id;
  zbpp::v1::ValidationOutcome outcome;
};
/// The measured costs a re-solve decided on at `step` (Store::PutCostSnapshot).
struct CostSnapshotWrite {
  std::string job_id;
  int64_t step = 0;
  zbpp::v1::CostModel costs;
};

/// One record to store: the job's record (Store::UpdateJob), a schedule
/// version (AddScheduleVersion), a step summary, a validation outcome, a
/// checkpoint record (PutCheckpoint), a cost snapshot or a re-solve record
/// (AddResolveRecord). A replayed step's records replace its first run's
/// (store.h, "Replayed steps"), so none is refused as a duplicate.
using StoreWrite =
    std::variant<zbpp::v1::Job, zbpp::v1::ScheduleVersion, StepSummaryWrite,
                 ValidationOutcomeWrite, CheckpointRecord, CostSnapshotWrite, ResolveRecord>;

/// What a write stores, as the store writer's error lines name it:
/// "storing job job-1", "storing schedule version 2 of job job-1", "storing
/// the summary of step 3 of job job-1", "storing the validation outcome of
/// step 3 of job job-1", "storing the checkpoint record of step 3 of job
/// job-1", "storing the cost snapshot of step 3 of job job-1", "storing a
/// re-solve of job job-1 at step 3". Pure.
std::string DescribeWrite(const StoreWrite& write);

/// A message for one worker's Session stream.
struct WorkerMessage {
  std::string worker_id;
  SessionMessage message;  ///< Shared by every worker it goes to.
};

/// An event for the job's watchers (job.proto JobEvent; numbered and
/// stamped when applied). An event decided while nobody watched carries no
/// payload: it is numbered and built for no one (a schedule change may be
/// MiBs).
struct WatchEvent {
  zbpp::v1::JobEvent event;
  bool droppable = false;  ///< Dropped for a watch that lags (step events).
};

/// What the metrics are told (CoordinatorObserver, one call each).
struct StepObserved {          ///< OnStep.
  zbpp::v1::StepSummary step;
};
struct VersionObserved {       ///< OnScheduleVersion.
  int64_t version = 0;
};
struct ResolveObserved {       ///< OnResolve.
  bool published = false;
};
struct ValidationObserved {    ///< OnValidation.
  bool rolled_back = false;
  bool skipped = false;
};
struct TransportObserved {     ///< OnTransport.
  zbpp::v1::Transport transport = zbpp::v1::TRANSPORT_AUTO;
};
struct LayoutObserved {        ///< OnLayout.
  std::vector<int> layout;
};
struct ReplicasObserved {     ///< OnReplicas.
  int active = 0;
  int spares = 0;
};
struct FinishedObserved {};    ///< OnJobFinished.
using Observation = std::variant<StepObserved, VersionObserved, ResolveObserved,
                                 ValidationObserved, TransportObserved, LayoutObserved,
                                 ReplicasObserved, FinishedObserved>;

/// Everything one or more transitions of job `job_id` decided, each list in
/// decision order. ApplyJobEffects applies them in this order: store writes;
/// messages to workers; the ended attempt's workers released and its
/// rendezvous scopes deleted; the solve request; events for watchers (then
/// the watches closed, for a terminal job); metrics.
///
/// Why that order: the store always holds a prefix of the decided history
/// before anyone hears of it (a version is queued for the store before the
/// message that carries it, coordinator.h "Persistence"); an Abort reaches
/// the workers before they are free for another job; the solve request
/// carries copies, so it needs nothing after it.
///
/// Move-only (the solve request is owned).
struct JobEffects {
  std::string job_id;
  std::vector<StoreWrite> writes;
  std::vector<WorkerMessage> messages;
  /// The job's attempt ended: its workers are released in the registry
  /// (WorkerRegistry::Release).
  bool release_workers = false;
  /// Rendezvous scopes of ended attempts, to delete.
  std::vector<std::string> deleted_scopes;
  /// A re-solve or calibration to solve outside the coordinator's mutex
  /// (resolver.h); its result comes back through Job::FinishResolve. Null
  /// when none is due.
  std::unique_ptr<ResolveTask> resolve;
  std::vector<WatchEvent> events;
  /// The job reached a terminal state: its watches are closed OK after the
  /// events.
  bool close_watchers = false;
  std::vector<Observation> observations;

  /// Nothing was decided.
  bool empty() const;
};

/// Where effects land (not owned; each must outlive the calls).
struct EffectSinks {
  Clock* clock = nullptr;                   ///< Stamps watch events.
  StoreWriter* writer = nullptr;
  WorkerRegistry* workers = nullptr;        ///< Session outboxes and leases.
  RendezvousStore* rendezvous = nullptr;
  CoordinatorObserver* observer = nullptr;  ///< Null: none.
  /// Takes a solve request: queues it for the Resolver, which solves it
  /// outside the lock (Resolver::Submit). Must not block or call the job.
  std::function<void(std::unique_ptr<ResolveTask>)> solve;
};

/// Applies `effects` in JobEffects' order to `sinks` and to the job's
/// `watchers`. The caller holds the lock that guards the job (the
/// Coordinator's mutex), so nothing else sees the job between its decision
/// and this.
void ApplyJobEffects(JobEffects effects, JobWatchers& watchers, const EffectSinks& sinks);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_EFFECTS_H_
