#ifndef ZBPP_SCHEDULER_SIMULATOR_H_
#define ZBPP_SCHEDULER_SIMULATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched {

/// Start and end of one action, in seconds from the start of the step. For a
/// reduction (PassKind::kReduce): when the stage's communication timeline
/// starts it and when it completes.
struct ActionTiming {
  double start_seconds = 0;
  double end_seconds = 0;
};

/// What the simulator computes for one (problem, schedule) pair. This is the
/// single definition of makespan, bubble rate and peak memory in zbpp.
struct SimulationResult {
  /// Parallel to `Schedule::actions`: timing of every action.
  std::vector<std::vector<ActionTiming>> timings;
  /// The paper's "cost" (§5.3): the largest per-stage span, from a stage's
  /// first start to its last end, in seconds. A stage ends at the later of
  /// its last pass and its last reduction.
  double makespan_seconds = 0;
  /// From the first start to the last end over all stages, in seconds: the
  /// wall-clock time of one step (reductions included).
  double step_seconds = 0;
  /// Idle fraction in [0, 1]: 1 - sum_w busy_w / (p * makespan). For equal
  /// work on every stage this is the paper's (cost - m(T_F+T_B+T_W))/cost.
  /// A reduction is not busy time: where it is exposed it is bubble.
  double bubble_rate = 0;
  /// Seconds the reductions add to the step: makespan_seconds minus the
  /// makespan of the same schedule with its reductions removed (those
  /// timings do not depend on the reductions). 0 without reductions, and 0
  /// when every stage's reductions end within the makespan its passes set.
  double exposed_reduce_seconds = 0;
  /// Per stage: seconds spent running passes (reductions excluded).
  std::vector<double> busy_seconds;
  /// Per stage: how long its last reduction ends after its last pass,
  /// max(0, last reduction end - last pass end), in seconds; 0 without
  /// reductions. A stage's own exposure: it shows in the makespan only as
  /// far as that stage's span, so extended, exceeds the others'.
  std::vector<double> exposed_reduce_seconds_per_stage;
  /// Per stage: makespan - busy, in seconds (the stage's bubble measured
  /// against the common makespan, so that sum_w idle / (p * makespan) is
  /// the bubble rate).
  std::vector<double> idle_seconds;
  /// Per stage: peak activation memory held between passes, in bytes: the
  /// largest running sum of PassMemoryBytes over the stage's list (the
  /// Zero Bubble paper's model, §2). What memory limits bound: the solvers
  /// plan these held bytes against them.
  std::vector<double> peak_memory_bytes;
  /// Per stage: peak activation memory while passes run, in bytes: the
  /// largest, over the stage's passes, of the larger of the bytes held
  /// before and after a pass plus its VirtualStageCost::transient_bytes.
  /// >= peak_memory_bytes; equal to it when every transient_bytes is 0. What
  /// a step's measured peak is compared with (SchedulePrediction.peak_memory_bytes).
  std::vector<double> peak_running_memory_bytes;
  /// Per stage: peak in units of that stage's M_B (the sum of M_B over the
  /// virtual stages it holds, i.e. one microbatch's activations).
  std::vector<double> peak_memory_m_b;
  /// Max over stages of `peak_memory_m_b`.
  double max_peak_memory_m_b = 0;
};

/// Per virtual stage, the number K of gradient buckets `schedule` splits it
/// into: 1 + the largest bucket index of its W and REDUCE_GRAD actions, 1
/// when it names none (see PassKind). Size num_virtual_stages(); indices out of
/// [0, kMaxBuckets) are ignored here (CheckSchedule refuses them).
std::vector<int> BucketsPerVirtualStage(const Schedule& schedule);

/// Seconds that `action` of a virtual stage costing `cost` and split into `buckets`
/// lasts: T_F, T_B, T_W (T_W / K for one bucket), T_BW for BW
/// (FusedBackwardSeconds),
/// VirtualStageCost::reduce_seconds (its K-th for one bucket) for a reduction;
/// 0 for a vocabulary pass (kS, kT), which the VocabularyCost overload times.
double PassSeconds(const VirtualStageCost& cost, const Action& action, int buckets);

/// Seconds a vocabulary pass lasts on a stage whose vocabulary passes cost
/// `cost` (Problem::vocabulary): T_S for kS, T_T for kT; 0 for the other
/// kinds. Pure.
double PassSeconds(const VocabularyCost& cost, const Action& action);

/// Change of the stage's activation memory, in bytes, when it runs `action`
/// of a virtual stage costing `cost` and split into `buckets` (paper §2): F +M_B,
/// B -(M_B - M_W), W -M_W (-M_W / K for one bucket), BW -M_B, a reduction
/// and a vocabulary pass 0 (see the VocabularyCost overload).
double PassMemoryBytes(const VirtualStageCost& cost, const Action& action, int buckets);

/// Change of a stage's activation memory, in bytes, when it runs the
/// vocabulary pass `action` costing `cost`: kS +VocabularyCost::m_bytes
/// (held until the microbatch's T), kT -m_bytes; 0 for the other kinds. Pure.
double PassMemoryBytes(const VocabularyCost& cost, const Action& action);

/// Whether `schedule` holds any vocabulary pass (PassKind::kS, kT). Pure.
bool HoldsVocabularyPasses(const Schedule& schedule);

/// Calls `input(stage, pass)` for each pass whose output `action`, run on
/// stage `stage` of `schedule`, consumes: the one list of dependencies that
/// Simulate times and DerivePairOrders turns into messages (those whose
/// producer runs on another stage). `vocabulary_parallel`: whether the
/// schedule holds S and T passes (HoldsVocabularyPasses). With L the last
/// virtual stage and j the microbatch:
///  * F of virtual stage s > 0: F of s-1 (on the stage holding s-1);
///  * B or BW of s: its own F (same stage), and B of s+1 for s < L; for
///    s = L, the T of j on every stage when `vocabulary_parallel`;
///  * W: its B (same stage);
///  * S: F of L (on the stage holding L);
///  * T: the S of j on every stage (its own stage's included);
///  * REDUCE_GRAD: none (it follows its virtual stage's W passes in the
///    stage's order; CheckSchedule).
/// A pass reported as kB stands for the B or the BW of its (virtual stage,
/// microbatch), whichever the schedule holds. Source of the S and T
/// dependencies: Yeung et al., "Balancing Pipeline Parallelism with
/// Vocabulary Parallelism" (MLSys 2025); the others, the Zero Bubble
/// paper §2. Requires `action` and `stage` in range (CheckSchedule). Pure.
template <typename Fn>
void ForEachInput(const Schedule& schedule, bool vocabulary_parallel, Stage stage,
                  const Action& action, Fn&& input) {
  const int v = action.virtual_stage.value();
  const VirtualStage last(schedule.num_virtual_stages() - 1);
  const int j = action.microbatch;
  switch (action.kind) {
    case PassKind::kF:
      if (v > 0) {
        input(schedule.StageOf(VirtualStage(v - 1)), Action{PassKind::kF, VirtualStage(v - 1), j});
      }
      return;
    case PassKind::kB:
    case PassKind::kBW:
      input(stage, Action{PassKind::kF, action.virtual_stage, j});
      if (action.virtual_stage != last) {
        input(schedule.StageOf(VirtualStage(v + 1)), Action{PassKind::kB, VirtualStage(v + 1), j});
      } else if (vocabulary_parallel) {
        for (Stage r : schedule.AllStages()) input(r, Action{PassKind::kT, last, j});
      }
      return;
    case PassKind::kW:
      input(stage, Action{PassKind::kB, action.virtual_stage, j});
      return;
    case PassKind::kS:
      input(schedule.StageOf(last), Action{PassKind::kF, last, j});
      return;
    case PassKind::kT:
      for (Stage r : schedule.AllStages()) input(r, Action{PassKind::kS, last, j});
      return;
    case PassKind::kReduce:
      return;
  }
}

/// Checks that `schedule` is well formed for `problem`: matching sizes, every
/// virtual stage on the stage `stage_of` names, every (virtual stage, microbatch)
/// with exactly one F and either one B and one W or one BW, and on each
/// stage F before B before W of the same (virtual stage, microbatch). Reductions
/// (PassKind::kReduce, microbatch 0) are optional as a whole: a schedule
/// without any is one data-parallel replica (d = 1); one with any must hold
/// exactly one per virtual stage, after that virtual stage's last W or BW. With
/// gradient buckets (PassKind; K from BucketsPerVirtualStage): a W is either one
/// whole W or one W@b for every bucket b (never for BW), and a virtual stage's
/// reduction either one whole REDUCE_GRAD, after every W of the virtual stage, or
/// one REDUCE_GRAD@b per bucket, each after every W covering b.
/// Vocabulary passes (PassKind::kS, kT) are optional as a whole: their
/// virtual stage is the last one L, on whichever stage runs them; a schedule
/// with any holds exactly one S and one T per (stage, microbatch), on every
/// stage, each T after its S, the S of the stage holding L after F of L, and
/// B (or BW) of L after that stage's T of the microbatch. (Whether the
/// problem prices them, Problem::vocabulary, is Simulate's check.)
///
/// Returns InvalidArgument naming the stage, the position and the action,
/// e.g. `stage 1, action #7 (1W3): W before its B (1I3)`,
/// `stage 2, action #4 (3T1): T before its S (3S1)` or
/// `stage 0, action #9 (0REDUCE_GRAD): reduction before the virtual stage's last
/// W or BW (0W3)`.
absl::Status CheckSchedule(const Problem& problem, const Schedule& schedule);

/// Runs `schedule` on `problem`'s cost model, event by event: an action
/// starts when its stage is free and its inputs are there (ForEachInput).
/// F of virtual stage s needs F of s-1, B of s needs F of s and B of s+1 (the
/// last virtual stage: its own F, or with vocabulary passes the T of the
/// microbatch on every stage), W needs its B, S needs F of the last virtual
/// stage, T the S of every stage; a dependency crossing stages arrives
/// `comm_seconds` after the producer ends, one on the same stage at once.
/// Memory: F holds M_B from its start, B frees M_B - M_W, W frees M_W, BW
/// frees M_B, S holds its stage's VocabularyCost::m_bytes, which its T
/// frees; S and T are busy time, timed by Problem::vocabulary, and add their
/// VocabularyCost::transient_bytes to the running peak. A merged pair (MergesWithNext: a B and its
/// whole W next to it) runs as one pass of T_BW whose input gradient is
/// produced after min(T_B, T_BW), as the runtime sends it between the two
/// parts: the B's timing is that part, the W's the rest of the pass. With
/// T_BW = T_B + T_W (VirtualStageCost::bw_seconds unset) every timing equals
/// that of B then W.
///
/// Reductions do not occupy the compute timeline: a kReduce is issued when
/// its stage's passes reach it in the order (at the end of the pass before
/// it, or at 0 when it comes first), runs on that stage's communication
/// timeline (one at a time, in list order) for its virtual stage's
/// VirtualStageCost::reduce_seconds, and the stage ends at the later of its last
/// pass and its last reduction.
///
/// Errors: those of `Problem::Validate` and `CheckSchedule`;
/// InvalidArgument for a schedule with vocabulary passes under a problem
/// without `vocabulary`, or a problem with `vocabulary` and a schedule
/// without vocabulary passes (the LM head's cost would be lost);
/// FailedPrecondition for a deadlock, listing each stuck stage's next action
/// and the pass it waits for. O(number of actions). Thread-safe (pure).
absl::StatusOr<SimulationResult> Simulate(const Problem& problem,
                                          const Schedule& schedule);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_SIMULATOR_H_
