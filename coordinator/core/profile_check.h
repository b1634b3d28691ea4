#ifndef ZBPP_COORDINATOR_CORE_PROFILE_CHECK_H_
#define ZBPP_COORDINATOR_CORE_PROFILE_CHECK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/cost_model.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/job_spec.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// One virtual stage's activation memory of one microbatch as a worker
/// profiled it (the Zero Bubble paper's M_B and M_W, §2, and the passes'
/// working memory, sched::VirtualStageCost::transient_bytes), bytes.
struct VirtualStageMemory {
  int virtual_stage = 0;
  double m_b_bytes = 0;
  double m_w_bytes = 0;
  double transient_bytes = 0;
};

/// A calibration profile (worker.proto ReportProfileRequest) checked and
/// measured: one entry per virtual stage of the worker, ascending.
struct MeasuredProfile {
  std::vector<VirtualStageTiming> timings;  ///< F/B/W medians, seconds.
  std::vector<VirtualStageMemory> memory;
  std::vector<HopTiming> hops;  ///< Its hop latencies (HopTimingsOf).
  /// ReportProfileRequest.layout_parts: empty, or kLayoutParts entries
  /// (virtual stage k of the model cut into three one-block virtual
  /// stages: the embedding and a block, a block, a block and the head).
  std::vector<sched::VirtualStageCost> layout_parts;
  /// ReportProfileRequest.vocabulary: the stage's S and T medians and bytes
  /// under vocabulary parallelism; unset otherwise.
  std::optional<sched::VocabularyCost> vocabulary;
};

/// How many parts ReportProfileRequest.layout_parts holds.
inline constexpr int kLayoutParts = 3;

/// Checks the profile `profile` of the worker that runs stage
/// `stage` and replica `replica` of `replicas` under `schedule`
/// (the version its Assignment carried), then measures it. InvalidArgument
/// naming the field (nothing is kept from a refused profile):
/// * "stage", "replica": not the worker's (a replica outside
///   [0, replicas) says so);
/// * "repetitions": below 1;
/// * "virtual_stages[i].virtual_stage": not one of the stage's virtual
///   stages, or repeated; "virtual_stages": one of them missing;
/// * "virtual_stages[i].f_seconds" (b_, w_): not finite and > 0, or above
///   kMaxReportedSeconds;
/// * "virtual_stages": the stage's step under these times, m × (F + B + W)
///   summed over its virtual stages (m = schedule.microbatches), above
///   kMaxReportedSeconds: the longest step a report may hold (one day), so
///   no profile predicts a step that no report could ever measure;
/// * "virtual_stages[i].m_b_bytes": not finite and > 0 (every stage holds
///   its F's activation until its B; M_B = 0 would make every memory limit
///   hold any number of microbatches); "virtual_stages[i].m_w_bytes":
///   negative, not finite or above m_b_bytes;
/// * "layout_parts": neither empty nor kLayoutParts entries;
///   "layout_parts[k].virtual_stage": not k; "layout_parts[k].f_seconds"
///   ...: the rules of virtual_stages[i] above;
/// * "hop_latencies[i]...": HopTimingsOf's.
/// What the worker's device and the job can hold is CheckProfileMemory's.
/// Pure; thread-safe.
absl::StatusOr<MeasuredProfile> MeasureProfile(const zbpp::v1::ReportProfileRequest& profile,
                                               const sched::Schedule& schedule, int stage,
                                               int replica, int replicas);

/// Each virtual stage's (and layout part's) m_b_bytes of `profile` within
/// what can be: at
/// least `min_m_b_bytes` (ActivationFloorBytes: a tiny M_B made every
/// memory limit hold every microbatch, as M_B = 0 did) and at most
/// `device_memory_bytes`, the memory the worker registered
/// (WorkerDescription.memory_bytes: one microbatch's activation cannot
/// exceed what the device holds, and a larger M_B, e.g. 1e308, overflowed
/// the memory limit's arithmetic into a job failure). InvalidArgument
/// naming "virtual_stages[i].m_b_bytes" (or "layout_parts[k].m_b_bytes")
/// and the bound. Pure; thread-safe.
absl::Status CheckProfileMemory(const zbpp::v1::ReportProfileRequest& profile,
                                double min_m_b_bytes, uint64_t device_memory_bytes);

/// The least activation a virtual stage of `spec` holds per microbatch from
/// its F to its B, bytes: its input hidden state [b, s, h] at one byte per
/// element (every precision stores at least that; the block's own
/// activations, sb(34h + 5as) for a transformer layer, come on top).
/// Pure; thread-safe.
double ActivationFloorBytes(const zbpp::v1::JobSpec& spec);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_PROFILE_CHECK_H_
