#ifndef ZBPP_SCHEDULER_ZB_ORDERS_H_
#define ZBPP_SCHEDULER_ZB_ORDERS_H_

// Internal to the automatic solvers (zb_auto.cc, zb_v.cc): a compact form of
// per-stage pass orders and a fast evaluator for them. The evaluator follows
// the simulator's semantics exactly (simulator.h) but skips its checks and
// allocations, because the solvers evaluate thousands of candidate orders.
// Final results are still checked by Simulate() in the tests.

#include <cstdint>
#include <vector>

#include "scheduler/problem.h"
#include "scheduler/schedule.h"

namespace zbpp::sched::internal {

/// A pass of the split backward: F, B (input gradient) or W (weight
/// gradient). The solvers never fuse B and W.
enum Pass : int { kF = 0, kB = 1, kW = 2 };

/// Per stage, the pass ids it runs, in order. A pass id packs
/// (pass, virtual stage, microbatch); see PassModel::Id.
using Orders = std::vector<std::vector<int32_t>>;

/// The problem flattened for the solvers: durations and memory deltas per
/// (pass, virtual stage), the owner of every virtual stage, one limit per
/// stage. Plain value; thread-compatible.
class PassModel {
 public:
  /// `owner[s]` is the stage of virtual stage s (Schedule::stage_of).
  PassModel(const Problem& problem, std::vector<int> owner);

  int stages() const { return stages_; }
  int virtual_stages() const { return virtual_stages_; }
  int microbatches() const { return microbatches_; }
  /// Number of pass ids, 3 * virtual stages * microbatches.
  int num_ids() const { return 3 * virtual_stages_ * microbatches_; }

  int32_t Id(Pass pass, int virtual_stage, int microbatch) const {
    return (pass * virtual_stages_ + virtual_stage) * microbatches_ + microbatch;
  }
  Pass PassOf(int32_t id) const {
    return static_cast<Pass>(id / (virtual_stages_ * microbatches_));
  }
  int VirtualStageOf(int32_t id) const { return (id / microbatches_) % virtual_stages_; }
  int MicrobatchOf(int32_t id) const { return id % microbatches_; }
  int StageOf(int32_t id) const { return owner_[VirtualStageOf(id)]; }

  /// Seconds of one pass.
  double Duration(Pass pass, int virtual_stage) const {
    return duration_[pass * virtual_stages_ + virtual_stage];
  }
  double Duration(int32_t id) const { return info_[id].duration; }
  /// Change of the stage's activation bytes when the pass runs: +M_B for
  /// F, -(M_B - M_W) for B, -M_W for W (paper §2 memory model).
  double MemoryDelta(Pass pass, int virtual_stage) const {
    return memory_delta_[pass * virtual_stages_ + virtual_stage];
  }
  double MemoryDelta(int32_t id) const { return info_[id].memory; }
  /// The stage's limit in bytes, relaxed by a relative 1e-9 so that limits
  /// written as exact multiples of M_B are not refused by rounding.
  double Limit(int stage) const { return limit_[stage]; }
  /// One-hop latency between virtual stages `from` and `to`: comm_seconds across
  /// stages, 0 between chunks of one stage.
  double Hop(int from, int to) const {
    return owner_[from] == owner_[to] ? 0.0 : comm_;
  }
  double comm_seconds() const { return comm_; }
  const std::vector<int>& owner() const { return owner_; }
  /// Virtual stages held by `stage`, in model order.
  const std::vector<int>& VirtualStagesOf(int stage) const {
    return virtual_stages_of_[stage];
  }

  /// The id of the pass that `id` waits for on another virtual stage (F of the
  /// previous virtual stage, B of the next one), or -1. For B of the last virtual stage and
  /// for W the dependency is on the same virtual stage and always earlier in the
  /// stage's order, so it is not reported.
  int32_t CrossDependency(int32_t id) const { return info_[id].dependency; }
  /// Everything the evaluator reads about a pass, packed together (32
  /// bytes) because it reads all of it for every pass of every candidate.
  struct PassInfo {
    int32_t dependency = -1;  ///< CrossDependency
    int32_t consumer = -1;    ///< Consumer
    double hop = 0;           ///< CrossHop
    double duration = 0;      ///< Duration
    double memory = 0;        ///< MemoryDelta
  };
  const PassInfo& Info(int32_t id) const { return info_[id]; }
  /// Hop() from the virtual stage of CrossDependency(id) to the virtual stage of `id`.
  double CrossHop(int32_t id) const { return info_[id].hop; }
  /// The stage whose next pass may wait for `id` (the owner of the next
  /// virtual stage for F, of the previous one for B), or -1.
  int Consumer(int32_t id) const { return info_[id].consumer; }

 private:
  int stages_, virtual_stages_, microbatches_;
  double comm_;
  std::vector<int> owner_;
  std::vector<std::vector<int>> virtual_stages_of_;
  std::vector<double> duration_, memory_delta_, limit_;
  std::vector<PassInfo> info_;
};

/// What the evaluator computes for one candidate.
struct OrderCost {
  bool complete = false;     ///< Every pass ran (no deadlock).
  double makespan = 0;       ///< Max per-stage span, seconds (paper's cost).
  bool fits_memory = false;  ///< Peak <= limit on every stage.
};

/// Times `Orders` against a PassModel. Keeps its buffers between calls, so
/// one evaluator per search. Not thread-safe.
class Evaluator {
 public:
  explicit Evaluator(const PassModel& model);

  /// Computes start/end of every pass, per-stage spans and peaks. The
  /// orders must hold each pass once, F before B before W of the same
  /// (virtual stage, microbatch) on each stage; a deadlock gives complete = false.
  OrderCost Run(const Orders& orders);

  /// Of the last Run: start and end of pass `id`, seconds.
  double Start(int32_t id) const { return start_[id]; }
  double End(int32_t id) const { return end_[id]; }
  /// Of the last Run: per-stage span and peak activation bytes.
  const std::vector<double>& Span() const { return span_; }
  const std::vector<double>& Peak() const { return peak_; }

 private:
  const PassModel& model_;
  std::vector<double> start_, end_, span_, peak_;
  std::vector<double> free_at_, memory_;
  std::vector<size_t> next_;
  std::vector<int> ready_;
  std::vector<char> queued_;
};

/// Converts to the schedule IR (B as PassKind::kB, never fused).
Schedule ToSchedule(const PassModel& model, const Orders& orders,
                    const char* name, int chunks);

/// Converts a schedule IR without fused passes, reductions, partial W
/// passes or vocabulary passes; false if it has a BW, a REDUCE_GRAD, a W@b,
/// an S or a T.
bool FromSchedule(const PassModel& model, const Schedule& schedule,
                  Orders* orders);

}  // namespace zbpp::sched::internal

#endif  // ZBPP_SCHEDULER_ZB_ORDERS_H_
