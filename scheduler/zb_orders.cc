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
    : workers_(problem.workers),
      stages_(problem.num_stages()),
      microbatches_(problem.microbatches),
      comm_(problem.comm_seconds),
      owner_(std::move(owner)),
      stages_of_(problem.workers),
      duration_(3 * stages_),
      memory_delta_(3 * stages_),
      limit_(problem.workers) {
  for (int s = 0; s < stages_; ++s) {
    const StageCost& c = problem.stages[s];
    duration_[kF * stages_ + s] = c.f_seconds;
    duration_[kB * stages_ + s] = c.b_seconds;
    duration_[kW * stages_ + s] = c.w_seconds;
    memory_delta_[kF * stages_ + s] = c.m_b_bytes;
    memory_delta_[kB * stages_ + s] = -(c.m_b_bytes - c.m_w_bytes);
    memory_delta_[kW * stages_ + s] = -c.m_w_bytes;
    stages_of_[owner_[s]].push_back(s);
  }
  for (int w = 0; w < workers_; ++w) {
    const double limit = problem.limit_of(w);
    limit_[w] = std::isinf(limit) ? limit : limit * (1 + kSlack);
  }
  cross_dep_.assign(num_ids(), -1);
  cross_hop_.assign(num_ids(), 0.0);
  id_duration_.assign(num_ids(), 0.0);
  id_memory_.assign(num_ids(), 0.0);
  consumer_.assign(num_ids(), -1);
  for (int32_t id = 0; id < num_ids(); ++id) {
    const Pass pass = PassOf(id);
    const int stage = StageOf(id);
    const int mb = MicrobatchOf(id);
    id_duration_[id] = Duration(pass, stage);
    id_memory_[id] = MemoryDelta(pass, stage);
    const int to = pass == kF ? stage + 1 : pass == kB ? stage - 1 : -1;
    if (to >= 0 && to < stages_ && owner_[to] != owner_[stage]) {
      consumer_[id] = owner_[to];
    }
    int from = -1;
    if (pass == kF && stage > 0) from = stage - 1;
    if (pass == kB && stage + 1 < stages_) from = stage + 1;
    if (from < 0) continue;
    cross_dep_[id] = Id(pass, from, mb);
    cross_hop_[id] = Hop(from, stage);
  }
}


bool OrderCost::BetterThan(const OrderCost& other) const {
  if (complete != other.complete) return complete;
  if (makespan < other.makespan - kSlack * (1 + other.makespan)) return true;
  if (makespan > other.makespan + kSlack * (1 + other.makespan)) return false;
  return span_sum < other.span_sum - kSlack * (1 + other.span_sum);
}

Evaluator::Evaluator(const PassModel& model)
    : model_(model),
      start_(model.num_ids()),
      end_(model.num_ids()),
      span_(model.workers()),
      peak_(model.workers()),
      free_at_(model.workers()),
      next_(model.workers()),
      queued_(model.workers()) {}

OrderCost Evaluator::Run(const Orders& orders) {
  // The simulator's algorithm (simulator.cc): advance each worker through
  // its order while the next pass's inputs are done; a worker that blocks
  // is revisited when the pass it waits for finishes.
  const int p = model_.workers();
  std::fill(end_.begin(), end_.end(), kNotDone);
  std::fill(free_at_.begin(), free_at_.end(), 0.0);
  std::fill(next_.begin(), next_.end(), 0);
  ready_.clear();
  for (int w = 0; w < p; ++w) {
    ready_.push_back(w);
    queued_[w] = 1;
  }
  size_t head = 0;
  while (head < ready_.size()) {
    const int w = ready_[head++];
    queued_[w] = 0;
    const std::vector<int32_t>& list = orders[w];
    while (next_[w] < list.size()) {
      const int32_t id = list[next_[w]];
      double begin = free_at_[w];
      const int32_t dep = model_.CrossDependency(id);
      if (dep >= 0) {
        const double dep_end = end_[dep];
        if (dep_end == kNotDone) break;
        begin = std::max(begin, dep_end + model_.CrossHop(id));
      }
      // The same-stage dependencies (own F for B, own B for W) precede this
      // pass in the worker's order, so free_at_ already covers them.
      start_[id] = begin;
      end_[id] = begin + model_.Duration(id);
      free_at_[w] = end_[id];
      ++next_[w];
      const int other = model_.Consumer(id);
      if (other >= 0 && !queued_[other]) {
        queued_[other] = 1;
        ready_.push_back(other);
      }
    }
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
    peak_[w] = 0;
    if (list.empty() || !cost.complete) continue;
    span_[w] = end_[list.back()] - start_[list.front()];
    double memory = 0;
    for (int32_t id : list) {
      memory += model_.MemoryDelta(id);
      peak_[w] = std::max(peak_[w], memory);
    }
    if (peak_[w] > model_.Limit(w)) cost.fits_memory = false;
    cost.makespan = std::max(cost.makespan, span_[w]);
    cost.span_sum += span_[w];
  }
  if (!cost.complete) {
    cost.makespan = cost.span_sum = std::numeric_limits<double>::infinity();
  }
  return cost;
}

double PeakMemory(const PassModel& model, const std::vector<int32_t>& order) {
  double memory = 0, peak = 0;
  for (int32_t id : order) {
    memory += model.MemoryDelta(id);
    peak = std::max(peak, memory);
  }
  return peak;
}

Schedule ToSchedule(const PassModel& model, const Orders& orders,
                    const char* name, int chunks) {
  Schedule schedule;
  schedule.name = name;
  schedule.workers = model.workers();
  schedule.chunks = chunks;
  schedule.microbatches = model.microbatches();
  schedule.worker_of_stage = model.owner();
  schedule.actions.resize(model.workers());
  static constexpr PassKind kKinds[] = {PassKind::kF, PassKind::kB,
                                        PassKind::kW};
  for (int w = 0; w < model.workers(); ++w) {
    schedule.actions[w].reserve(orders[w].size());
    for (int32_t id : orders[w]) {
      schedule.actions[w].push_back(
          {kKinds[model.PassOf(id)], model.StageOf(id), model.MicrobatchOf(id)});
    }
  }
  return schedule;
}

bool FromSchedule(const PassModel& model, const Schedule& schedule,
                  Orders* orders) {
  orders->assign(schedule.actions.size(), {});
  for (size_t w = 0; w < schedule.actions.size(); ++w) {
    for (const Action& a : schedule.actions[w]) {
      if (a.kind == PassKind::kBW) return false;
      const Pass pass = a.kind == PassKind::kF   ? kF
                        : a.kind == PassKind::kB ? kB
                                                 : kW;
      (*orders)[w].push_back(model.Id(pass, a.stage, a.microbatch));
    }
  }
  return true;
}

}  // namespace zbpp::sched::internal
