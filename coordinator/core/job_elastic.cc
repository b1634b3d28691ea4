// Job: recovering from what the surviving workers hold in memory — resume
// at full width, degrade onto the complete replicas, or restart — and the
// schedule versions of another replica count (docs/elastic.md; job.h).

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/core/checkpoint_directory.h"
#include "coordinator/core/elastic_recovery.h"
#include "coordinator/core/job.h"
#include "coordinator/core/planning.h"

namespace zbpp::coordinator {

using zbpp::v1::SessionResponse;

SessionMessage DropHeldStateMessage(const std::string& job_id, int64_t attempt,
                                    const std::string& reason) {
  auto message = std::make_shared<SessionResponse>();
  zbpp::v1::Command* command = message->mutable_command();
  command->set_job_id(job_id);
  command->set_attempt(attempt);
  command->mutable_abort()->set_reason(reason);
  command->mutable_abort()->set_keep_state(false);
  return message;
}

bool Job::KeepsHeld(const std::string& worker_id, const zbpp::v1::HeldState& held) const {
  if (held.job_id() != id()) return false;
  if (spares_.count(worker_id)) return true;
  if (!awaited_.has_value()) return false;
  // A restored attempt's workers are known by what they hold once placed.
  if (awaited_->restored) return true;
  return std::find(awaited_->workers.begin(), awaited_->workers.end(), worker_id) !=
         awaited_->workers.end();
}

void Job::PlaceRestoredAttempt(int64_t attempt, std::vector<std::string> workers) {
  if (!awaited_.has_value() || !awaited_->restored) return;
  awaited_->restored = false;
  awaited_->number = attempt;
  awaited_->workers = std::move(workers);
  awaited_->holds_nothing.assign(awaited_->workers.size(), false);
  attempt_.NumberAfter(attempt);
}

void Job::ForgetSpare(const std::string& worker_id) {
  if (spares_.erase(worker_id) > 0) ObserveReplicas();
}

void Job::DropHeld(const std::string& reason) {
  std::map<std::string, int64_t> holders = std::move(spares_);
  spares_.clear();
  if (awaited_.has_value()) {
    for (const std::string& worker_id : awaited_->workers) {
      // A place of a restored attempt nobody held: no one to tell.
      if (!worker_id.empty()) holders.emplace(worker_id, awaited_->number);
    }
    awaited_.reset();
  }
  for (const auto& [worker_id, attempt] : holders) {
    effects_.messages.push_back({worker_id, DropHeldStateMessage(id(), attempt, reason)});
  }
}

absl::Status Job::PublishReplicasVersion(int replicas, int microbatches) {
  const int64_t start = attempt_.start_step();
  const zbpp::v1::ScheduleVersion* in_force = versions_.InForce(start);
  if (in_force == nullptr) return absl::OkStatus();  // Version 1 is the plan's.
  bool fits = in_force->schedule().microbatches() == microbatches;
  for (const zbpp::v1::ScheduleVersion* later : versions_.After(start)) {
    fits &= later->schedule().microbatches() == microbatches;
  }
  if (fits) return absl::OkStatus();
  absl::StatusOr<ScheduleChoice> choice =
      PlanReplicas(job_.spec(), std::vector<int>(job_.layout().begin(), job_.layout().end()),
                   versions_.latest().schedule().name(), replicas, microbatches);
  if (!choice.ok()) return choice.status();
  const int from = in_force->schedule().microbatches();
  const int global = replicas * microbatches;
  PublishVersion(
      BuildVersion(id(), choice->schedule, choice->problem, choice->simulation,
                   zbpp::v1::SCHEDULE_CHANGE_REASON_REPLICAS,
                   absl::StrCat(from > 0 ? global / from : 0, " -> ", replicas,
                                " replicas, ", from, " -> ", microbatches,
                                " microbatches per replica (global batch ", global,
                                " microbatches)"),
                   nullptr),
      choice->schedule);
  return absl::OkStatus();
}

Job::EndedAttempt Job::EndingAttempt(absl::Time now, bool heal) const {
  EndedAttempt ended{attempt_.number(), attempt_.workers(), now, heal};
  const int live = attempt_.shape().live_replicas;
  for (int index = 0; index < static_cast<int>(ended.workers.size()); ++index) {
    ended.holds_nothing.push_back(live > 0 && replica_of(index) >= live &&
                                  attempt_.last_reported(index) < attempt_.start_step());
  }
  return ended;
}

bool Job::BeginHeal() {
  if (state() != zbpp::v1::JOB_STATE_DEGRADED || !attempt_.active() || healing_ ||
      attempt_.calibrating() || !StepLeftForNewVersion()) {
    return false;
  }
  healing_ = true;
  heal_through_ = attempt_.granted();
  job_.set_state_message(absl::StrCat(job_.state_message(), "; healing to ", replicas(),
                                      " replicas after step ", heal_through_));
  Persist();
  UpdateGrant();
  MaybeEndForHeal();
  return true;
}

void Job::MaybeEndForHeal() {
  if (!healing_ || !attempt_.active()) return;
  for (int index = 0; index < static_cast<int>(attempt_.workers().size()); ++index) {
    if (attempt_.last_reported(index) < heal_through_) return;
  }
  healing_ = false;
  awaited_ = EndingAttempt(context_.clock->Now(), /*heal=*/true);
  EndAttempt(absl::StrCat("healing to ", replicas(), " replicas"), /*keep_state=*/true);
  Persist();
}

std::optional<std::vector<std::string>> Job::DecideRecovery(
    const std::vector<std::optional<int64_t>>& held,
    const std::vector<std::pair<std::string, int>>& newcomers,
    const std::vector<std::optional<zbpp::v1::ReportStepRequest>>& step_reports) {
  if (!awaited_.has_value()) return std::nullopt;
  const EndedAttempt ended = *std::move(awaited_);
  awaited_.reset();
  // Whoever holds a stage is kept until the decision is made.
  std::vector<std::optional<int64_t>> holding = held;
  for (size_t i = 0; i < holding.size() && i < ended.workers.size(); ++i) {
    if (ended.holds_nothing[i]) holding[i].reset();
    if (holding[i].has_value()) spares_[ended.workers[i]] = ended.number;
  }
  const int p = stages();
  const int64_t steps = job_.spec().steps();
  RecoveryChoice choice = ChooseRecovery(p, replicas(), job_.spec().pipeline().microbatches(),
                                         steps, holding);
  if (choice.resume && !step_reports.empty() && PrepareModel().ok()) {
    // After a coordinator restart the model is built here.
    RecordUnreportedStep(choice.held_step, step_reports,
                         static_cast<int>(ended.workers.size()) / p);
  }
  if (choice.resume && choice.held_step + 1 == steps) {
    // Every step's update is held: nothing is left to run.
    job_.set_steps_completed(steps);
    LogError(ChangeState(zbpp::v1::JOB_STATE_SUCCEEDED,
                         absl::StrCat(job_.state_message(), "; every step's update (to step ",
                                      choice.held_step, ") is held: done"),
                         std::nullopt),
             absl::StrCat("recovering job ", id()));
    return std::nullopt;
  }
  if (ended.heal && !choice.resume) {
    // The live replicas cannot go on: a recovery like any other.
    LogError(ChangeState(zbpp::v1::JOB_STATE_RECOVERING,
                         "healing failed: the degraded replicas cannot resume", std::nullopt),
             absl::StrCat("healing job ", id()));
  }
  const int kept = static_cast<int>(choice.kept_replicas.size());
  // A heal fills each missing (replica, stage) with a spare of that stage,
  // else an idle worker: all or none.
  std::vector<std::string> fill;
  if (ended.heal && choice.resume) {
    std::vector<bool> taken(newcomers.size(), false);
    for (int r = kept; r < replicas(); ++r) {
      for (int s = 0; s < stages(); ++s) {
        size_t pick = newcomers.size();
        for (size_t i = 0; i < newcomers.size() && pick == newcomers.size(); ++i) {
          if (!taken[i] && newcomers[i].second == s) pick = i;
        }
        for (size_t i = 0; i < newcomers.size() && pick == newcomers.size(); ++i) {
          if (!taken[i] && newcomers[i].second < 0) pick = i;
        }
        if (pick == newcomers.size()) continue;
        taken[pick] = true;
        fill.push_back(newcomers[pick].first);
      }
    }
    if (static_cast<int>(fill.size()) != (replicas() - kept) * stages()) fill.clear();
  }
  const bool heals = !fill.empty();
  if (heals) choice.microbatches = job_.spec().pipeline().microbatches();
  const int running = heals ? replicas() : kept;
  if (choice.resume) {
    // After a coordinator restart the model is not built yet.
    if (absl::StatusOr<std::optional<ScheduleChoice>> model = PrepareModel(); !model.ok()) {
      choice.resume = false;
      choice.restart_reason = std::string(model.status().message());
    }
  }
  if (choice.resume) {
    attempt_.set_start_step(choice.held_step + 1);
    if (absl::Status planned = PublishReplicasVersion(running, choice.microbatches);
        !planned.ok()) {
      choice.resume = false;
      choice.restart_reason = absl::StrCat("no schedule for ", running, " replicas of ",
                                           choice.microbatches,
                                           " microbatches: ", planned.message());
    }
  }
  if (!choice.resume) {
    const std::string point = NewestRestorePoint(job_).Describe();
    const std::string restart =
        absl::StrCat("restarting from ", point, " (", choice.restart_reason, ")");
    DropHeld(absl::StrCat("job ", id(), " is ", restart));
    job_.set_state_message(absl::StrCat(job_.state_message(), "; ", restart));
    recovered_how_ = absl::StrCat("restarted from ", point);
    Persist();
    ObserveReplicas();
    return std::nullopt;
  }
  std::vector<std::string> workers;
  for (int r : choice.kept_replicas) {
    for (int s = 0; s < p; ++s) workers.push_back(ended.workers[r * p + s]);
  }
  workers.insert(workers.end(), fill.begin(), fill.end());
  for (const std::string& worker_id : workers) spares_.erase(worker_id);
  resume_ = AttemptShape{running, choice.microbatches, /*from_memory=*/true,
                         /*live_replicas=*/heals ? kept : 0};
  const int64_t start = choice.held_step + 1;
  recovered_how_ =
      heals ? absl::StrCat("healed to ", replicas(), " replicas at step ", start, " (",
                           (replicas() - kept) * stages(),
                           " workers receive their state from replica 0)")
      : kept < replicas()
          ? absl::StrCat("degraded to ", kept, " replicas at step ", start, " (",
                         choice.microbatches, " microbatches each)")
          : absl::StrCat("resumed from memory at step ", start);
  job_.set_state_message(absl::StrCat(
      ended.heal ? "" : absl::StrCat(job_.state_message(), "; "), recovered_how_));
  Persist();
  ObserveReplicas();
  return workers;
}

}  // namespace zbpp::coordinator
