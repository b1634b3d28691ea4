#ifndef ZBPP_CLIENT_ZBPPCTL_REPORT_H_
#define ZBPP_CLIENT_ZBPPCTL_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/zbppctl_breakdown.h"
#include "client/zbppctl_memory.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::ctl {

/// A schedule version that ran a step, as the report shows it.
struct VersionRan {
  int64_t step = 0;             ///< The step it ran (the first or the last listed).
  std::string label;            ///< VersionLabel: "v3 (CALIBRATION, from step 0)".
  int64_t version = 0;          ///< ScheduleVersion.version.
  std::string reason;           ///< Its reason's short name: "CALIBRATION", ...
  int64_t effective_step = 0;   ///< ScheduleVersion.effective_step.
  /// The version's own prediction (ScheduleVersion.predicted: the simulator
  /// under the cost model it was planned with, measured costs for a
  /// CALIBRATION or RESOLVE version), seconds and a ratio in [0, 1].
  double predicted_step_seconds = 0;
  double predicted_makespan_seconds = 0;
  double predicted_bubble_rate = 0;
};

/// What a finished (or running) training job achieved, from its Job and its
/// step summaries (`zbppctl report`).
struct TrainingReport {
  std::string job_id;
  std::string state;       ///< e.g. "SUCCEEDED".
  std::string schedule;    ///< JobSpec schedule name, e.g. "zb-h1".
  int stages = 0;          ///< p: pipeline stages.
  int replicas = 1;        ///< d: data-parallel replicas of the pipeline.
  int microbatches = 0;    ///< m.
  int64_t steps = 0;       ///< Steps completed.
  /// Training loss (nats per token) of the first and last listed steps.
  double loss_start = 0;
  double loss_end = 0;
  /// Held-out loss at the first and last evaluations; unset without any.
  std::optional<double> eval_loss_start;
  std::optional<double> eval_loss;
  /// Steps averaged below: all but the first tenth (warm-up), at least one.
  int64_t window_steps = 0;
  /// Trained tokens per wall-clock second over the window: step completion
  /// times, so it includes the optimizer, validation and reporting.
  double tokens_per_second = 0;
  /// Median of StepSummary.step_seconds over the window, seconds.
  double step_seconds = 0;
  /// Per stage, means over the window of the measured bubble rate and
  /// of the simulator's prediction from the measured pass costs; in [0, 1].
  std::vector<double> bubble_rate_measured;
  std::vector<double> bubble_rate_predicted;
  /// Data parallelism, per stage, means over the window, seconds:
  /// the duration of one REDUCE_GRAD (StageStepStats.reduce_seconds) and
  /// how long the stage's last one ended after its last pass
  /// (exposed_reduce_seconds). All 0 with d = 1.
  std::vector<double> reduce_seconds;
  std::vector<double> exposed_reduce_seconds;
  /// Where each stage's time went in the window's steps and between them,
  /// and what makes the measured bubble exceed the predicted one
  /// (zbppctl_breakdown.h).
  ReportBreakdown breakdown;
  /// Each stage's peak activation memory over the window, measured and
  /// predicted, and the stage most over its prediction (zbppctl_memory.h).
  ActivationMemory activation_memory;
  /// Times the job went RECOVERING (a worker lost, the coordinator
  /// restarted): Job.recoveries_total.
  int64_t recoveries = 0;
  /// Of them, those that restarted from the last checkpoint (or step 0),
  /// running steps again (Job.restarts_total; the others resumed from the
  /// surviving workers' memory, docs/elastic.md).
  int64_t restarts = 0;
  /// Steps completed on fewer replicas than d after a lost worker
  /// (Job.degraded_steps), and the replicas running steps at the end
  /// (Job.replicas_active: d healthy, fewer while DEGRADED, 0 when none
  /// runs).
  int64_t degraded_steps = 0;
  int replicas_active = 0;

  /// Validation (paper §4). The mode in force at the end ("POST" or
  /// "SYNCHRONOUS": Job.validation_mode; empty before the first schedule
  /// version) and the spec's policy ("AUTO" when left unset).
  std::string validation_mode;
  std::string validation_policy;
  /// The job's precision: "FP32", "BF16" or "FP16" (PrecisionName).
  std::string precision;
  /// The transport of the job's last attempt, "GLOO" or "NCCL" ("AUTO"
  /// before any), and why (Job.transport, transport_reason).
  std::string transport;
  std::string transport_reason;
  /// The blocks of each virtual stage, and how they were chosen
  /// (Job.layout, layout_reason).
  std::vector<int> layout;
  std::string layout_reason;
  /// The layout drift report (Job.better_layout, better_layout_reason):
  /// empty while the running layout is still the best.
  std::vector<int> better_layout;
  std::string better_layout_reason;

  /// The job's worker daemons, one per (stage, replica): p * d.
  int workers() const { return stages * replicas; }
  /// Optimistic steps rolled back, steps skipped for inf/nan and steps redone
  /// (or taken) clipped: Job.rollbacks_total, skipped_steps_total,
  /// clipped_steps_total.
  int64_t rollbacks = 0;
  int64_t skipped_steps = 0;
  int64_t clipped_steps = 0;
  /// Schedule versions the job's steps ran: distinct
  /// StepSummary.schedule_version over `steps`. Versions are numbered 1.. per
  /// job and the numbering goes on across recoveries and coordinator
  /// restarts, so Job.schedule_version (the newest number) counts every
  /// version published; this counts only those in force for a completed
  /// step. A version published but never reached (the job ended or
  /// recovered to an earlier step first) does not count, and a step redone
  /// after a recovery keeps the summary (and version) of its first run.
  int64_t schedule_versions = 0;
  /// The version the last listed step ran (its StepSummary.schedule_version),
  /// which later versions may have followed: what `zbppctl schedule JOB`
  /// draws.
  int64_t last_step_schedule_version = 0;
  /// The versions that ran the first and the last listed step, when
  /// BuildReport was given them; unset otherwise.
  std::optional<VersionRan> first_step_version;
  std::optional<VersionRan> last_step_version;
  /// Median StepSummary.step_seconds of the window's steps that ran
  /// last_step_version (the last step among them), to compare with its
  /// predicted_step_seconds, and how many those steps are.
  double last_version_step_seconds = 0;
  int64_t last_version_window_steps = 0;
  /// Median StepSummary.predicted_step_seconds of the same steps: the
  /// version's step simulated under the costs measured as they ran (0 when
  /// the coordinator predates the field).
  double last_version_measured_prediction_seconds = 0;
  /// Completed steps (from the first the job ran: 0, or its resume step + 1,
  /// up to Job.steps_completed) whose summary the coordinator's store does
  /// not hold. The store keeps every one in order (docs/control-plane.md, "The control
  /// plane"), so anything but 0 means history was lost — e.g. written by a
  /// coordinator that dropped failed writes — and the figures above cover
  /// only the stored steps. `history_complete` is missing_steps == 0.
  int64_t missing_steps = 0;
  bool history_complete = true;
  /// Sum of every parameter of every stage after the last step
  /// (Job.param_checksum), to compare two runs; unset until the last step.
  std::optional<double> param_checksum;
  /// The job's state changes, oldest first (Job.transitions: the newest
  /// 100), e.g. RUNNING -> RECOVERING -> DEGRADED -> RUNNING for a lost
  /// worker and its replacement (docs/elastic.md).
  std::vector<v1::JobTransition> transitions;
};

/// Builds the report. FailedPrecondition when the job has no completed step
/// yet. `steps` ascending (CoordinatorClient::ListSteps). `read_back`: the
/// job's schedule versions read back by number (GetScheduleVersion), any
/// order; the ones the first and the last step ran (their
/// StepSummary.schedule_version) fill first_step_version and
/// last_step_version, which stay unset when absent.
absl::StatusOr<TrainingReport> BuildReport(const v1::Job& job,
                                           const std::vector<v1::StepSummary>& steps,
                                           const std::vector<v1::ScheduleVersion>& read_back = {});

/// Human-readable form: a summary (after the title, a "history:" line saying
/// how many steps are missing when the stored history is incomplete; a
/// compact validation line: mode,
/// rollbacks, skipped and clipped steps, recoveries, schedule versions and
/// the one the last step ran; "first step:" and "last step:" lines naming
/// the version each ran with its prediction, the last one against the
/// measured step; with d > 1 a replicas line), a per-stage bubble table (with d > 1, also
/// each stage's reduction and exposed reduction seconds), the activation
/// memory's table and line (ActivationMemoryText) when the steps carry a
/// peak, then the breakdown's tables and lines (BreakdownText) when they
/// carry one, and last a "state changes:" list, one TransitionLine each,
/// when the job has any.
std::string ReportTable(const TrainingReport& report);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_REPORT_H_
