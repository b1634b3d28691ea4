#include "coordinator/core/resolver.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/schedule_proto.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

// Which rank moved most against the analytic model, for people: "stage k
// r× the pipeline's mean cost ratio; <reason>".
std::string ResolveDetail(const ResolveTask& task, const std::string& reason) {
  const sched::Schedule& current = task.current;
  std::vector<double> ratio(current.stages, 0);
  std::vector<double> model(current.stages, 0);
  for (int s = 0; s < task.measured.num_virtual_stages(); ++s) {
    const int w = current.stage_of[s];
    const auto& m = task.measured.virtual_stages[s];
    const auto& b = task.base.virtual_stages[s];
    ratio[w] += m.f_seconds + m.b_seconds + m.w_seconds;
    model[w] += b.f_seconds + b.b_seconds + b.w_seconds;
  }
  double mean = 0;
  for (int w = 0; w < current.stages; ++w) {
    ratio[w] = model[w] > 0 ? ratio[w] / model[w] : 1;
    mean += ratio[w] / current.stages;
  }
  const int slowest =
      static_cast<int>(std::max_element(ratio.begin(), ratio.end()) - ratio.begin());
  return absl::StrFormat("stage %d %.2fx the pipeline's mean cost ratio; %s", slowest,
                         mean > 0 ? ratio[slowest] / mean : 1.0, reason);
}

// Fills task.record and, when the policy publishes, task.candidate.
void SolveResolve(ResolveTask& task) {
  ResolveRecord& record = task.record;
  absl::StatusOr<ResolveDecision> decision = task.policy->Decide(
      task.policy_name, task.current, task.current_version, task.measured,
      task.cost_drift);
  if (!decision.ok()) {
    record.reason = absl::StrCat("re-solve failed: ", decision.status().ToString());
    return;
  }
  record.old_makespan_seconds = decision->old_makespan_seconds;
  record.new_makespan_seconds = decision->new_makespan_seconds;
  record.solve_seconds = decision->solve_seconds;
  record.reason = decision->reason;
  if (!decision->publish) return;
  // Decide simulated both schedules under the measured costs: the version
  // carries those results (a publishing decision always has a candidate).
  task.candidate = BuildVersion(
      task.job_id, decision->candidate, task.measured, *decision->candidate_simulation,
      zbpp::v1::SCHEDULE_CHANGE_REASON_RESOLVE, ResolveDetail(task, decision->reason),
      &decision->current_simulation);
  task.candidate_schedule = std::move(decision->candidate);
}

}  // namespace

Resolver::Resolver(Options options) : options_(std::move(options)) {
  if (options_.background) thread_ = std::thread([this] { Loop(); });
}

Resolver::~Resolver() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
  }
  thread_.join();
}

void Resolver::Solve(ResolveTask& task) {
  SolveResolve(task);
  if (options_.before_publish) options_.before_publish(task.job_id);
  options_.publish(task);
}

void Resolver::Run(std::unique_ptr<ResolveTask> task) {
  if (!thread_.joinable()) {
    Solve(*task);
    return;
  }
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void Resolver::Loop() {
  while (true) {
    std::unique_ptr<ResolveTask> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Solve(*task);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void Resolver::Wait() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (queue_.empty() && !busy_);
  };
  mu_.Await(absl::Condition(&idle));
}

}  // namespace zbpp::coordinator
