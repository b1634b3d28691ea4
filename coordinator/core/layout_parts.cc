#include "coordinator/core/layout_parts.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "api/pipeline_shape.h"

namespace zbpp::coordinator {

using zbpp::v1::JobSpec;

int LayoutPartBlocks(const zbpp::v1::JobSpec& spec, int virtual_stages) {
  return std::clamp(spec.model().layers() / std::max(1, virtual_stages), 1,
                    kMaxLayoutPartBlocks);
}

sched::VirtualStageCost PartsCost(const StagePartCosts& parts, int blocks, bool embedding,
                                  bool head) {
  sched::VirtualStageCost cost{0, 0, 0, 0, 0};
  auto add = [&cost](const sched::VirtualStageCost& part, double times) {
    cost.f_seconds += times * part.f_seconds;
    cost.b_seconds += times * part.b_seconds;
    cost.w_seconds += times * part.w_seconds;
    cost.bw_seconds += times * part.bw_seconds;
    cost.m_b_bytes += times * part.m_b_bytes;
    cost.m_w_bytes += times * part.m_w_bytes;
  };
  add(parts.block, blocks);
  if (embedding) add(parts.embedding, 1);
  if (head) add(parts.head, 1);
  // The largest pass's working memory among the virtual stage's parts.
  cost.transient_bytes = std::max({parts.block.transient_bytes,
                                   embedding ? parts.embedding.transient_bytes : 0.0,
                                   head ? parts.head.transient_bytes : 0.0});
  return cost;
}

StagePartCosts PartCostsOf(const std::vector<sched::VirtualStageCost>& parts, int blocks) {
  const sched::VirtualStageCost& middle = parts.at(1);
  auto minus = [&middle](const sched::VirtualStageCost& part) {
    sched::VirtualStageCost extra;
    extra.f_seconds = std::max(0.0, part.f_seconds - middle.f_seconds);
    extra.b_seconds = std::max(0.0, part.b_seconds - middle.b_seconds);
    extra.w_seconds = std::max(0.0, part.w_seconds - middle.w_seconds);
    extra.bw_seconds = std::max(0.0, part.bw_seconds - middle.bw_seconds);
    extra.m_b_bytes = std::max(0.0, part.m_b_bytes - middle.m_b_bytes);
    extra.m_w_bytes = std::max(0.0, part.m_w_bytes - middle.m_w_bytes);
    return extra;
  };
  // One block: the middle part's times and held bytes over its blocks; its
  // working memory, a pass's peak, stays the part's.
  sched::VirtualStageCost block = middle;
  const double k = std::max(1, blocks);
  block.f_seconds /= k;
  block.b_seconds /= k;
  block.w_seconds /= k;
  block.bw_seconds /= k;
  block.m_b_bytes /= k;
  block.m_w_bytes /= k;
  StagePartCosts costs{block, minus(parts.at(0)), minus(parts.at(2))};
  // Working memory is a pass's peak, not a sum: each part keeps its own.
  costs.embedding.transient_bytes = parts[0].transient_bytes;
  costs.head.transient_bytes = parts[2].transient_bytes;
  if (parts[0].bw_seconds <= 0 || parts[1].bw_seconds <= 0 || parts[2].bw_seconds <= 0) {
    costs.block.bw_seconds = costs.embedding.bw_seconds = costs.head.bw_seconds = 0;
  }
  return costs;
}

std::string PartsText(const std::vector<StagePartCosts>& stages, int head_stage) {
  auto ms = [](const sched::VirtualStageCost& c) {
    return 1e3 * (c.f_seconds + c.b_seconds + c.w_seconds);
  };
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const StagePartCosts& stage : stages) {
    lo = std::min(lo, ms(stage.block));
    hi = std::max(hi, ms(stage.block));
  }
  const std::string block = absl::StrFormat("%.3g", lo) == absl::StrFormat("%.3g", hi)
                                ? absl::StrFormat("%.3g", lo)
                                : absl::StrFormat("%.3g–%.3g", lo, hi);
  const StagePartCosts& last = stages.at(head_stage);
  const double head = ms(last.head);
  const double per_block = ms(last.block);
  return absl::StrFormat("; profiled per microbatch: a block %s ms, the head %.3g ms (%.3g blocks)",
                         block, head, per_block > 0 ? head / per_block : 0.0);
}

std::optional<std::vector<double>> MeasuredOverParts(const JobSpec& spec,
                                                     const std::vector<StagePartCosts>& parts,
                                                     const sched::Problem& measured,
                                                     const std::vector<int>& stage_of) {
  const int p = spec.pipeline().stages();
  const int n = measured.num_virtual_stages();
  if (static_cast<int>(parts.size()) != p || static_cast<int>(stage_of.size()) != n) {
    return std::nullopt;
  }
  const std::vector<int> layout = BlocksPerVirtualStage(spec.pipeline(), spec.model().layers(), n);
  const bool vocab_parallel = spec.pipeline().vocab_parallel();
  auto total = [](const sched::VirtualStageCost& c) {
    return c.f_seconds + c.b_seconds + c.w_seconds;
  };
  std::vector<double> measured_work(p, 0), predicted_work(p, 0);
  for (int k = 0; k < n; ++k) {
    const int s = stage_of[k];
    if (s < 0 || s >= p) return std::nullopt;
    measured_work[s] += total(measured.virtual_stages[k]);
    predicted_work[s] += total(PartsCost(parts[s], layout[k], k == 0 && !vocab_parallel,
                                         k == n - 1 && !vocab_parallel));
  }
  std::vector<double> ratios(p);
  for (int s = 0; s < p; ++s) {
    if (!(predicted_work[s] > 0) || !(measured_work[s] > 0)) return std::nullopt;
    ratios[s] = measured_work[s] / predicted_work[s];
  }
  return ratios;
}

std::optional<std::string> PartsDisagreement(const JobSpec& spec,
                                             const std::vector<StagePartCosts>& parts,
                                             const sched::Problem& measured,
                                             const std::vector<int>& stage_of) {
  const std::optional<std::vector<double>> ratios =
      MeasuredOverParts(spec, parts, measured, stage_of);
  if (!ratios.has_value()) return std::nullopt;
  for (size_t s = 0; s < ratios->size(); ++s) {
    const double r = (*ratios)[s];
    if (r > kMaxPartsDisagreement || r < 1 / kMaxPartsDisagreement) {
      return absl::StrFormat(
          "stage %d's profile reads %.2fx what its layout parts predict, beyond %.2fx either way",
          s, r, kMaxPartsDisagreement);
    }
  }
  return std::nullopt;
}

std::optional<std::vector<StagePartCosts>> PartsScaledToMeasured(
    const JobSpec& spec, const std::vector<StagePartCosts>& parts,
    const sched::Problem& measured, const std::vector<int>& stage_of) {
  const std::optional<std::vector<double>> ratios =
      MeasuredOverParts(spec, parts, measured, stage_of);
  if (!ratios.has_value()) return std::nullopt;
  std::vector<StagePartCosts> scaled = parts;
  for (size_t s = 0; s < scaled.size(); ++s) {
    for (sched::VirtualStageCost* c : {&scaled[s].block, &scaled[s].embedding, &scaled[s].head}) {
      c->f_seconds *= (*ratios)[s];
      c->b_seconds *= (*ratios)[s];
      c->w_seconds *= (*ratios)[s];
      c->bw_seconds *= (*ratios)[s];
    }
  }
  return scaled;
}

}  // namespace zbpp::coordinator
