#ifndef ZBPP_COORDINATOR_CORE_ELASTIC_RECOVERY_H_
#define ZBPP_COORDINATOR_CORE_ELASTIC_RECOVERY_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zbpp::coordinator {

/// How a job recovers from a fault (docs/elastic.md, "Recovering from
/// memory"): from what the ended attempt's workers hold, or from the last
/// checkpoint.
struct RecoveryChoice {
  /// Resume from memory (full width or degraded) rather than restart.
  bool resume = false;
  /// The step every kept worker holds (j): the next attempt starts at
  /// j + 1. Meaningful only when `resume`.
  int64_t held_step = -1;
  /// The ended attempt's replicas that are complete and kept, ascending;
  /// replica i of the next attempt is kept_replicas[i]. Empty for a
  /// restart.
  std::vector<int> kept_replicas;
  /// m' = d·m / d', microbatches per replica of the next attempt; 0 for a
  /// restart.
  int microbatches = 0;
  /// Why the job restarts (for its state message); empty when it resumes.
  std::string restart_reason;
};

/// Chooses how a job of `stages` p stages whose spec runs `replicas` d
/// replicas of `microbatches` m microbatches each recovers, from
/// `held[i]`: the step the ended attempt's worker index i (replica r =
/// i / p, stage i % p, over the ended attempt's own replicas) holds in
/// memory, nullopt when it holds nothing (lost, silent, or said so).
///
/// A replica is complete when all of its p stages hold a step. The job
/// resumes when at least one replica is complete, every complete replica's
/// stages hold the same step j, the d' complete replicas divide the global
/// batch (d'·m' = d·m for an integer m') and j + 1 <= steps — at full
/// width when d' = d. Otherwise it restarts, `restart_reason` saying why
/// ("no replica holds all 2 stages", "the held steps disagree (5 and 6)",
/// "3 replicas cannot share the 4 microbatches of a step evenly").
/// `held.size()` must be a positive multiple of p. Pure; thread-safe.
RecoveryChoice ChooseRecovery(int stages, int replicas, int microbatches, int64_t steps,
                              const std::vector<std::optional<int64_t>>& held);

/// A worker that registered with a restarted coordinator holding a stage of
/// the job in memory (its Heartbeat.held; docs/elastic.md, "Coordinator
/// restart").
struct RestoredHolder {
  std::string worker_id;
  /// The attempt it held the stage in, numbered by the coordinator's
  /// previous life.
  int64_t attempt = 0;
  int stage = 0;
  int64_t step = 0;
};

/// The workers a restarted coordinator lost track of, put back in the
/// places of the attempt that ran when it stopped: the held of
/// ChooseRecovery.
struct RestoredPlacement {
  /// The attempt placed: the newest one held (the attempt in force; older
  /// ones are spares' or stale). 0 when nobody holds anything.
  int64_t attempt = 0;
  /// By worker index (replica r = i / p, stage i % p) over the attempt's
  /// replicas; empty where no holder was placed.
  std::vector<std::string> workers;
  /// The step each placed worker holds; nullopt where none was placed.
  std::vector<std::optional<int64_t>> held;
  /// Every worker index has a holder.
  bool complete() const {
    return std::none_of(workers.begin(), workers.end(),
                        [](const std::string& id) { return id.empty(); });
  }
};

/// Places `holders` into the `replicas` replicas of `stages` stages of the
/// attempt a restarted coordinator found in force (its stored assignments):
/// the restarted coordinator numbers workers afresh, so a worker is known
/// by what it holds, not by its old id. Only holders of the newest attempt
/// held count, and among them only those holding one step j: the j held by
/// the most complete replicas (the higher j on a tie), each stage's holders
/// of j filling replicas 0, 1, ... in the order given. The replicas of one
/// data-parallel stage hold the same parameters at the same step (their
/// gradients are all-reduced), so a stage's holder of j may stand in any
/// replica. The others are left out (they hold nothing the attempt
/// resumes from). `stages` >= 1, `replicas` >= 1; holders of a stage
/// outside [0, stages) are ignored. Pure; thread-safe.
RestoredPlacement PlaceRestoredHolders(int stages, int replicas,
                                       const std::vector<RestoredHolder>& holders);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_ELASTIC_RECOVERY_H_
