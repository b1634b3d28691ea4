#ifndef ZBPP_COORDINATOR_CORE_LAYOUT_PARTS_H_
#define ZBPP_COORDINATOR_CORE_LAYOUT_PARTS_H_

// The layout parts (docs/training.md, "Uneven stages"): what the workers
// profile of the model cut into three virtual stages at the first
// calibration, and the costs of any layout built from them.

#include <optional>
#include <string>
#include <vector>

#include "scheduler/problem.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// The most blocks a layout part holds (LayoutPartBlocks).
inline constexpr int kMaxLayoutPartBlocks = 4;

/// How many blocks each of the three layout parts holds when the workers
/// profile them (worker.proto Assignment.layout_part_blocks): the blocks an
/// average one of the schedule's `virtual_stages` holds (model.layers /
/// virtual_stages), at least 1 and at most kMaxLayoutPartBlocks. A block
/// costs more among other blocks than alone (its neighbours' weights and
/// activations compete for the caches): on the demo's Llama on one CPU core
/// 7.7 ms per microbatch alone, 8.2–8.3 ms in a chunk of 3 or more, while
/// the head costs the same either way (bench/results/calibration.md, "A
/// block among blocks"). The cap bounds the profile's extra memory, one part
/// at a time. Pure.
int LayoutPartBlocks(const zbpp::v1::JobSpec& spec, int virtual_stages);

/// What a stage's workers profiled of the model's parts (worker.proto
/// ReportProfileRequest.layout_parts: the model cut into three virtual
/// stages of LayoutPartBlocks blocks each), per microbatch: T_F, T_B, T_W,
/// T_BW seconds and M_B, M_W bytes of each part.
struct StagePartCosts {
  /// One transformer block: part 1 over its blocks.
  sched::VirtualStageCost block;
  /// The token embedding: part 0 minus part 1, each field at least 0 (a
  /// difference of medians may come out below).
  sched::VirtualStageCost embedding;
  /// The final norm, the LM head and the loss: part 2 minus part 1, each
  /// field at least 0.
  sched::VirtualStageCost head;
  // transient_bytes (a pass's working memory: a peak, not a sum) is each
  // part's own, the embedding's and the head's with their block; a virtual
  // stage's is the largest of its parts'.
};

/// StagePartCosts from the three profiled parts (`parts[k]`: virtual stage
/// k of the three) of `blocks` blocks each (>= 1). bw_seconds stays 0 (T_B +
/// T_W) unless every part measured it. Pure.
StagePartCosts PartCostsOf(const std::vector<sched::VirtualStageCost>& parts, int blocks);

/// The cost of a virtual stage built from `parts` (one stage's): `blocks`
/// blocks, plus the embedding when `embedding` (the first virtual stage)
/// and the head when `head` (the last, unless the head is split by
/// vocabulary); times and M_B/M_W summed, transient_bytes the largest
/// part's, reduce_seconds 0. What ChooseProfiledLayout plans and
/// BetterMeasuredLayout predicts with. Pure.
sched::VirtualStageCost PartsCost(const StagePartCosts& parts, int blocks, bool embedding,
                                  bool head);

/// What a layout was planned from, for its reason: T_F + T_B + T_W per
/// microbatch of a block (its range over the stages when they differ) and
/// of the head on stage `head_stage`, with the head in that stage's blocks,
/// e.g. "; profiled per microbatch: a block 8.38 ms, the head 38 ms (4.53
/// blocks)". Requires head_stage in [0, stages.size()). Pure.
std::string PartsText(const std::vector<StagePartCosts>& stages, int head_stage);

/// Each stage's measured work (T_F + T_B + T_W of its virtual stages in
/// `measured`, whose virtual stages `stage_of` places; spec.pipeline's
/// layout is theirs) over what its `parts` predict for that layout, by
/// stage. nullopt when the sizes do not match or a stage has no work.
/// Thread-safe (pure).
std::optional<std::vector<double>> MeasuredOverParts(const zbpp::v1::JobSpec& spec,
                                                     const std::vector<StagePartCosts>& parts,
                                                     const sched::Problem& measured,
                                                     const std::vector<int>& stage_of);

/// How far apart a stage's calibration profile and its layout parts may
/// read (MeasuredOverParts, either way) for the calibration to plan a layout
/// from the parts: the stage profile's own spread (its step predictions
/// 0.86–1.08× of the steps on the demo) stays within it, while parts
/// profiled right after a long build on the same host read the demo's
/// block at 1.65× its steps' cost and chose [5, 3], which its report then
/// measured 1.20× slower than [6, 2] (bench/results/calibration.md, "Parts
/// that disagree").
inline constexpr double kMaxPartsDisagreement = 1.25;

/// Why the calibration must not plan a layout from `parts`: e.g. "stage 0's
/// profile reads 0.59x what its layout parts predict, beyond 1.25x either
/// way" for the first stage whose MeasuredOverParts is beyond
/// kMaxPartsDisagreement; nullopt when every stage agrees, or when they
/// cannot be compared. Thread-safe (pure).
std::optional<std::string> PartsDisagreement(const zbpp::v1::JobSpec& spec,
                                             const std::vector<StagePartCosts>& parts,
                                             const sched::Problem& measured,
                                             const std::vector<int>& stage_of);

/// `parts` (by stage) with each stage's times scaled by MeasuredOverParts;
/// M_B and M_W stay. So the parts keep
/// their proportions (a block, the embedding, the head) on each stage, and
/// take their scale from what that stage's own chunks measured in steps
/// (BetterMeasuredLayout, docs/training.md "Layout drift"). nullopt when
/// the sizes do not match or a stage has no work. Thread-safe (pure).
std::optional<std::vector<StagePartCosts>> PartsScaledToMeasured(
    const zbpp::v1::JobSpec& spec, const std::vector<StagePartCosts>& parts,
    const sched::Problem& measured, const std::vector<int>& stage_of);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_LAYOUT_PARTS_H_
