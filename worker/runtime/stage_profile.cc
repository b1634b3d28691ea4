#include "worker/runtime/stage_profile.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "worker/model/vocabulary_shard.h"
#include "worker/runtime/device.h"
#include "worker/runtime/passes.h"

namespace zbpp::worker {
namespace {

using SteadyClock = std::chrono::steady_clock;

// The W store's key for the profile's microbatch: no step uses a negative
// one, so the profile never meets a step's queued work.
constexpr int kProfileMicrobatch = -1;

// The median of `values` (the mean of the middle two for an even count).
template <typename T>
T Median(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One repetition's measurements.
struct Sample {
  double seconds[4] = {0, 0, 0, 0};  // F, B, W, and B then W as one BW.
  int64_t m_b_bytes = 0;
  int64_t m_w_bytes = 0;
  int64_t transient_bytes = 0;
};

StageProfile Summarize(int virtual_stage, const std::vector<Sample>& samples) {
  StageProfile profile;
  profile.virtual_stage = virtual_stage;
  double* times[4] = {&profile.f_seconds, &profile.b_seconds, &profile.w_seconds,
                      &profile.bw_seconds};
  for (int k = 0; k < 4; ++k) {
    std::vector<double> values;
    for (const Sample& s : samples) values.push_back(s.seconds[k]);
    *times[k] = Median(std::move(values));
  }
  std::vector<int64_t> m_b, m_w, transient;
  for (const Sample& s : samples) {
    m_b.push_back(s.m_b_bytes);
    m_w.push_back(s.m_w_bytes);
    transient.push_back(s.transient_bytes);
  }
  profile.m_b_bytes = std::max<int64_t>(0, Median(std::move(m_b)));
  profile.m_w_bytes = std::clamp<int64_t>(Median(std::move(m_w)), 0, profile.m_b_bytes);
  profile.transient_bytes = std::max<int64_t>(0, Median(std::move(transient)));
  return profile;
}

// Synthetic compute: each pass waits what a step's would (the noise drawn
// for steps before the first, one per repetition); the memory is the cost
// model's.
StageProfile SyntheticProfile(const StageProfileOptions& o) {
  std::vector<Sample> samples(o.repetitions);
  const sched::PassKind kinds[4] = {sched::PassKind::kF, sched::PassKind::kB,
                                    sched::PassKind::kW, sched::PassKind::kBW};
  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (int k = 0; k < 4; ++k) {
      const sched::Action action{kinds[k], VirtualStage(o.virtual_stage), 0};
      const double wait = SyntheticPassSeconds(*o.synthetic, action, -1 - rep, /*buckets=*/1,
                                                 /*stage=*/0);
      const SteadyClock::time_point begin = SteadyClock::now();
      std::this_thread::sleep_until(begin + std::chrono::duration_cast<SteadyClock::duration>(
                                                std::chrono::duration<double>(wait)));
      samples[rep].seconds[k] =
          std::chrono::duration<double>(SteadyClock::now() - begin).count();
    }
    const sched::VirtualStageCost& cost = o.synthetic->stages[o.virtual_stage];
    samples[rep].m_b_bytes = static_cast<int64_t>(cost.m_b_bytes);
    samples[rep].m_w_bytes = static_cast<int64_t>(cost.m_w_bytes);
    samples[rep].transient_bytes = static_cast<int64_t>(cost.transient_bytes);
  }
  return Summarize(o.virtual_stage, samples);
}

}  // namespace

absl::StatusOr<StageProfile> ProfileVirtualStage(const StageProfileOptions& o) {
  if (o.repetitions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile repetitions must be >= 1, got ", o.repetitions));
  }
  if (o.synthetic != nullptr) {
    if (o.virtual_stage < 0 || o.virtual_stage >= static_cast<int>(o.synthetic->stages.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "virtual stage ", o.virtual_stage, " has no synthetic cost"));
    }
    return SyntheticProfile(o);
  }
  if (o.chunk == nullptr || o.store == nullptr || o.memory == nullptr) {
    return absl::InvalidArgumentError("the profile needs the chunk, its W store and a meter");
  }
  // The first chunk reads tokens, or under vocabulary parallelism their
  // embedding (EmbeddingExchange), a hidden state like the others'.
  const bool first = o.chunk->is_first() && !o.chunk->config().vocab_parallel;
  const bool last = o.chunk->computes_loss();
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  const std::vector<int64_t> tokens_shape{o.microbatch_size, o.seq_len};
  const std::vector<int64_t> hidden_shape{o.microbatch_size, o.seq_len, o.hidden};
  at::Tensor input = first ? at::randint(o.vocab, tokens_shape, gen, at::kLong).to(o.device)
                           : at::randn(hidden_shape, gen, at::kFloat).to(o.device);
  if (!first) input.requires_grad_(true);
  at::Tensor targets;
  if (last) targets = at::randint(o.vocab, tokens_shape, gen, at::kLong).to(o.device);
  at::Tensor grad_output;
  if (!last) grad_output = at::randn(hidden_shape, gen, at::kFloat).to(o.device);

  MemoryMeterScope scope(o.memory->cpu_meter());
  std::vector<Sample> samples;
  for (int rep = -1; rep < o.repetitions; ++rep) {  // -1: the warm-up.
    // Index 3: B and W back to back, the executor's merged pass.
    PassTimer timer(o.device, SteadyClock::now(), 4);
    Sample sample;
    // Each pass's peak above the larger of its two ends (transient_bytes).
    // B and W run as one BW need no window of their own: BW's larger end is
    // B's start, which holds at least as much as either part's larger end.
    const auto transient_of = [&](int64_t start, int64_t end) {
      return o.memory->peak_bytes() - std::max(start, end);
    };
    const int64_t before = o.memory->current_bytes();
    o.memory->ResetPeak();
    timer.Begin(0);
    ForwardState state = ForwardPass(*o.chunk, o.store, kProfileMicrobatch, input, targets,
                                     o.microbatches);
    timer.End(0);
    const int64_t after_f = o.memory->current_bytes();
    sample.m_b_bytes = after_f - before;
    sample.transient_bytes = transient_of(before, after_f);
    o.memory->ResetPeak();
    timer.Begin(1);
    timer.Begin(3);
    // The input gradient goes, as the executor's goes once sent.
    BackwardPass(state, grad_output, o.loss_scale);
    timer.End(1);
    state = ForwardState();
    if (!first) input.mutable_grad().reset();
    const int64_t after_b = o.memory->current_bytes();
    sample.m_w_bytes = after_b - before;
    sample.transient_bytes = std::max(sample.transient_bytes, transient_of(after_f, after_b));
    o.memory->ResetPeak();
    timer.Begin(2);
    if (absl::Status st = o.store->RunW(kProfileMicrobatch); !st.ok()) {
      o.store->Clear();
      return st;
    }
    timer.End(2);
    timer.End(3);
    sample.transient_bytes =
        std::max(sample.transient_bytes, transient_of(after_b, o.memory->current_bytes()));
    for (int k = 0; k < 4; ++k) sample.seconds[k] = timer.Duration(k);
    if (rep >= 0) samples.push_back(sample);
  }
  return Summarize(o.virtual_stage, samples);
}

absl::StatusOr<sched::VocabularyCost> ProfileVocabularyShard(const VocabularyShard* shard,
                                                             int stage, int stages,
                                                             const StageProfileOptions& o) {
  if (o.repetitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("repetitions ", o.repetitions, " < 1"));
  }
  std::vector<double> s_seconds, t_seconds;
  sched::VocabularyCost cost;
  if (o.synthetic != nullptr) {
    if (stage < 0 || stage >= static_cast<int>(o.synthetic->vocabulary.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", stage, " has no synthetic vocabulary cost"));
    }
    for (int rep = 0; rep < o.repetitions; ++rep) {
      for (sched::PassKind kind : {sched::PassKind::kS, sched::PassKind::kT}) {
        const sched::Action action{kind, VirtualStage(0), 0};
        const double wait = SyntheticPassSeconds(*o.synthetic, action, -1 - rep, 1, stage);
        const SteadyClock::time_point begin = SteadyClock::now();
        std::this_thread::sleep_until(begin + std::chrono::duration_cast<SteadyClock::duration>(
                                                  std::chrono::duration<double>(wait)));
        (kind == sched::PassKind::kS ? s_seconds : t_seconds)
            .push_back(std::chrono::duration<double>(SteadyClock::now() - begin).count());
      }
    }
    cost = o.synthetic->vocabulary[stage];
  } else {
    if (shard == nullptr || o.memory == nullptr) {
      return absl::InvalidArgumentError("the profile needs the shard and a meter");
    }
    MemoryMeterScope scope(o.memory->cpu_meter());
    std::vector<double> held, transient;
    at::Generator gen = at::detail::createCPUGenerator(o.seed);
    const at::Tensor hidden =
        at::randn({o.microbatch_size, o.seq_len, o.hidden}, gen, at::kFloat).to(o.device);
    const at::Tensor targets =
        at::randint(o.vocab, {o.microbatch_size, o.seq_len}, gen, at::kLong).to(o.device);
    for (int rep = -1; rep < o.repetitions; ++rep) {  // -1: the warm-up.
      PassTimer timer(o.device, SteadyClock::now(), 2);
      // As ProfileVirtualStage meters a pass: what S leaves held for T, and
      // each pass's peak above the larger of its two ends.
      const int64_t before = o.memory->current_bytes();
      o.memory->ResetPeak();
      at::Tensor statistics;
      double peak_above = 0;
      {
        VocabularyForward state;
        // A fresh input, as a step's S holds the received hidden state.
        const at::Tensor input = hidden.clone();
        timer.Begin(0);
        statistics = shard->Forward(input, targets, &state);
        timer.End(0);
        const int64_t after_s = o.memory->current_bytes();
        peak_above = static_cast<double>(o.memory->peak_bytes() - std::max(before, after_s));
        if (rep >= 0) held.push_back(static_cast<double>(after_s - before));
        o.memory->ResetPeak();
        timer.Begin(1);
        const at::Tensor grad = shard->Backward(
            state, std::vector<at::Tensor>(static_cast<size_t>(stages), statistics),
            o.loss_scale / o.microbatches, nullptr);
        timer.End(1);
        const int64_t after_t = o.memory->current_bytes();
        peak_above = std::max(peak_above, static_cast<double>(o.memory->peak_bytes() -
                                                             std::max(after_s, after_t)));
      }
      std::vector<double> starts(2), ends(2);
      timer.Resolve(starts, ends);
      if (rep < 0) continue;
      s_seconds.push_back(ends[0] - starts[0]);
      t_seconds.push_back(ends[1] - starts[1]);
      transient.push_back(std::max(0.0, peak_above));
    }
    cost.m_bytes = std::max(0.0, Median(std::move(held)));
    cost.transient_bytes = Median(std::move(transient));
  }
  cost.s_seconds = Median(std::move(s_seconds));
  cost.t_seconds = Median(std::move(t_seconds));
  return cost;
}

}  // namespace zbpp::worker
