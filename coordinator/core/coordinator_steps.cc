// Coordinator: step reports, validation outcomes and the step summaries
// built from them (coordinator_internal.h).

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "api/schedule_proto.h"
#include "api/schedule_version.h"
#include "api/time_proto.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/coordinator_internal.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

// The hop samples of `report.hop_latencies`: a latency between ranks a and
// b is a sample of every hop h whose stages h and h+1 sit on a and b (with
// two chunks, one link carries two hops; the link is the same both ways).
// InvalidArgument naming the entry for a negative or non-finite latency or a
// peer that no hop links to the reporting rank.
absl::StatusOr<std::vector<HopTiming>> HopTimingsOf(
    const zbpp::v1::ReportStepRequest& report,
    const sched::Schedule& schedule) {
  std::vector<HopTiming> hops;
  for (int i = 0; i < report.hop_latencies_size(); ++i) {
    const zbpp::v1::HopLatency& latency = report.hop_latencies(i);
    const double seconds = latency.one_way_seconds();
    if (!(seconds >= 0) || !std::isfinite(seconds)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hop_latencies[", i, "].one_way_seconds: ", seconds,
                       " is not a finite time >= 0"));
    }
    const size_t before = hops.size();
    const int from = report.stage();
    const int to = latency.to_stage();
    for (int h = 0; from != to && h + 1 < schedule.num_stages(); ++h) {
      const int a = schedule.worker_of_stage[h];
      const int b = schedule.worker_of_stage[h + 1];
      if ((a == from && b == to) || (a == to && b == from)) {
        hops.push_back({h, seconds});
      }
    }
    if (hops.size() == before) {
      return absl::InvalidArgumentError(
          absl::StrCat("hop_latencies[", i, "].to_stage: stage ", to,
                       " is not a pipeline neighbour of stage ", from));
    }
  }
  return hops;
}

// A time a worker measured: finite and >= 0 (seconds).
absl::Status CheckTime(double seconds, const std::string& field) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be a finite time >= 0, got ", seconds));
  }
  return absl::OkStatus();
}

// A cross-entropy in nats: >= 0, or NaN / +inf when training diverged (a
// fact to record, not a malformed report).
absl::Status CheckLoss(double loss, const std::string& field) {
  if (loss < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be >= 0, got ", loss));
  }
  return absl::OkStatus();
}

// The measurements of a report within their ranges (worker.proto), before
// anything reaches the cost model, the metrics or the store: a worker's
// bug or a forged report is refused naming the field. Times inside the
// step are bounded by the step (a small slack for rounding).
absl::Status CheckReportRanges(const zbpp::v1::ReportStepRequest& r) {
  if (absl::Status st = CheckTime(r.step_seconds(), "step_seconds"); !st.ok()) return st;
  const double limit = r.step_seconds() * (1 + 1e-9) + 1e-6;
  for (auto [value, field] : {std::pair{r.idle_seconds(), "idle_seconds"},
                              std::pair{r.comm_seconds(), "comm_seconds"}}) {
    if (absl::Status st = CheckTime(value, field); !st.ok()) return st;
    if (value > limit) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", value,
                                                     " is longer than step_seconds (",
                                                     r.step_seconds(), ")"));
    }
  }
  for (int i = 0; i < r.action_start_seconds_size(); ++i) {
    const std::string field = absl::StrCat("action_start_seconds[", i, "]");
    if (absl::Status st = CheckTime(r.action_start_seconds(i), field); !st.ok()) return st;
  }
  for (int i = 0; i < r.action_end_seconds_size(); ++i) {
    if (r.action_end_seconds(i) > limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("action_end_seconds[", i, "]: ", r.action_end_seconds(i),
                       " is after the step's end (step_seconds ", r.step_seconds(), ")"));
    }
  }
  if (r.has_loss()) {
    if (absl::Status st = CheckLoss(r.loss(), "loss"); !st.ok()) return st;
  }
  if (r.has_eval_loss()) {
    if (absl::Status st = CheckLoss(r.eval_loss(), "eval_loss"); !st.ok()) return st;
  }
  if (!(r.local_grad_norm_sq() >= 0) && !r.found_inf_nan()) {
    return absl::InvalidArgumentError(
        absl::StrCat("local_grad_norm_sq: must be >= 0 unless found_inf_nan, got ",
                     r.local_grad_norm_sq()));
  }
  if (r.has_parameter_sum() && !std::isfinite(r.parameter_sum())) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter_sum: must be finite, got ", r.parameter_sum()));
  }
  for (int i = 0; i < r.validations_size(); ++i) {
    const zbpp::v1::ValidationResult& v = r.validations(i);
    const std::string at = absl::StrCat("validations[", i, "].");
    if (v.mode() != zbpp::v1::VALIDATION_MODE_SYNCHRONOUS &&
        v.mode() != zbpp::v1::VALIDATION_MODE_POST) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "mode: must be SYNCHRONOUS or POST, got ", v.mode()));
    }
    if (!zbpp::v1::ValidationDecision_IsValid(v.decision())) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "decision: unknown decision ", v.decision()));
    }
    if (!(v.clip_coefficient() >= 0 && v.clip_coefficient() <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "clip_coefficient: must be in [0, 1], got ", v.clip_coefficient()));
    }
    if (!(v.global_grad_norm_sq() >= 0) && !v.found_inf_nan()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "global_grad_norm_sq: must be >= 0 unless found_inf_nan, got ",
                       v.global_grad_norm_sq()));
    }
    if (absl::Status st = CheckTime(v.rollback_seconds(), at + "rollback_seconds"); !st.ok()) {
      return st;
    }
    if (v.replayed_forwards() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "replayed_forwards: must be >= 0, got ", v.replayed_forwards()));
    }
  }
  return absl::OkStatus();
}

// Folds one replica's timing of a virtual stage into the step's sample.
// Replicas run one schedule in lockstep (their reductions meet), so a pass
// costs what the slowest replica took: the max. A reduction is timed from
// its issue and so includes waiting for the replicas that issue it later;
// the replica that issues it last measures the all-reduce alone: the min.
void CombineReplicaTiming(const StageTiming& replica, StageTiming& combined) {
  combined.f_seconds = std::max(combined.f_seconds, replica.f_seconds);
  combined.b_seconds = std::max(combined.b_seconds, replica.b_seconds);
  combined.w_seconds = std::max(combined.w_seconds, replica.w_seconds);
  if (replica.reduce_seconds.has_value()) {
    combined.reduce_seconds =
        combined.reduce_seconds.has_value()
            ? std::min(*combined.reduce_seconds, *replica.reduce_seconds)
            : *replica.reduce_seconds;
  }
}

// Why two replicas' validations of one stage and step differ ("" when
// they agree): everything but the timings (rollback seconds, replays),
// which are each worker's own.
std::string ValidationMismatch(const zbpp::v1::ValidationResult& a,
                               const zbpp::v1::ValidationResult& b) {
  auto same = [](double x, double y) {
    return x == y || (std::isnan(x) && std::isnan(y));
  };
  if (a.mode() != b.mode()) {
    return absl::StrCat("mode ", zbpp::v1::ValidationMode_Name(b.mode()), " vs ",
                        zbpp::v1::ValidationMode_Name(a.mode()));
  }
  if (a.decision() != b.decision()) {
    return absl::StrCat("decision ", zbpp::v1::ValidationDecision_Name(b.decision()),
                        " vs ", zbpp::v1::ValidationDecision_Name(a.decision()));
  }
  if (a.found_inf_nan() != b.found_inf_nan()) {
    return absl::StrCat("found_inf_nan ", b.found_inf_nan(), " vs ", a.found_inf_nan());
  }
  if (!same(a.global_grad_norm_sq(), b.global_grad_norm_sq())) {
    return absl::StrCat("global_grad_norm_sq ", b.global_grad_norm_sq(), " vs ",
                        a.global_grad_norm_sq());
  }
  if (!same(a.clip_coefficient(), b.clip_coefficient())) {
    return absl::StrCat("clip_coefficient ", b.clip_coefficient(), " vs ",
                        a.clip_coefficient());
  }
  if (a.rolled_back() != b.rolled_back()) {
    return absl::StrCat("rolled_back ", b.rolled_back(), " vs ", a.rolled_back());
  }
  return "";
}

}  // namespace

using internal::LogError;
using zbpp::v1::JobEvent;

// --------------------------------------------------------------- steps

absl::Status Coordinator::ReportStep(
    const zbpp::v1::ReportStepRequest& report) {
  std::unique_ptr<ResolveTask> resolve;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = ReportStepLocked(report, &resolve); !s.ok()) return s;
  }
  if (resolve == nullptr) return absl::OkStatus();
  if (resolve_thread_.joinable()) {
    absl::MutexLock lock(&resolve_mu_);
    resolve_queue_.push_back(std::move(resolve));
    return absl::OkStatus();
  }
  // The solver runs here, without the mutex: other RPCs go on meanwhile.
  RunResolve(*resolve);
  return absl::OkStatus();
}

absl::Status Coordinator::ReportStepLocked(
    const zbpp::v1::ReportStepRequest& report,
    std::unique_ptr<ResolveTask>* resolve) {
  absl::StatusOr<WorkerRecord> record = membership_->Get(report.worker_id());
  if (!record.ok()) return record.status();
  JobRuntime* job = FindJob(report.job_id());
  if (job == nullptr || record->state != WorkerState::kAssigned ||
      record->job_id != report.job_id() || job->attempt != report.attempt() ||
      job->workers.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", report.worker_id(), " does not hold job ", report.job_id(),
        " attempt ", report.attempt()));
  }
  const int index = record->rank;
  if (report.stage() != job->stage_of(index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage: worker ", report.worker_id(), " runs stage ",
                     job->stage_of(index), ", not ", report.stage()));
  }
  if (report.replica() < 0 || report.replica() >= job->replicas()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: ", report.replica(), " is not in [0, ", job->replicas(),
                     ") (pipeline.data_parallel = ", job->replicas(), ")"));
  }
  if (report.replica() != job->replica_of(index)) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: worker ", report.worker_id(), " runs replica ",
                     job->replica_of(index), ", not ", report.replica()));
  }
  if (report.step() < job->start_step || report.step() > job->granted) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step: ", report.step(), " was not granted (attempt runs steps ",
        job->start_step, "..", job->granted, ")"));
  }
  const zbpp::v1::ScheduleVersion* version =
      VersionInForce(job->versions, report.step());
  if (version == nullptr || version->version() != report.schedule_version()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule_version: step ", report.step(), " runs version ",
        version == nullptr ? 0 : version->version(), ", not ",
        report.schedule_version()));
  }
  const sched::Schedule& schedule = job->parsed.at(version->version());
  const std::vector<sched::Action>& actions = schedule.actions[report.stage()];
  if (report.action_start_seconds_size() != static_cast<int>(actions.size()) ||
      report.action_end_seconds_size() != static_cast<int>(actions.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "action_start_seconds/action_end_seconds: ",
        report.action_start_seconds_size(), "/",
        report.action_end_seconds_size(), " timings for ", actions.size(),
        " actions of stage ", report.stage(), " in version ",
        version->version()));
  }
  // Checked before anything is stored, so a bad entry rejects the whole
  // report.
  absl::StatusOr<std::vector<HopTiming>> hops = HopTimingsOf(report, schedule);
  if (!hops.ok()) return hops.status();
  for (int i = 0; i < report.validations_size(); ++i) {
    const int64_t step = report.validations(i).step();
    if (step < job->start_step || step > report.step()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "validations[", i, "].step: ", step, " is not a step of this attempt up to ",
          report.step()));
    }
  }
  if (absl::Status st = CheckReportRanges(report); !st.ok()) return st;
  std::vector<MeasuredPass> passes;
  passes.reserve(actions.size());
  StageReport stage;
  stage.worker_id = report.worker_id();
  // F, B (or BW), W, REDUCE_GRAD.
  double sums[4] = {0, 0, 0, 0};
  int counts[4] = {0, 0, 0, 0};
  double last_pass_end = 0;
  double last_reduce_end = 0;
  // A partial W or reduction (one gradient bucket of K) stands for 1/K of
  // the whole one the cost model and the report speak of.
  const std::vector<int> buckets = sched::BucketsPerStage(schedule);
  for (size_t i = 0; i < actions.size(); ++i) {
    const double seconds =
        report.action_end_seconds(i) - report.action_start_seconds(i);
    if (!(seconds >= 0) || !std::isfinite(seconds)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "action_end_seconds[", i, "]: action ",
          sched::ActionToString(actions[i]), " has duration ", seconds));
    }
    const double whole =
        seconds * (actions[i].bucket == sched::kAllBuckets ? 1 : buckets[actions[i].stage]);
    passes.push_back({actions[i].kind, actions[i].stage, whole});
    const sched::PassKind kind = actions[i].kind;
    const int slot = kind == sched::PassKind::kF        ? 0
                     : kind == sched::PassKind::kW      ? 2
                     : kind == sched::PassKind::kReduce ? 3
                                                        : 1;
    sums[slot] += whole;
    ++counts[slot];
    // A reduction runs beside the passes on the communication timeline:
    // not busy time, and exposed only where it ends after the last pass.
    if (kind == sched::PassKind::kReduce) {
      last_reduce_end = std::max(last_reduce_end, report.action_end_seconds(i));
    } else {
      stage.busy_seconds += seconds;
      last_pass_end = std::max(last_pass_end, report.action_end_seconds(i));
    }
  }
  absl::StatusOr<std::vector<StageTiming>> timings =
      AverageStepPasses(passes, *job->base);
  if (!timings.ok()) return timings.status();
  stage.timings = *std::move(timings);
  for (const HopTiming& hop : *hops) {
    LogError(job->costs->AddHopTiming(hop), "cost model");
  }
  stage.f_seconds = counts[0] ? sums[0] / counts[0] : 0;
  stage.b_seconds = counts[1] ? sums[1] / counts[1] : 0;
  stage.w_seconds = counts[2] ? sums[2] / counts[2] : 0;
  stage.reduce_seconds = counts[3] ? sums[3] / counts[3] : 0;
  if (counts[3] > 0) {
    stage.exposed_reduce_seconds = std::max(0.0, last_reduce_end - last_pass_end);
  }
  stage.step_seconds = report.step_seconds();
  if (!actions.empty()) {
    const auto& starts = report.action_start_seconds();
    const auto& ends = report.action_end_seconds();
    stage.span_seconds = *std::max_element(ends.begin(), ends.end()) -
                         *std::min_element(starts.begin(), starts.end());
  }
  stage.idle_seconds = report.idle_seconds();
  stage.comm_seconds = report.comm_seconds();
  if (report.has_loss()) stage.loss = report.loss();
  if (report.has_eval_loss()) stage.eval_loss = report.eval_loss();
  stage.checkpoint_written = report.checkpoint_written();
  if (report.has_parameter_sum()) stage.parameter_sum = report.parameter_sum();
  *stage.timeline.mutable_action_start_seconds() = report.action_start_seconds();
  *stage.timeline.mutable_action_end_seconds() = report.action_end_seconds();

  job->acknowledged.insert(report.worker_id());
  if (job->acknowledged.size() == job->workers.size() &&
      (job->job.state() == zbpp::v1::JOB_STATE_ASSIGNING ||
       job->job.state() == zbpp::v1::JOB_STATE_RECOVERING)) {
    SetState(*job, zbpp::v1::JOB_STATE_RUNNING, "");
  }
  PendingStep& pending = job->pending[report.step()];
  pending.step = report.step();
  pending.version = version->version();
  // A second report of one (stage, replica) for a step replaces the first.
  pending.reports[index] = std::move(stage);
  int64_t& done = job->last_completed[index];
  done = std::max(done, report.step());
  for (const zbpp::v1::ValidationResult& validation : report.validations()) {
    job->validations[validation.step()][index] = validation;
    GatherValidation(*job, validation.step());
    if (job->workers.empty()) {
      // The replicas disagreed: the job failed, its attempt (and `pending`)
      // is gone.
      PersistJob(*job);
      return absl::OkStatus();
    }
  }
  if (static_cast<int>(pending.reports.size()) ==
      static_cast<int>(job->workers.size())) {
    PendingStep complete = std::move(pending);
    job->pending.erase(report.step());
    *resolve = CompleteStep(*job, complete);
  }
  if (!job->workers.empty()) UpdateGrant(*job);
  PersistJob(*job);
  return absl::OkStatus();
}

void Coordinator::GatherValidation(JobRuntime& job, int64_t step) {
  auto it = job.validations.find(step);
  if (it == job.validations.end() ||
      it->second.size() != job.workers.size()) {
    return;
  }
  const std::map<int, zbpp::v1::ValidationResult>& results = it->second;
  // Every replica validates the same all-reduced gradients: a replica whose
  // result differs from replica 0's ran on other gradients, and going on
  // would let the replicas' parameters drift apart.
  for (const auto& [index, result] : results) {
    if (job.replica_of(index) == 0) continue;
    const std::string why =
        ValidationMismatch(results.at(job.stage_of(index)), result);
    if (why.empty()) continue;
    const std::string message = absl::StrCat(
        "validation of step ", step, ": stage ", job.stage_of(index), " replica ",
        job.replica_of(index), " disagrees with replica 0 (", why,
        "); the data-parallel replicas did not validate the same reduced gradients");
    EndAttempt(job, message);
    SetState(job, zbpp::v1::JOB_STATE_FAILED, message);
    AssignWaitingJobs();
    return;
  }
  zbpp::v1::ValidationOutcome outcome;
  outcome.set_step(step);
  double clip = 1;
  // Replica 0's results (worker indexes [0, p)) stand for every replica's.
  for (const auto& [index, result] : results) {
    if (job.replica_of(index) != 0) continue;
    const int rank = job.stage_of(index);
    outcome.set_mode(result.mode());
    outcome.set_found_inf_nan(outcome.found_inf_nan() ||
                              result.found_inf_nan());
    outcome.set_global_grad_norm(std::sqrt(result.global_grad_norm_sq()));
    if (result.decision() > outcome.decision()) {
      outcome.set_decision(result.decision());
    }
    clip = std::min(clip, result.clip_coefficient());
    if (result.rolled_back()) outcome.add_rolled_back_stages(rank);
    outcome.set_rollback_seconds(outcome.rollback_seconds() +
                                 result.rollback_seconds());
  }
  outcome.set_clip_coefficient(clip);
  // The squared norms sum the finite ranks only (a rank with an inf/nan
  // gradient adds 0): the global norm is not a number then (job.proto).
  if (outcome.found_inf_nan()) {
    outcome.set_global_grad_norm(std::numeric_limits<double>::quiet_NaN());
  }
  job.validations.erase(it);
  if (step <= job.validated_through) return;  // Replayed after a recovery.
  job.validated_through = step;
  writer_->Enqueue(
      [id = job.job.id(), outcome](Store& store) {
        return store.AddValidationOutcome(id, outcome);
      },
      absl::StrCat("storing the validation outcome of step ", step, " of job ",
                   job.job.id()));
  const bool rolled_back = outcome.rolled_back_stages_size() > 0;
  const bool skipped =
      outcome.decision() == zbpp::v1::VALIDATION_DECISION_SKIPPED;
  if (rolled_back) job.job.set_rollbacks_total(job.job.rollbacks_total() + 1);
  if (skipped) {
    job.job.set_skipped_steps_total(job.job.skipped_steps_total() + 1);
  }
  if (outcome.decision() == zbpp::v1::VALIDATION_DECISION_CLIPPED) {
    job.job.set_clipped_steps_total(job.job.clipped_steps_total() + 1);
  }
  if (options_.observer != nullptr) {
    options_.observer->OnValidation(job.job.id(), rolled_back, skipped);
  }
  JobEvent event;
  *event.mutable_validation() = outcome;
  Emit(job, std::move(event), /*droppable=*/false);
  if (std::optional<zbpp::v1::ValidationMode> mode = job.validation->Record(outcome);
      mode.has_value()) {
    SwitchValidationMode(job, *mode, outcome);
  }
}

void Coordinator::SwitchValidationMode(JobRuntime& job, zbpp::v1::ValidationMode mode,
                                       const zbpp::v1::ValidationOutcome& last) {
  if (job.versions.empty() || job.workers.empty() || IsTerminal(job.job.state())) return;
  // Same schedule and predictions, the other mode, from the next step no
  // worker has been granted: every worker switches at the same step.
  zbpp::v1::ScheduleVersion version = job.versions.back();
  const sched::Schedule schedule = job.parsed.at(version.version());
  version.clear_previous_predicted();
  version.set_reason(zbpp::v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE);
  version.set_reason_detail(
      mode == zbpp::v1::VALIDATION_MODE_POST
          ? absl::StrCat("post-update validation: no clipping or inf/nan up to step ",
                         last.step())
          : absl::StrCat("synchronous validation: step ", last.step(),
                         " was the latest of several steps clipped or skipped"));
  version.set_validation(mode);
  PublishVersion(job, std::move(version), schedule);
  job.validation->SwitchedTo(mode);
}

std::unique_ptr<Coordinator::ResolveTask> Coordinator::CompleteStep(
    JobRuntime& job, PendingStep& pending) {
  const zbpp::v1::JobSpec& spec = job.job.spec();
  const int p = job.stages();
  const int d = job.replicas();
  std::map<int, StageTiming> step_costs;  // By virtual stage.
  for (const auto& [index, report] : pending.reports) {
    for (const StageTiming& timing : report.timings) {
      auto [it, first] = step_costs.emplace(timing.stage, timing);
      if (!first) CombineReplicaTiming(timing, it->second);
    }
  }
  for (const auto& [stage, timing] : step_costs) {
    LogError(job.costs->AddStageTiming(timing), "cost model");
  }
  // Predicted: the version's order simulated under the current measured
  // costs (the analytic ones until every stage has a sample).
  StepReports reports;
  reports.step = pending.step;
  reports.version = pending.version;
  reports.stages = p;
  reports.replicas = d;
  reports.tokens_per_replica = static_cast<double>(spec.pipeline().microbatches()) *
                               spec.pipeline().microbatch_size() *
                               spec.model().seq_len();
  const zbpp::v1::ScheduleVersion& version = job.versions[pending.version - 1];
  zbpp::v1::SchedulePrediction prediction = version.predicted();
  absl::StatusOr<sched::Problem> measured = job.costs->ToProblem(*job.base);
  if (measured.ok()) {
    absl::StatusOr<sched::SimulationResult> sim =
        sched::Simulate(*measured, job.parsed.at(pending.version));
    if (sim.ok()) prediction = PredictionToProto(*sim);
  }
  reports.predicted_bubble_rate = prediction.bubble_rate();
  reports.predicted_rank_bubble_rate.assign(
      prediction.worker_bubble_rate().begin(),
      prediction.worker_bubble_rate().end());
  reports.reports = std::move(pending.reports);
  StepOutcome outcome = SummarizeStep(reports);
  const zbpp::v1::StepSummary& summary = outcome.summary;
  *outcome.summary.mutable_complete_time() = ToTimestamp(options_.clock->Now());
  if (outcome.param_checksum.has_value()) {
    job.job.set_param_checksum(*outcome.param_checksum);
  }
  writer_->Enqueue(
      [id = job.job.id(), summary](Store& store) {
        return store.AddStepSummary(id, summary);
      },
      absl::StrCat("storing the summary of step ", pending.step, " of job ",
                   job.job.id()),
      /*ignore_already_exists=*/true);
  job.job.set_steps_completed(
      std::max(job.job.steps_completed(), pending.step + 1));
  *job.job.mutable_last_step() = summary;
  if (!job.job.has_first_step()) *job.job.mutable_first_step() = summary;
  zbpp::v1::StepTimeline* timeline = job.job.mutable_last_step_timeline();
  timeline->Clear();
  timeline->set_step(pending.step);
  timeline->set_schedule_version(pending.version);
  for (int rank = 0; rank < p; ++rank) {
    *timeline->add_ranks() = std::move(reports.reports.at(rank).timeline);
  }
  if (options_.observer != nullptr) {
    options_.observer->OnStep(job.job.id(), summary);
  }
  JobEvent event;
  *event.mutable_step() = summary;
  Emit(job, std::move(event), /*droppable=*/true);

  // Workers write a checkpoint after every step s with
  // (s + 1) % interval_steps == 0 and say so in their report; only replica
  // 0's do (the others hold the same parameters), and the checkpoint is
  // complete once each of its ranks has.
  const int64_t interval = spec.checkpoint().interval_steps();
  CheckpointRecord checkpoint;
  checkpoint.stages_written = outcome.checkpointed_ranks;
  if (interval > 0 && static_cast<int>(checkpoint.stages_written.size()) == p &&
      pending.step > job.job.last_checkpoint_step()) {
    checkpoint.job_id = job.job.id();
    checkpoint.step = pending.step;
    checkpoint.directory = spec.checkpoint().directory();
    checkpoint.complete = true;
    checkpoint.data_parallel = d;
    writer_->Enqueue(
        [checkpoint](Store& store) { return store.PutCheckpoint(checkpoint); },
        absl::StrCat("storing the checkpoint record of step ", pending.step,
                     " of job ", job.job.id()));
    job.job.set_last_checkpoint_step(pending.step);
  }

  if (job.job.steps_completed() >= spec.steps()) {
    EndAttempt(job, "job succeeded");
    SetState(job, zbpp::v1::JOB_STATE_SUCCEEDED, "");
    AssignWaitingJobs();
    return nullptr;
  }
  return MaybeResolve(job, pending.step);
}

}  // namespace zbpp::coordinator
