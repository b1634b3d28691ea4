#ifndef ZBPP_COORDINATOR_CORE_JOB_MODEL_H_
#define ZBPP_COORDINATOR_CORE_JOB_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core/cost_model.h"
#include "coordinator/core/job_attempt.h"
#include "coordinator/core/job_context.h"
#include "coordinator/core/planning.h"
#include "coordinator/core/profile_check.h"
#include "coordinator/core/resolve_policy.h"
#include "coordinator/core/schedule_versions.h"
#include "coordinator/core/step_summary.h"
#include "coordinator/core/validation_policy.h"
#include "coordinator/store/store.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::coordinator {

/// A re-solve decided under the coordinator's mutex (JobModel::MaybeResolve)
/// and run outside it (resolver.h): copies of what it needs, then its
/// outcome.
struct ResolveTask {
  // --- Inputs (copied under the mutex) ---
  std::string job_id;
  int64_t attempt = 0;
  int64_t current_version = 0;  ///< The job's latest version at the copy.
  std::string policy_name;      ///< Registry name.
  /// The job's, shared: the task keeps it alive when the job is erased
  /// (retention) while the task waits for the resolver thread. Immutable,
  /// so usable without the mutex.
  std::shared_ptr<const ResolvePolicy> policy;
  sched::Schedule current;
  sched::Problem measured;
  double cost_drift = 0;  ///< CostModel::Drift() when `measured` was taken.
  sched::Problem base;
  /// A calibration (JobModel::Calibrate) rather than a re-solve: a
  /// version is always built (reason CALIBRATION), from the candidate or
  /// the current order, whichever fits the memory limit and is shorter.
  /// `policy_name` is empty when the job's order is kept (re-solve
  /// disabled).
  bool calibration = false;
  /// The spec's limit field ("schedule.memory_limit_bytes" or
  /// "schedule.memory_limit_m_b"); empty without one. A calibration that
  /// fits no schedule within a limit the user set fails the job.
  std::string memory_limit_field;
  /// Set by a calibration that fits nothing within `memory_limit_field`'s
  /// limit: why the job cannot run (the job then fails).
  std::string failure;
  /// A first calibration that may still change the job's layout
  /// (LayoutOpenAtCalibration, every worker's layout parts profiled): what
  /// ChooseProfiledLayout needs. SolveCalibration then chooses the layout
  /// before the version.
  struct LayoutInput {
    zbpp::v1::JobSpec spec;     ///< The job's stored spec.
    std::string schedule_name;  ///< The registry schedule its versions run.
    std::vector<StagePartCosts> stages;  ///< By stage, replicas combined.
  };
  std::optional<LayoutInput> layout_input;
  /// A re-solve of a job whose first calibration profiled its layout parts:
  /// what the layout drift report (BetterMeasuredLayout, planning.h)
  /// needs; the measured costs are `measured`.
  std::optional<LayoutInput> drift_input;
  // --- Outcome (computed outside the mutex) ---
  /// With layout_input: the layout chosen (ChooseProfiledLayout). When it
  /// `changed`, no version is built: the job starts a new attempt on it
  /// (Job::FinishCalibration), whose own calibration builds the version.
  std::optional<ProfiledLayout> layout;
  /// With drift_input: the better layout and why (Job.better_layout and
  /// better_layout_reason); unset when the running one stays best.
  std::optional<std::pair<std::vector<int>, std::string>> better_layout;
  ResolveRecord record;
  std::optional<zbpp::v1::ScheduleVersion> candidate;  ///< To publish.
  std::optional<sched::Schedule> candidate_schedule;
};

/// What a job's schedules are solved from (docs/architecture.md, Flow 2):
/// the base problem (its plan's, planning.h: PlannedProblem of the spec
/// and the schedule chosen), the measured CostModel over it,
/// the ResolvePolicy and the ValidationPolicy. Built before the job's first
/// attempt and kept for its life.
///
/// Thread-compatible (its Job is used under the coordinator's mutex); the
/// policy handed to a ResolveTask is used outside it.
class JobModel {
 public:
  /// The plan SubmitJob made for the job (PlanJob): its choice is
  /// version 1, so that Prepare does not plan again. Call before the first
  /// Prepare; a job without one (recovered before it had a version) is
  /// planned by Prepare.
  void AdoptPlan(JobPlan plan) { planned_ = std::move(plan.choice); }

  /// Builds what is missing for the job `proto` whose versions are
  /// `versions`; the first time, with no version yet, returns version 1's
  /// schedule with its simulation (the adopted plan's choice, else
  /// PlanJob's: the spec's generator, its schedule file, or auto's pick),
  /// else nullopt. A restored job's base problem is PlannedProblem of the
  /// schedule its latest version names.
  /// FailedPrecondition saying why the job cannot run ("cost model: ...",
  /// "resolve policy: ...", "schedule <name>: ...").
  absl::StatusOr<std::optional<ScheduleChoice>> Prepare(
      const zbpp::v1::Job& proto, const ScheduleVersions& versions,
      const JobContext& context);

  /// After Prepare: the base problem, and the validation mode policy.
  const sched::Problem& base() const { return *base_; }
  ValidationPolicy& validation() { return *validation_; }

  /// Adds a sample to the measured costs (errors are logged).
  void AddHop(const HopTiming& hop);

  /// Calibration of attempt `attempt` starting at `start_step`
  /// (job_spec.proto SchedulePolicy.calibrate): every worker's profile, by
  /// worker index, checked (MeasureProfile). Adds each virtual stage's
  /// F/B/W to the measured costs as a sample and sets its measured M_B and
  /// M_W, the replicas combined (the slowest pass, CombineReplicaTiming;
  /// the largest memory), and the hops; returns the task that plans the
  /// calibrated version outside the mutex (resolver.h SolveResolve) from
  /// the latest version of `versions` (null, logged, when the measured
  /// problem cannot be built).
  std::unique_ptr<ResolveTask> Calibrate(const zbpp::v1::Job& proto,
                                         const ScheduleVersions& versions, int64_t attempt,
                                         int64_t start_step,
                                         const std::map<int, MeasuredProfile>& profiles);
  /// A complete step of `spec`: adds its per-virtual-stage timings, the
  /// replicas combined (CombineReplicaTiming), to the measured costs and
  /// returns what its summary is computed from (SummarizeStep), the
  /// version it ran (of `versions`) predicted under the measured costs (the
  /// analytic ones until every stage has a sample). `replicas` and
  /// `microbatches` are the attempt's d' and m' (docs/elastic.md; 0: the
  /// spec's). Takes the reports.
  StepReports AddStep(const zbpp::v1::JobSpec& spec, PendingStep& pending,
                      const ScheduleVersions& versions, int replicas = 0,
                      int microbatches = 0);

  /// The re-solve due after `step` of attempt `attempt` of job `spec`: the
  /// spec's resolve window ends under the latest version, no other runs,
  /// and every stage has a sample; null otherwise. Marks one running.
  std::unique_ptr<ResolveTask> MaybeResolve(const zbpp::v1::Job& proto,
                                            const ScheduleVersions& versions,
                                            int64_t attempt, int64_t step);
  /// The running re-solve ended.
  void EndResolve() { resolving_ = false; }
  /// The job's layout changed (Job::FinishCalibration): the base problem
  /// and the measured costs, which were the old layout's, are dropped; the
  /// next Prepare builds them again from the job's spec and its versions'
  /// schedule (PlannedProblem).
  void ForgetLayout() {
    base_.reset();
    costs_.reset();
  }

 private:
  /// The layout input of a calibration of `spec` running `schedule_name`
  /// (ResolveTask::LayoutInput) from every worker's profile (by worker
  /// index), whose parts hold `part_blocks` blocks each (LayoutPartBlocks);
  /// nullopt when some worker sent no layout parts.
  static std::optional<ResolveTask::LayoutInput> LayoutInputOf(
      const zbpp::v1::JobSpec& spec, const std::string& schedule_name,
      const std::map<int, MeasuredProfile>& profiles, int part_blocks);
  /// Sets `base_`; returns version 1's choice when `versions` is empty.
  absl::StatusOr<std::optional<ScheduleChoice>> PrepareProblem(
      const zbpp::v1::JobSpec& spec, const ScheduleVersions& versions);
  absl::Status PreparePolicies(const zbpp::v1::Job& proto, const JobContext& context);
  /// The measured problem for `schedule` (CostModel::ToProblem over the
  /// base problem) with a limit relative to M_B (memory_limit_m_b, or the
  /// schedule's own) re-expressed in the measured M_B of each stage's
  /// virtual stages under `schedule`; a limit in bytes stays.
  /// FailedPrecondition while some virtual stage has no sample.
  absl::StatusOr<sched::Problem> MeasuredProblem(const sched::Schedule& schedule) const;
  /// A task on the latest of `versions`, with the measured problem.
  std::unique_ptr<ResolveTask> NewTask(const zbpp::v1::Job& proto,
                                       const ScheduleVersions& versions, int64_t attempt,
                                       int64_t step, sched::Problem measured);

  /// AdoptPlan's choice until Prepare publishes it.
  std::optional<ScheduleChoice> planned_;
  std::optional<sched::Problem> base_;
  std::unique_ptr<CostModel> costs_;
  /// Created once and never replaced; immutable and shared with each
  /// ResolveTask, so a re-solve uses it without the mutex and after the
  /// job is gone.
  std::shared_ptr<const ResolvePolicy> policy_;
  /// The validation mode new versions get (JobSpec.validation AUTO: it
  /// switches on the gathered outcomes).
  std::unique_ptr<ValidationPolicy> validation_;
  bool resolving_ = false;  ///< A re-solve runs outside the mutex.
  /// The first calibration's layout parts by stage (LayoutInputOf), kept
  /// for the layout drift report of the re-solves; empty without them.
  std::vector<StagePartCosts> parts_;
  /// The spec's memory limit is relative to M_B (not memory_limit_bytes).
  bool relative_limit_ = true;
};

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_MODEL_H_
