#include "coordinator/core/resolver.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/pipeline_shape.h"
#include "api/schedule_proto.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

// Which stage moved most against the analytic model, for people: "stage k
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

// The stage whose peak under `sim` is furthest over the problem's limit;
// -1 when every stage fits.
int OverLimitStage(const sched::Problem& problem, const sched::SimulationResult& sim) {
  int worst = -1;
  double worst_ratio = 1;
  for (int w = 0; w < static_cast<int>(sim.peak_memory_bytes.size()); ++w) {
    const double limit = problem.limit_of(w);
    if (!sched::OverMemoryLimit(sim.peak_memory_bytes[w], limit)) continue;
    const double ratio = sim.peak_memory_bytes[w] / limit;
    if (worst < 0 || ratio > worst_ratio) worst = w, worst_ratio = ratio;
  }
  return worst;
}

// A calibration (ResolveTask::calibration): the policy's candidate under the
// measured costs and memory, or the current order, whichever fits the limit
// and predicts the shorter step; a version either way (task.candidate),
// unless neither fits a limit the user set (task.failure).
void SolveCalibration(ResolveTask& task) {
  ResolveRecord& record = task.record;
  std::string layout_note;
  if (task.layout_input.has_value()) {
    const ResolveTask::LayoutInput& in = *task.layout_input;
    const std::optional<std::string> distrust =
        PartsDisagreement(in.spec, in.stages, task.measured, task.current.stage_of);
    absl::StatusOr<ProfiledLayout> layout;
    if (distrust.has_value()) {
      // Parts that disagree with the stages' own chunks plan nothing: the
      // layout stays as planned at submission.
      ProfiledLayout kept;
      kept.layout = BlocksPerVirtualStage(in.spec.pipeline(), in.spec.model().layers(),
                                          task.measured.num_virtual_stages());
      kept.reason = absl::StrCat("calibration: ", LayoutText(kept.layout), " kept (", *distrust,
                                 ")", PartsText(in.stages, task.current.stage_of.back()));
      layout = std::move(kept);
    } else {
      layout = ChooseProfiledLayout(kLayoutGain, in.spec, in.schedule_name, in.stages,
                                    task.measured.comm_seconds);
    }
    if (layout.ok() && layout->changed) {
      // The workers rebuild their chunks in a new attempt, whose own
      // calibration builds the version.
      record.reason = layout->reason;
      task.layout = *std::move(layout);
      return;
    }
    layout_note = layout.ok() ? absl::StrCat("; ", layout->reason)
                              : absl::StrCat("; layout kept: ", layout.status().message());
    if (layout.ok()) task.layout = *std::move(layout);
  }
  const sched::Problem& measured = task.measured;
  sched::SimulationResult current_sim;
  std::optional<sched::Schedule> candidate;
  std::optional<sched::SimulationResult> candidate_sim;
  std::string why = "re-solve disabled: the job keeps its order";
  if (!task.policy_name.empty()) {
    absl::StatusOr<ResolveDecision> decision = task.policy->Decide(
        task.policy_name, task.current, task.current_version, measured);
    if (!decision.ok()) {
      record.reason = absl::StrCat("calibration failed: ", decision.status().ToString());
      return;
    }
    current_sim = std::move(decision->current_simulation);
    record.solve_seconds = decision->solve_seconds;
    why = decision->reason;
    if (decision->candidate_simulation.has_value()) {
      candidate = std::move(decision->candidate);
      candidate_sim = std::move(decision->candidate_simulation);
    }
  } else {
    absl::StatusOr<sched::SimulationResult> sim = sched::Simulate(measured, task.current);
    if (!sim.ok()) {
      record.reason = absl::StrCat("calibration failed: ", sim.status().ToString());
      return;
    }
    current_sim = *std::move(sim);
  }
  const int current_over = OverLimitStage(measured, current_sim);
  const bool candidate_fits =
      candidate_sim.has_value() && OverLimitStage(measured, *candidate_sim) < 0;
  const bool take_candidate =
      candidate_fits && (current_over >= 0 || candidate_sim->makespan_seconds <=
                                                  current_sim.makespan_seconds);
  record.old_makespan_seconds = current_sim.makespan_seconds;
  record.new_makespan_seconds =
      take_candidate ? candidate_sim->makespan_seconds : current_sim.makespan_seconds;
  if (!take_candidate && current_over >= 0 && !task.memory_limit_field.empty()) {
    // Nothing of the policy fits the user's limit under the measured M_B.
    const int w = current_over;
    // The stage's measured M_B (one microbatch of its chunks): the unit of
    // the simulator's peak in M_B.
    const double m_b = current_sim.peak_memory_m_b[w] > 0
                           ? current_sim.peak_memory_bytes[w] / current_sim.peak_memory_m_b[w]
                           : 0;
    task.failure = absl::StrFormat(
        "%s: no %s schedule fits under the measured activation memory: stage %d needs a "
        "peak of %.0f bytes, above its limit of %.0f bytes (measured M_B = %.0f bytes of "
        "one microbatch on stage %d)",
        task.memory_limit_field,
        task.policy_name.empty() ? task.current.name : task.policy_name, w,
        current_sim.peak_memory_bytes[w], measured.limit_of(w), m_b, w);
    record.reason = task.failure;
    return;
  }
  record.reason = absl::StrCat(
      "calibration: ", take_candidate ? "the re-solved schedule" : "the current order",
      " under the profiled costs; ", why, layout_note);
  const sched::Schedule& chosen = take_candidate ? *candidate : task.current;
  task.candidate = BuildVersion(
      task.job_id, chosen, measured, take_candidate ? *candidate_sim : current_sim,
      zbpp::v1::SCHEDULE_CHANGE_REASON_CALIBRATION,
      absl::StrCat("profiled F/B/W and M_B/M_W of every virtual stage; ", record.reason),
      &current_sim);
  task.candidate_schedule = chosen;
}

}  // namespace

void SolveResolve(ResolveTask& task) {
  if (task.calibration) {
    SolveCalibration(task);
    return;
  }
  ResolveRecord& record = task.record;
  if (task.drift_input.has_value()) {
    task.better_layout =
        BetterMeasuredLayout(task.drift_input->spec, task.drift_input->schedule_name,
                             task.drift_input->stages, task.measured, task.current.stage_of);
  }
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

void Resolver::Submit(std::unique_ptr<ResolveTask> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

std::unique_ptr<ResolveTask> Resolver::Next() {
  if (queue_.empty()) return nullptr;
  std::unique_ptr<ResolveTask> task = std::move(queue_.front());
  queue_.pop_front();
  ++busy_;
  return task;
}

void Resolver::SolveQueued() {
  if (thread_.joinable()) return;
  while (true) {
    std::unique_ptr<ResolveTask> task;
    {
      absl::MutexLock lock(&mu_);
      task = Next();
    }
    if (task == nullptr) return;
    Solve(*task);
    absl::MutexLock lock(&mu_);
    --busy_;
  }
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
      task = Next();
    }
    Solve(*task);
    absl::MutexLock lock(&mu_);
    --busy_;
  }
}

void Resolver::Wait() {
  SolveQueued();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (queue_.empty() && busy_ == 0);
  };
  mu_.Await(absl::Condition(&idle));
}

}  // namespace zbpp::coordinator
