#ifndef ZBPP_COORDINATOR_CORE_STEP_REPORT_CHECK_H_
#define ZBPP_COORDINATOR_CORE_STEP_REPORT_CHECK_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core/cost_model.h"
#include "coordinator/core/step_summary.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::coordinator {

/// A step report (worker.proto ReportStepRequest) checked and measured.
struct MeasuredReport {
  /// What the step summary and the cost model take from it (step_summary.h).
  StageReport stage;
  /// Its hop latencies as samples of the hops they cover (cost_model.h).
  std::vector<HopTiming> hops;
};

/// Checks `report` against the schedule its step runs (`schedule`, version
/// number `version`) and the attempt (its validations' steps must lie in
/// [`start_step`, report.step()]), then measures it: the passes' durations
/// (a partial W or reduction of one gradient bucket of K counts K times,
/// standing for the whole pass), averaged per virtual stage over `base`
/// (AverageStepPasses), F/B/W/reduce means, busy, span and exposed-reduce
/// seconds, losses, timeline. The report's stage is not checked against
/// the worker's here. InvalidArgument naming the field for timings whose
/// count differs from the stage's actions, a negative or non-finite time, a
/// time inside the step longer than step_seconds, a negative loss, a hop
/// to a stage that is no pipeline neighbour, an out-of-range validation;
/// AverageStepPasses' errors. Nothing is kept from a refused report. Pure;
/// thread-safe.
absl::StatusOr<MeasuredReport> MeasureStepReport(
    const zbpp::v1::ReportStepRequest& report, const sched::Schedule& schedule,
    int64_t version, const sched::Problem& base, int64_t start_step);

/// The hop samples of `latencies`, measured by stage `from`: a
/// latency between stages a and b is a sample of every hop h whose virtual
/// stages h and h+1 sit on a and b under `schedule` (with two chunks, one
/// link carries two hops; the link is the same both ways). InvalidArgument
/// naming the entry ("hop_latencies[i].one_way_seconds", ".to_stage") for a
/// latency negative, not finite or above kMaxReportedSeconds, or a peer
/// that no hop links to `from`. Pure; thread-safe.
absl::StatusOr<std::vector<HopTiming>> HopTimingsOf(
    int from, const google::protobuf::RepeatedPtrField<zbpp::v1::HopLatency>& latencies,
    const sched::Schedule& schedule);

/// The longest time a step report may hold, seconds (one day): a step's
/// time, any time inside it, a rollback's, a hop's latency. No optimizer
/// step of a pipeline takes that long, so a larger value is a broken or
/// forged report, refused before it reaches the duration histograms, whose
/// sums it would hold for good.
inline constexpr double kMaxReportedSeconds = 86400;

/// The measurements of `report` within their ranges (worker.proto), before
/// anything reaches the cost model, the metrics or the store: times finite
/// and >= 0, step_seconds and rollbacks at most kMaxReportedSeconds, times
/// inside the step bounded by step_seconds (a small slack
/// for rounding; the breakdown's span parts too, its gap parts within its
/// gap_seconds), losses >= 0 (NaN and +inf are facts to record), squared
/// norms >= 0 unless found_inf_nan, a finite parameter sum, validations of
/// a known mode and decision with a clip coefficient in [0, 1].
/// InvalidArgument naming the field. Pure; thread-safe.
absl::Status CheckReportRanges(const zbpp::v1::ReportStepRequest& report);

/// `report`'s peak_activation_bytes at most `device_memory_bytes`, the
/// memory its worker registered (WorkerDescription.memory_bytes): no step
/// holds more activation than the device has, and a forged 2^64 - 1 fired
/// the memory alert. InvalidArgument naming the field and both values.
/// Pure; thread-safe.
absl::Status CheckReportFitsDevice(const zbpp::v1::ReportStepRequest& report,
                                   uint64_t device_memory_bytes);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_STEP_REPORT_CHECK_H_
