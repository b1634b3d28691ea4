#include "coordinator/core/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::coordinator {
namespace {

absl::Status CheckSeconds(double seconds, const std::string& what) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a finite number >= 0, got ", seconds));
  }
  return absl::OkStatus();
}

// Appends `value`, dropping the oldest entries beyond `window`.
template <typename T>
void PushToWindow(std::deque<T>& samples, T value, int window) {
  samples.push_back(std::move(value));
  while (static_cast<int>(samples.size()) > window) samples.pop_front();
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

namespace {

// Median of one window of samples; 0 for an empty one.
double WindowMedian(const std::deque<double>& window) {
  return Median(std::vector<double>(window.begin(), window.end()));
}

}  // namespace

absl::StatusOr<std::vector<VirtualStageTiming>> AverageStepPasses(
    absl::Span<const MeasuredPass> passes, const sched::Problem& base) {
  struct Sums {
    double f = 0, b = 0, w = 0, bw = 0, reduce = 0;
    int nf = 0, nb = 0, nw = 0, nbw = 0, nreduce = 0;
  };
  std::map<int, Sums> per_stage;
  for (const MeasuredPass& pass : passes) {
    if (pass.virtual_stage < 0 || pass.virtual_stage >= base.num_virtual_stages()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measured pass of virtual stage ", pass.virtual_stage, " outside [0, ",
                       base.num_virtual_stages(), ")"));
    }
    if (absl::Status st = CheckSeconds(
            pass.seconds, absl::StrCat("virtual stage ", pass.virtual_stage, " pass time"));
        !st.ok()) {
      return st;
    }
    Sums& sums = per_stage[pass.virtual_stage];
    switch (pass.kind) {
      case sched::PassKind::kF:
        sums.f += pass.seconds, ++sums.nf;
        break;
      case sched::PassKind::kB:
        sums.b += pass.seconds, ++sums.nb;
        break;
      case sched::PassKind::kW:
        sums.w += pass.seconds, ++sums.nw;
        break;
      case sched::PassKind::kBW:
        sums.bw += pass.seconds, ++sums.nbw;
        break;
      case sched::PassKind::kReduce:
        sums.reduce += pass.seconds, ++sums.nreduce;
        break;
      case sched::PassKind::kS:
      case sched::PassKind::kT:
        // A stage's own vocabulary passes (AddVocabularyTiming).
        return absl::InvalidArgumentError(
            "vocabulary passes are measured per stage, not per virtual stage");
    }
  }
  std::vector<VirtualStageTiming> timings;
  for (const auto& [stage, sums] : per_stage) {
    if (sums.nf == 0) continue;
    VirtualStageTiming timing{stage, sums.f / sums.nf, 0, 0, std::nullopt};
    if (sums.nreduce > 0) timing.reduce_seconds = sums.reduce / sums.nreduce;
    if (sums.nbw > 0) timing.bw_seconds = sums.bw / sums.nbw;
    if (sums.nb > 0 && sums.nw > 0) {
      timing.b_seconds = sums.b / sums.nb;
      timing.w_seconds = sums.w / sums.nw;
    } else if (sums.nbw > 0) {
      const sched::VirtualStageCost& prior = base.virtual_stages[stage];
      const double total = prior.b_seconds + prior.w_seconds;
      const double b_share = total > 0 ? prior.b_seconds / total : 0.5;
      const double bw = sums.bw / sums.nbw;
      timing.b_seconds = bw * b_share;
      timing.w_seconds = bw - timing.b_seconds;
    } else {
      continue;  // An incomplete stage would bias the medians.
    }
    timings.push_back(timing);
  }
  return timings;
}

namespace {

// The F/B/W units `action` stands for: PassSeconds under a cost of one
// second per F, B and W (BW 2, a bucket's W 1/K, a reduction 0).
double PassUnits(const sched::Action& action, int buckets) {
  sched::VirtualStageCost unit;
  unit.f_seconds = unit.b_seconds = unit.w_seconds = 1;
  unit.reduce_seconds = 0;
  return sched::PassSeconds(unit, action, buckets);
}

}  // namespace

double PassOverheadSeconds(const sched::Schedule& schedule, int stage, double overhead_seconds) {
  if (stage < 0 || stage >= static_cast<int>(schedule.actions.size())) return 0;
  const std::vector<int> buckets = sched::BucketsPerVirtualStage(schedule);
  double units = 0;
  for (const sched::Action& a : schedule.actions[stage]) {
    units += PassUnits(a, buckets[a.virtual_stage.value()]);
  }
  return units > 0 ? overhead_seconds / units : 0;
}

void CountOverheadAsIdle(const sched::Schedule& schedule,
                         absl::Span<const double> overhead_per_virtual_stage,
                         sched::SimulationResult& sim) {
  if (overhead_per_virtual_stage.empty()) return;
  const std::vector<int> buckets = sched::BucketsPerVirtualStage(schedule);
  double busy_total = 0;
  const int p = static_cast<int>(sim.busy_seconds.size());
  for (int w = 0; w < p && w < static_cast<int>(schedule.actions.size()); ++w) {
    for (const sched::Action& a : schedule.actions[w]) {
      const int vs = a.virtual_stage.value();
      if (vs >= static_cast<int>(overhead_per_virtual_stage.size())) continue;
      sim.busy_seconds[w] -= overhead_per_virtual_stage[vs] * PassUnits(a, buckets[vs]);
    }
    sim.busy_seconds[w] = std::max(0.0, sim.busy_seconds[w]);
    sim.idle_seconds[w] = sim.makespan_seconds - sim.busy_seconds[w];
    busy_total += sim.busy_seconds[w];
  }
  sim.bubble_rate = sim.makespan_seconds > 0 && p > 0
                        ? std::max(0.0, 1.0 - busy_total / (p * sim.makespan_seconds))
                        : 0.0;
}

absl::StatusOr<std::unique_ptr<CostModel>> CostModel::Create(Options options) {
  if (options.num_virtual_stages < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CostModel num_virtual_stages must be >= 1, got ", options.num_virtual_stages));
  }
  if (options.window_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CostModel window_steps must be >= 1, got ", options.window_steps));
  }
  return std::unique_ptr<CostModel>(new CostModel(options));
}

CostModel::CostModel(Options options)
    : options_(options),
      virtual_stage_samples_(options.num_virtual_stages),
      reduce_samples_(options.num_virtual_stages),
      hop_samples_(std::max(0, options.num_virtual_stages - 1)),
      overhead_samples_(options.num_virtual_stages),
      memory_(options.num_virtual_stages) {}

absl::Status CostModel::AddVirtualStageTiming(const VirtualStageTiming& timing) {
  if (timing.virtual_stage < 0 || timing.virtual_stage >= options_.num_virtual_stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "virtual stage ", timing.virtual_stage, " outside [0, ", options_.num_virtual_stages, ")"));
  }
  const std::string at = absl::StrCat("virtual stage ", timing.virtual_stage, " ");
  for (auto [value, name] : {std::pair{timing.f_seconds, "f_seconds"},
                             std::pair{timing.b_seconds, "b_seconds"},
                             std::pair{timing.w_seconds, "w_seconds"}}) {
    if (absl::Status st = CheckSeconds(value, at + name); !st.ok()) return st;
  }
  if (timing.reduce_seconds.has_value()) {
    if (absl::Status st = CheckSeconds(*timing.reduce_seconds, at + "reduce_seconds");
        !st.ok()) {
      return st;
    }
  }
  absl::MutexLock lock(&mu_);
  PushToWindow(virtual_stage_samples_[timing.virtual_stage], timing, options_.window_steps);
  if (timing.reduce_seconds.has_value()) {
    PushToWindow(reduce_samples_[timing.virtual_stage], *timing.reduce_seconds,
                 options_.window_steps);
  }
  return absl::OkStatus();
}

absl::Status CostModel::AddHopTiming(const HopTiming& timing) {
  if (timing.hop < 0 || timing.hop >= options_.num_virtual_stages - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hop ", timing.hop, " outside [0, ", options_.num_virtual_stages - 1, ")"));
  }
  if (absl::Status st = CheckSeconds(
          timing.seconds, absl::StrCat("hop ", timing.hop, " seconds"));
      !st.ok()) {
    return st;
  }
  absl::MutexLock lock(&mu_);
  PushToWindow(hop_samples_[timing.hop], timing.seconds, options_.window_steps);
  return absl::OkStatus();
}

absl::Status CostModel::AddPassOverhead(int virtual_stage, double seconds) {
  if (virtual_stage < 0 || virtual_stage >= options_.num_virtual_stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "virtual stage ", virtual_stage, " outside [0, ", options_.num_virtual_stages, ")"));
  }
  if (absl::Status st = CheckSeconds(
          seconds, absl::StrCat("virtual stage ", virtual_stage, " pass overhead"));
      !st.ok()) {
    return st;
  }
  absl::MutexLock lock(&mu_);
  PushToWindow(overhead_samples_[virtual_stage], seconds, options_.window_steps);
  return absl::OkStatus();
}

std::vector<double> CostModel::PassOverheads() const {
  absl::MutexLock lock(&mu_);
  std::vector<double> medians;
  for (const std::deque<double>& window : overhead_samples_) {
    medians.push_back(WindowMedian(window));
  }
  return medians;
}

absl::Status CostModel::SetMeasuredMemory(int virtual_stage, double m_b_bytes,
                                          double m_w_bytes, double transient_bytes) {
  if (virtual_stage < 0 || virtual_stage >= options_.num_virtual_stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "virtual stage ", virtual_stage, " outside [0, ", options_.num_virtual_stages, ")"));
  }
  const std::string at = absl::StrCat("virtual stage ", virtual_stage, " ");
  if (absl::Status st = CheckSeconds(m_b_bytes, at + "m_b_bytes"); !st.ok()) return st;
  if (absl::Status st = CheckSeconds(m_w_bytes, at + "m_w_bytes"); !st.ok()) return st;
  if (absl::Status st = CheckSeconds(transient_bytes, at + "transient_bytes"); !st.ok()) {
    return st;
  }
  if (m_w_bytes > m_b_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(at, "m_w_bytes ", m_w_bytes,
                                                   " is above m_b_bytes ", m_b_bytes));
  }
  absl::MutexLock lock(&mu_);
  sched::VirtualStageCost memory;
  memory.m_b_bytes = m_b_bytes;
  memory.m_w_bytes = m_w_bytes;
  memory.transient_bytes = transient_bytes;
  memory_[virtual_stage] = memory;
  return absl::OkStatus();
}

int CostModel::SampleCount(int stage) const {
  if (stage < 0 || stage >= options_.num_virtual_stages) return 0;
  absl::MutexLock lock(&mu_);
  return static_cast<int>(virtual_stage_samples_[stage].size());
}

double CostModel::Drift() const {
  absl::MutexLock lock(&mu_);
  double drift = 0;
  for (const std::deque<VirtualStageTiming>& window : virtual_stage_samples_) {
    if (window.size() < 2) continue;
    // The oldest half and the newest half (the middle sample of an odd
    // count goes to neither).
    const size_t half = window.size() / 2;
    std::vector<double> oldest, newest;
    for (size_t i = 0; i < half; ++i) {
      const VirtualStageTiming& o = window[i];
      const VirtualStageTiming& n = window[window.size() - 1 - i];
      oldest.push_back(o.f_seconds + o.b_seconds + o.w_seconds);
      newest.push_back(n.f_seconds + n.b_seconds + n.w_seconds);
    }
    const double a = Median(std::move(oldest));
    const double b = Median(std::move(newest));
    const double low = std::min(a, b);
    if (low > 0) drift = std::max(drift, std::max(a, b) / low - 1);
  }
  return drift;
}

absl::Status CostModel::AddVocabularyTiming(int stage, const sched::VocabularyCost& timing) {
  if (stage < 0) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary timing of stage ", stage));
  }
  for (const auto& [seconds, what] :
       {std::pair{timing.s_seconds, "S"}, std::pair{timing.t_seconds, "T"}}) {
    if (absl::Status st = CheckSeconds(seconds, absl::StrCat("stage ", stage, " ", what,
                                                              " pass time"));
        !st.ok()) {
      return st;
    }
  }
  absl::MutexLock lock(&mu_);
  PushToWindow(vocabulary_samples_[stage], timing, options_.window_steps);
  return absl::OkStatus();
}

absl::Status CostModel::SetVocabularyMemory(int stage, double m_bytes, double transient_bytes) {
  if (stage < 0 || !std::isfinite(m_bytes) || m_bytes < 0 || !std::isfinite(transient_bytes) ||
      transient_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("vocabulary memory of stage ", stage, ": ",
                                                   m_bytes, " and ", transient_bytes,
                                                   " bytes; both finite and >= 0"));
  }
  absl::MutexLock lock(&mu_);
  sched::VocabularyCost& memory = vocabulary_memory_[stage];
  memory.m_bytes = m_bytes;
  memory.transient_bytes = transient_bytes;
  return absl::OkStatus();
}

absl::StatusOr<sched::Problem> CostModel::ToProblem(
    const sched::Problem& base) const {
  if (static_cast<int>(base.virtual_stages.size()) != options_.num_virtual_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("base problem has ", base.virtual_stages.size(),
                     " virtual stages; the cost model measures ", options_.num_virtual_stages));
  }
  sched::Problem measured = base;
  absl::MutexLock lock(&mu_);
  for (int s = 0; s < options_.num_virtual_stages; ++s) {
    const std::deque<VirtualStageTiming>& window = virtual_stage_samples_[s];
    if (window.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no timing reported yet for virtual stage ", s, " of ", options_.num_virtual_stages));
    }
    std::vector<double> f, b, w, bw;
    for (const VirtualStageTiming& sample : window) {
      f.push_back(sample.f_seconds);
      b.push_back(sample.b_seconds);
      w.push_back(sample.w_seconds);
      if (sample.bw_seconds > 0) bw.push_back(sample.bw_seconds);
    }
    measured.virtual_stages[s].f_seconds = Median(std::move(f));
    measured.virtual_stages[s].b_seconds = Median(std::move(b));
    measured.virtual_stages[s].w_seconds = Median(std::move(w));
    // T_BW only where measured; otherwise the base's (0: T_B + T_W).
    if (!bw.empty()) measured.virtual_stages[s].bw_seconds = Median(std::move(bw));
    const std::deque<double>& overhead = overhead_samples_[s];
    if (!overhead.empty()) {
      const double o = WindowMedian(overhead);
      measured.virtual_stages[s].f_seconds += o;
      measured.virtual_stages[s].b_seconds += o;
      measured.virtual_stages[s].w_seconds += o;
      // A fused pass stands for a B and a W (PassOverheadSeconds).
      if (measured.virtual_stages[s].bw_seconds > 0) measured.virtual_stages[s].bw_seconds += 2 * o;
    }
    const std::deque<double>& reduce = reduce_samples_[s];
    if (!reduce.empty()) {
      measured.virtual_stages[s].reduce_seconds = WindowMedian(reduce);
    }
    if (memory_[s].has_value()) {
      measured.virtual_stages[s].m_b_bytes = memory_[s]->m_b_bytes;
      measured.virtual_stages[s].m_w_bytes = memory_[s]->m_w_bytes;
      measured.virtual_stages[s].transient_bytes = memory_[s]->transient_bytes;
    }
  }
  double hop_sum = 0;
  int hops = 0;
  for (const std::deque<double>& window : hop_samples_) {
    if (window.empty()) continue;
    hop_sum += WindowMedian(window);
    ++hops;
  }
  if (hops > 0) measured.comm_seconds = hop_sum / hops;
  for (size_t r = 0; r < measured.vocabulary.size(); ++r) {
    sched::VocabularyCost& cost = measured.vocabulary[r];
    if (auto window = vocabulary_samples_.find(static_cast<int>(r));
        window != vocabulary_samples_.end() && !window->second.empty()) {
      std::vector<double> s, t;
      for (const sched::VocabularyCost& sample : window->second) {
        s.push_back(sample.s_seconds);
        t.push_back(sample.t_seconds);
      }
      cost.s_seconds = Median(std::move(s));
      cost.t_seconds = Median(std::move(t));
    }
    if (auto memory = vocabulary_memory_.find(static_cast<int>(r));
        memory != vocabulary_memory_.end()) {
      cost.m_bytes = memory->second.m_bytes;
      cost.transient_bytes = memory->second.transient_bytes;
    }
  }
  return measured;
}

}  // namespace zbpp::coordinator
