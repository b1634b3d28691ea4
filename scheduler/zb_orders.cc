#include "scheduler/zb_orders.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace zbpp::sched::internal {
namespace {

constexpr double kNotDone = -1.0;
constexpr double kSlack = 1e-9;

}  // namespace

PassModel::PassModel(const Problem& problem, std::vector<int> owner)
    : stages_(problem.stages),
      virtual_stages_(problem.num_virtual_stages()),
      microbatches_(problem.microbatches),
      comm_(problem.comm_seconds),
      owner_(std::move(owner)),
      virtual_stages_of_(problem.stages),
      duration_(3 * virtual_stages_),
      memory_delta_(3 * virtual_stages_),
      limit_(problem.stages) {
  for (int s = 0; s < virtual_stages_; ++s) {
    const VirtualStageCost& c = problem.virtual_stages[s];
    duration_[kF * virtual_stages_ + s] = c.f_seconds;
    duration_[kB * virtual_stages_ + s] = c.b_seconds;
    duration_[kW * virtual_stages_ + s] = c.w_seconds;
    memory_delta_[kF * virtual_stages_ + s] = c.m_b_bytes;
    memory_delta_[kB * virtual_stages_ + s] = -(c.m_b_bytes - c.m_w_bytes);
    memory_delta_[kW * virtual_stages_ + s] = -c.m_w_bytes;
    virtual_stages_of_[owner_[s]].push_back(s);
  }
  for (int w = 0; w < stages_; ++w) {
    const double limit = problem.limit_of(w);
    limit_[w] = std::isinf(limit) ? limit : limit * (1 + kSlack);
  }
  info_.assign(num_ids(), PassInfo{});
  for (int32_t id = 0; id < num_ids(); ++id) {
    const Pass pass = PassOf(id);
    const int virtual_stage = VirtualStageOf(id);
    const int mb = MicrobatchOf(id);
    PassInfo& info = info_[id];
    info.duration = Duration(pass, virtual_stage);
    info.memory = MemoryDelta(pass, virtual_stage);
    const int to = pass == kF ? virtual_stage + 1 : pass == kB ? virtual_stage - 1 : -1;
    if (to >= 0 && to < virtual_stages_ && owner_[to] != owner_[virtual_stage]) {
      info.consumer = owner_[to];
    }
    int from = -1;
    if (pass == kF && virtual_stage > 0) from = virtual_stage - 1;
    if (pass == kB && virtual_stage + 1 < virtual_stages_) from = virtual_stage + 1;
    if (from < 0) continue;
    info.dependency = Id(pass, from, mb);
    info.hop = Hop(from, virtual_stage);
  }
}

Evaluator::Evaluator(const PassModel& model)
    : model_(model),
      start_(model.num_ids()),
      end_(model.num_ids()),
      span_(model.stages()),
      peak_(model.stages()),
      free_at_(model.stages()),
      memory_(model.stages()),
      next_(model.stages()),
      queued_(model.stages()) {}

OrderCost Evaluator::Run(const Orders& orders) {
  // The simulator's algorithm (simulator.cc): advance each stage through
  // its order while the next pass's inputs are done; a stage that blocks
  // is revisited when the pass it waits for finishes.
  const int p = model_.stages();
  std::fill(end_.begin(), end_.end(), kNotDone);
  std::fill(free_at_.begin(), free_at_.end(), 0.0);
  std::fill(next_.begin(), next_.end(), 0);
  ready_.clear();
  for (int w = 0; w < p; ++w) {
    ready_.push_back(w);
    queued_[w] = 1;
  }
  std::fill(peak_.begin(), peak_.end(), 0.0);
  std::fill(memory_.begin(), memory_.end(), 0.0);
  size_t head = 0;
  // Raw pointers in the hot loop: the compiler cannot otherwise keep the
  // vectors' bounds in registers across the stores.
  double* const start = start_.data();
  double* const end = end_.data();
  char* const queued = queued_.data();
  while (head < ready_.size()) {
    const int w = ready_[head++];
    queued[w] = 0;
    const int32_t* const list = orders[w].data();
    const size_t size = orders[w].size();
    // The stage's state lives in locals while it advances.
    size_t next = next_[w];
    double free_at = free_at_[w], memory = memory_[w], peak = peak_[w];
    while (next < size) {
      const int32_t id = list[next];
      const PassModel::PassInfo& info = model_.Info(id);
      double begin = free_at;
      if (info.dependency >= 0) {
        const double dep_end = end[info.dependency];
        if (dep_end == kNotDone) break;
        begin = std::max(begin, dep_end + info.hop);
      }
      // The same-virtual stage dependencies (own F for B, own B for W) precede this
      // pass in the stage's order, so free_at already covers them.
      start[id] = begin;
      free_at = end[id] = begin + info.duration;
      memory += info.memory;
      peak = std::max(peak, memory);
      ++next;
      if (info.consumer >= 0 && !queued[info.consumer]) {
        queued[info.consumer] = 1;
        ready_.push_back(info.consumer);
      }
    }
    next_[w] = next;
    free_at_[w] = free_at;
    memory_[w] = memory;
    peak_[w] = peak;
    // Keep the queue from growing without bound: compact the consumed head.
    if (head > 4096 && head * 2 > ready_.size()) {
      ready_.erase(ready_.begin(), ready_.begin() + head);
      head = 0;
    }
  }
  OrderCost cost;
  cost.complete = true;
  cost.fits_memory = true;
  for (int w = 0; w < p; ++w) {
    const std::vector<int32_t>& list = orders[w];
    if (next_[w] != list.size()) cost.complete = false;
    span_[w] = 0;
    if (list.empty() || !cost.complete) continue;
    span_[w] = end_[list.back()] - start_[list.front()];
    if (peak_[w] > model_.Limit(w)) cost.fits_memory = false;
    cost.makespan = std::max(cost.makespan, span_[w]);
  }
  if (!cost.complete) {
    cost.makespan = std::numeric_limits<double>::infinity();
  }
  return cost;
}

Schedule ToSchedule(const PassModel& model, const Orders& orders,
                    const char* name, int chunks) {
  Schedule schedule;
  schedule.name = name;
  schedule.stages = model.stages();
  schedule.chunks = chunks;
  schedule.microbatches = model.microbatches();
  schedule.stage_of = model.owner();
  schedule.actions.resize(model.stages());
  static constexpr PassKind kKinds[] = {PassKind::kF, PassKind::kB,
                                        PassKind::kW};
  for (int w = 0; w < model.stages(); ++w) {
    schedule.actions[w].reserve(orders[w].size());
    for (int32_t id : orders[w]) {
      schedule.actions[w].push_back({kKinds[model.PassOf(id)],
                                     VirtualStage(model.VirtualStageOf(id)),
                                     model.MicrobatchOf(id)});
    }
  }
  return schedule;
}

bool FromSchedule(const PassModel& model, const Schedule& schedule,
                  Orders* orders) {
  orders->assign(schedule.actions.size(), {});
  for (size_t w = 0; w < schedule.actions.size(); ++w) {
    for (const Action& a : schedule.actions[w]) {
      if (a.kind == PassKind::kBW || a.kind == PassKind::kReduce || IsVocabularyPass(a.kind) ||
          a.bucket != kAllBuckets) {
        return false;
      }
      const Pass pass = a.kind == PassKind::kF   ? kF
                        : a.kind == PassKind::kB ? kB
                                                 : kW;
      (*orders)[w].push_back(model.Id(pass, a.virtual_stage.value(), a.microbatch));
    }
  }
  return true;
}

}  // namespace zbpp::sched::internal
