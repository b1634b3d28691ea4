// Coordinator: adaptive re-solves from measured costs, decided under the
// mutex and solved outside it (coordinator_internal.h).

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/job_state.h"
#include "api/schedule_proto.h"
#include "coordinator/core/coordinator.h"
#include "coordinator/core/coordinator_internal.h"
#include "coordinator/core/job_spec_check.h"
#include "coordinator/core/schedule_file.h"
#include "scheduler/registry.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {

using internal::BuildVersion;
using internal::LogError;

std::unique_ptr<Coordinator::ResolveTask> Coordinator::MaybeResolve(
    JobRuntime& job, int64_t step) {
  const zbpp::v1::ResolvePolicy& resolve = job.job.spec().schedule().resolve();
  if (ResolveDisabled(job.job.spec()) || job.versions.empty()) return nullptr;
  // One re-solve per job at a time; a window that ends while one runs is
  // covered by the next window.
  if (job.resolving) return nullptr;
  const int64_t window = resolve.has_window_steps() ? resolve.window_steps() : 8;
  const zbpp::v1::ScheduleVersion& latest = job.versions.back();
  const int64_t under_latest = step - latest.effective_step() + 1;
  if (under_latest <= 0 || under_latest % window != 0) return nullptr;
  absl::StatusOr<sched::Problem> measured = job.costs->ToProblem(*job.base);
  if (!measured.ok()) return nullptr;  // Some stage has no sample yet.

  const std::string& spec_name = job.job.spec().schedule().name();
  auto task = std::make_unique<ResolveTask>();
  task->job_id = job.job.id();
  task->attempt = job.attempt;
  task->current_version = latest.version();
  task->current = job.parsed.at(latest.version());
  // "auto" re-solves the schedule ChooseAutoSchedule picked.
  if (!job.job.spec().schedule().file().empty()) {
    task->policy_name = FileResolver(task->current);
  } else if (spec_name == kAutoScheduleName) {
    task->policy_name = latest.schedule().name();
  } else {
    task->policy_name = spec_name;
  }
  task->policy = job.policy.get();
  task->measured = *std::move(measured);
  task->cost_drift = job.costs->Drift();
  task->base = *job.base;
  task->record.job_id = job.job.id();
  task->record.step = step;
  job.resolving = true;
  return task;
}

void Coordinator::RunResolve(ResolveTask& task) {
  ResolveRecord& record = task.record;
  absl::StatusOr<ResolveDecision> decision = task.policy->Decide(
      task.policy_name, task.current, task.current_version, task.measured,
      task.cost_drift);
  if (!decision.ok()) {
    record.reason = absl::StrCat("re-solve failed: ",
                                 decision.status().ToString());
  } else {
    record.old_makespan_seconds = decision->old_makespan_seconds;
    record.new_makespan_seconds = decision->new_makespan_seconds;
    record.solve_seconds = decision->solve_seconds;
    record.reason = decision->reason;
    if (decision->publish) {
      // Which rank moved most against the analytic model, for people.
      const sched::Schedule& current = task.current;
      std::vector<double> ratio(current.workers, 0);
      std::vector<double> model(current.workers, 0);
      for (int s = 0; s < task.measured.num_stages(); ++s) {
        const int w = current.worker_of_stage[s];
        const auto& m = task.measured.stages[s];
        const auto& b = task.base.stages[s];
        ratio[w] += m.f_seconds + m.b_seconds + m.w_seconds;
        model[w] += b.f_seconds + b.b_seconds + b.w_seconds;
      }
      double mean = 0;
      for (int w = 0; w < current.workers; ++w) {
        ratio[w] = model[w] > 0 ? ratio[w] / model[w] : 1;
        mean += ratio[w] / current.workers;
      }
      const int slowest = static_cast<int>(
          std::max_element(ratio.begin(), ratio.end()) - ratio.begin());
      const std::string detail = absl::StrFormat(
          "stage %d %.2fx the pipeline's mean cost ratio; %s", slowest,
          mean > 0 ? ratio[slowest] / mean : 1.0, decision->reason);
      zbpp::v1::SchedulePrediction previous;
      absl::StatusOr<sched::SimulationResult> old_sim =
          sched::Simulate(task.measured, current);
      if (old_sim.ok()) previous = PredictionToProto(*old_sim);
      absl::StatusOr<zbpp::v1::ScheduleVersion> built = BuildVersion(
          task.job_id, decision->candidate, task.measured,
          zbpp::v1::SCHEDULE_CHANGE_REASON_RESOLVE, detail, &previous);
      if (built.ok()) {
        task.candidate = *std::move(built);
        task.candidate_schedule = std::move(decision->candidate);
      } else {
        record.reason = absl::StrCat(record.reason, "; publishing failed: ",
                                     built.status().ToString());
      }
    }
  }
  if (options_.before_resolve_publish_for_testing) {
    options_.before_resolve_publish_for_testing(task.job_id);
  }
  absl::MutexLock lock(&mu_);
  FinishResolve(task);
}

void Coordinator::FinishResolve(ResolveTask& task) {
  ResolveRecord& record = task.record;
  JobRuntime* job = FindJob(task.job_id);
  if (job != nullptr) job->resolving = false;
  if (task.candidate.has_value()) {
    // Publish only onto what was solved for: the same attempt, still
    // running, and no other schedule published meanwhile (a validation-mode
    // switch keeps the schedule: the candidate still applies, and takes the
    // new mode). PublishVersion then takes the effective step from the
    // grants sent by now, so every worker still switches at the same step.
    bool schedule_unchanged = job != nullptr && !job->versions.empty() &&
                              job->versions.back().version() >= task.current_version;
    for (size_t i = static_cast<size_t>(task.current_version);
         schedule_unchanged && i < job->versions.size(); ++i) {
      schedule_unchanged = job->versions[i].reason() ==
                           zbpp::v1::SCHEDULE_CHANGE_REASON_VALIDATION_MODE;
    }
    if (job == nullptr || job->attempt != task.attempt ||
        job->workers.empty() || IsTerminal(job->job.state()) || !schedule_unchanged) {
      record.reason = absl::StrCat(
          record.reason,
          "; not published: the job's attempt or version changed while "
          "solving");
    } else {
      record.published = true;
      record.version = PublishVersion(*job, *std::move(task.candidate),
                                      *task.candidate_schedule);
      PersistJob(*job);
    }
  }
  writer_->Enqueue(
      [id = task.job_id, step = record.step,
       costs = CostModelToProto(task.measured)](Store& store) {
        return store.AddCostSnapshot(id, step, costs);
      },
      "storing a cost snapshot");
  writer_->Enqueue(
      [record](Store& store) { return store.AddResolveRecord(record); },
      "storing a re-solve");
  if (options_.observer != nullptr) {
    options_.observer->OnResolve(task.job_id, record.published);
  }
}

void Coordinator::ResolveLoop() {
  while (true) {
    std::unique_ptr<ResolveTask> task;
    {
      absl::MutexLock lock(&resolve_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(resolve_mu_) {
        return resolve_stop_ || !resolve_queue_.empty();
      };
      resolve_mu_.Await(absl::Condition(&ready));
      if (resolve_stop_) return;
      task = std::move(resolve_queue_.front());
      resolve_queue_.pop_front();
      resolve_busy_ = true;
    }
    RunResolve(*task);
    absl::MutexLock lock(&resolve_mu_);
    resolve_busy_ = false;
  }
}

void Coordinator::WaitForResolves() {
  absl::MutexLock lock(&resolve_mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(resolve_mu_) {
    return resolve_stop_ || (resolve_queue_.empty() && !resolve_busy_);
  };
  resolve_mu_.Await(absl::Condition(&idle));
}

void Coordinator::StopResolveThread() {
  if (!resolve_thread_.joinable()) return;
  {
    absl::MutexLock lock(&resolve_mu_);
    resolve_stop_ = true;
    resolve_queue_.clear();
  }
  resolve_thread_.join();
}

}  // namespace zbpp::coordinator
