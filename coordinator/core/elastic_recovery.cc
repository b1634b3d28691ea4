#include "coordinator/core/elastic_recovery.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {

RecoveryChoice ChooseRecovery(int stages, int replicas, int microbatches, int64_t steps,
                              const std::vector<std::optional<int64_t>>& held) {
  RecoveryChoice choice;
  const int ended_replicas = static_cast<int>(held.size()) / stages;
  std::optional<int64_t> step;
  for (int r = 0; r < ended_replicas; ++r) {
    bool complete = true;
    for (int s = 0; s < stages; ++s) complete &= held[r * stages + s].has_value();
    if (!complete) continue;
    for (int s = 0; s < stages; ++s) {
      const int64_t j = *held[r * stages + s];
      if (step.has_value() && *step != j) {
        choice.restart_reason = absl::StrCat("the held steps disagree (", std::min(*step, j),
                                             " and ", std::max(*step, j), ")");
        choice.kept_replicas.clear();
        return choice;
      }
      step = j;
    }
    choice.kept_replicas.push_back(r);
  }
  const int kept = static_cast<int>(choice.kept_replicas.size());
  const int global = replicas * microbatches;
  if (kept == 0) {
    choice.restart_reason = absl::StrCat("no replica holds all ", stages, " stages");
  } else if (global % kept != 0) {
    choice.restart_reason = absl::StrCat(kept, " replicas cannot share the ", global,
                                         " microbatches of a step evenly");
  } else if (*step + 1 > steps) {
    choice.restart_reason =
        absl::StrCat("the held step ", *step, " is past the job's last step ", steps - 1);
  }
  if (!choice.restart_reason.empty()) {
    choice.kept_replicas.clear();
    return choice;
  }
  choice.resume = true;
  choice.held_step = *step;
  choice.microbatches = global / kept;
  return choice;
}

RestoredPlacement PlaceRestoredHolders(int stages, int replicas,
                                       const std::vector<RestoredHolder>& holders) {
  RestoredPlacement placed;
  placed.workers.assign(static_cast<size_t>(stages) * replicas, "");
  placed.held.assign(placed.workers.size(), std::nullopt);
  for (const RestoredHolder& h : holders) {
    if (h.stage >= 0 && h.stage < stages) placed.attempt = std::max(placed.attempt, h.attempt);
  }
  // By step, each stage's holders of the newest attempt.
  std::map<int64_t, std::vector<std::vector<const RestoredHolder*>>> by_step;
  for (const RestoredHolder& h : holders) {
    if (h.stage < 0 || h.stage >= stages || h.attempt != placed.attempt) continue;
    auto [it, added] = by_step.try_emplace(h.step, stages);
    it->second[h.stage].push_back(&h);
  }
  // The step with the most complete replicas, the higher one on a tie.
  const std::vector<std::vector<const RestoredHolder*>>* chosen = nullptr;
  int64_t step = -1;
  int most = -1;
  for (const auto& [j, of_stage] : by_step) {
    int complete = replicas;
    for (const auto& stage_holders : of_stage) {
      complete = std::min(complete, static_cast<int>(stage_holders.size()));
    }
    if (complete >= most) {
      most = complete;
      step = j;
      chosen = &of_stage;
    }
  }
  if (chosen == nullptr) return placed;
  for (int s = 0; s < stages; ++s) {
    const std::vector<const RestoredHolder*>& stage_holders = (*chosen)[s];
    for (int r = 0; r < replicas && r < static_cast<int>(stage_holders.size()); ++r) {
      placed.workers[r * stages + s] = stage_holders[r]->worker_id;
      placed.held[r * stages + s] = step;
    }
  }
  return placed;
}

}  // namespace zbpp::coordinator
