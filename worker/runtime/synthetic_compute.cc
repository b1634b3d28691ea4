#include "worker/runtime/synthetic_compute.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

// SplitMix64: a stateless hash, so a pass's noise depends on the pass alone
// and not on the order in which stages draw it.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1] for (seed, step, pass, stage, microbatch).
double Noise(uint64_t seed, int64_t step, const sched::Action& a) {
  uint64_t h = Mix(seed);
  h = Mix(h ^ static_cast<uint64_t>(step));
  h = Mix(h ^ static_cast<uint64_t>(a.kind));
  h = Mix(h ^ static_cast<uint64_t>(a.virtual_stage.value()));
  h = Mix(h ^ static_cast<uint64_t>(a.microbatch));
  h = Mix(h ^ static_cast<uint64_t>(a.bucket + 1));
  return 2.0 * (static_cast<double>(h >> 11) / 9007199254740992.0) - 1.0;
}

}  // namespace

double SyntheticPassSeconds(const SyntheticCompute& synthetic, const sched::Action& a,
                            int64_t step, int buckets, int stage) {
  const sched::VirtualStageCost& cost = synthetic.stages[a.virtual_stage.value()];
  double seconds = 0;
  switch (a.kind) {
    case sched::PassKind::kF:
      seconds = cost.f_seconds;
      break;
    case sched::PassKind::kB:
      seconds = cost.b_seconds;
      break;
    case sched::PassKind::kW:
      seconds = a.bucket == sched::kAllBuckets ? cost.w_seconds
                                               : cost.w_seconds / std::max(buckets, 1);
      break;
    case sched::PassKind::kBW:
      seconds = sched::FusedBackwardSeconds(cost);
      break;
    case sched::PassKind::kReduce:
      return 0;
    case sched::PassKind::kS:
      seconds = synthetic.vocabulary[static_cast<size_t>(stage)].s_seconds;
      break;
    case sched::PassKind::kT:
      seconds = synthetic.vocabulary[static_cast<size_t>(stage)].t_seconds;
      break;
  }
  if (synthetic.noise > 0) {
    // S and T of one microbatch run on every stage: the stage is part of the draw.
    const uint64_t seed =
        sched::IsVocabularyPass(a.kind) ? synthetic.seed ^ (0x9e3779b97f4a7c15ULL * (stage + 1))
                                        : synthetic.seed;
    seconds *= 1 + synthetic.noise * Noise(seed, step, a);
  }
  return seconds;
}

absl::StatusOr<SyntheticCompute> SyntheticFromCostModel(const v1::CostModel& cost_model,
                                                         int num_stages,
                                                         const SyntheticComputeSource& source) {
  if (!(source.scale > 0) || !std::isfinite(source.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic compute: scale ", source.scale, " must be > 0"));
  }
  SyntheticCompute synthetic;
  synthetic.noise = source.noise;
  synthetic.seed = source.seed;
  for (const v1::VirtualStageCost& c : cost_model.virtual_stages()) {
    sched::VirtualStageCost cost;
    cost.f_seconds = c.f_seconds() * source.scale;
    cost.b_seconds = c.b_seconds() * source.scale;
    cost.w_seconds = c.w_seconds() * source.scale;
    cost.bw_seconds = c.bw_seconds() * source.scale;
    cost.m_b_bytes = c.m_b_bytes();
    cost.m_w_bytes = c.m_w_bytes();
    synthetic.stages.push_back(cost);
  }
  for (const v1::VocabularyCost& c : cost_model.vocabulary()) {
    sched::VocabularyCost cost;
    cost.s_seconds = c.s_seconds() * source.scale;
    cost.t_seconds = c.t_seconds() * source.scale;
    cost.m_bytes = c.m_bytes();
    cost.transient_bytes = c.transient_bytes();
    synthetic.vocabulary.push_back(cost);
  }
  if (absl::Status st = CheckSyntheticCompute(synthetic, num_stages); !st.ok()) return st;
  return synthetic;
}

absl::Status CheckSyntheticCompute(const SyntheticCompute& synthetic, int num_stages) {
  if (static_cast<int>(synthetic.stages.size()) != num_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic compute has costs for ", synthetic.stages.size(),
                     " virtual stages, the schedule has ", num_stages));
  }
  for (size_t s = 0; s < synthetic.stages.size(); ++s) {
    const sched::VirtualStageCost& c = synthetic.stages[s];
    for (double t : {c.f_seconds, c.b_seconds, c.w_seconds}) {
      if (!std::isfinite(t) || t < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "synthetic compute: virtual stage ", s, " has a pass time ", t,
            " s; pass times are finite and >= 0"));
      }
    }
  }
  for (size_t s = 0; s < synthetic.vocabulary.size(); ++s) {
    const sched::VocabularyCost& c = synthetic.vocabulary[s];
    for (double t : {c.s_seconds, c.t_seconds}) {
      if (!std::isfinite(t) || t < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "synthetic compute: stage ", s, " has a vocabulary pass time ", t,
            " s; pass times are finite and >= 0"));
      }
    }
  }
  if (!(synthetic.noise >= 0 && synthetic.noise < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic compute: noise ", synthetic.noise, " is outside [0, 1)"));
  }
  return absl::OkStatus();
}

}  // namespace zbpp::worker
