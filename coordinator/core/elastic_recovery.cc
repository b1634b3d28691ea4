#include "coordinator/core/elastic_recovery.h"

#include <algorithm>

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

}  // namespace zbpp::coordinator
