// What one stage measures about its steps: the executor's timeline of a
// step, where the step's span went (SpanBreakdown), and where the gap
// between two steps went (GapClock, StepGap). The worker reports both in
// ReportStepRequest.breakdown (proto/zbpp/v1/job.proto StepBreakdown, whose
// comment defines every part); `zbppctl report` and the measured Chrome
// trace show them.

#ifndef ZBPP_WORKER_RUNTIME_STEP_TIMELINE_H_
#define ZBPP_WORKER_RUNTIME_STEP_TIMELINE_H_

#include <array>
#include <chrono>
#include <optional>
#include <vector>

#include "scheduler/schedule.h"

namespace zbpp::v1 {
class StepBreakdown;
}  // namespace zbpp::v1

namespace zbpp::worker {

/// What one stage measured running one step's actions. Times are seconds
/// since the step start (`start`, the call of PipelineExecutor::RunStep).
struct StepTimeline {
  /// When the step started, on the host's steady clock: where the gap
  /// before it ends (GapClock).
  std::chrono::steady_clock::time_point start;
  /// Parallel to the stage's actions: when each started (its inputs there)
  /// and ended. A REDUCE_GRAD action runs on the communication thread: from
  /// the start of its all-reduce to its completion.
  std::vector<double> action_start_seconds;
  std::vector<double> action_end_seconds;
  /// End of the last action (a reduction may end after the last pass).
  double step_seconds = 0;
  /// Seconds blocked in receives before passes (within step_seconds), in
  /// issuing sends up to the last pass's end, and in post-update
  /// validation's check before the first B (BeforeFirstBackward). Sends
  /// issued or drained after the last pass are not counted: they are in
  /// the reductions' wait or the gap after the step.
  double input_wait_seconds = 0;
  double send_wait_seconds = 0;
  double validation_check_seconds = 0;
  /// Sum of per-microbatch losses (mean cross-entropy, nats) and how many
  /// there were; 0 / 0 on stages without the last virtual stage.
  double loss_sum = 0;
  int loss_count = 0;
  /// The BeforeFirstBackward check asked for a replay: the step stopped
  /// before this stage's first B after receiving every speculative message
  /// addressed to it and completing its own sends; the action times are
  /// those of the discarded forwards (`discarded_forwards` of them).
  bool discarded = false;
  int discarded_forwards = 0;
};

/// Where one step's span (0 to StepTimeline::step_seconds) went, seconds
/// (job.proto StepBreakdown, first part):
/// compute + input_wait + send_wait + validation_check + reduction_wait +
/// overhead = step_seconds. On a CPU the parts never overlap and overhead
/// is the exact rest; on a GPU, compute is device time while the waits are
/// the host's, which may overlap it: overhead is then the rest clamped at 0.
struct SpanBreakdown {
  double compute_seconds = 0;           ///< Passes (F, B, W, BW).
  double input_wait_seconds = 0;        ///< StepTimeline::input_wait_seconds.
  double send_wait_seconds = 0;         ///< StepTimeline::send_wait_seconds.
  double validation_check_seconds = 0;  ///< StepTimeline::validation_check_seconds.
  /// After the last pass, waiting for the data-parallel reductions:
  /// max(0, step_seconds - last pass end) when `actions` hold a REDUCE_GRAD.
  double reduction_wait_seconds = 0;
  double overhead_seconds = 0;  ///< The rest of the span.
};

/// `timeline`'s span split as SpanBreakdown says; `actions` are the stage's
/// actions of the step's schedule, parallel to the timeline's (a
/// discarded timeline's shorter lists count what they hold). Pure.
SpanBreakdown BreakDownSpan(const StepTimeline& timeline, const std::vector<sched::Action>& actions);

/// What a stage does between the end of a step's last action and the next
/// step's start (job.proto StepBreakdown, second part), in the order they
/// usually run.
enum class GapPhase : int {
  kDrain = 0,   ///< Completing the step's sends.
  kValidation,  ///< Exchanging and awaiting the gradients' validation state.
  kEmbedding,   ///< The token embedding's exchanges with the other stages.
  kOptimizer,   ///< Local norm, the AdamW update.
  kEvaluation,  ///< The held-out loss.
  kCheckpoint,  ///< Writing the checkpoint.
  kReport,      ///< ReportStep to the coordinator.
  kGrant,       ///< Waiting for the next step's grant.
  kOther,       ///< The rest (bookkeeping, a new schedule version).
};
inline constexpr int kGapPhases = 9;

/// The gap before one step, seconds: `total_seconds` from the previous
/// step's last action end to this step's start, and its parts by GapPhase,
/// which sum to it.
struct StepGap {
  double total_seconds = 0;
  std::array<double, kGapPhases> phase_seconds{};
  double seconds(GapPhase phase) const { return phase_seconds[static_cast<int>(phase)]; }
};

/// Splits the gap between two steps into phases on the steady clock: Open
/// at the end of a step's last action, Mark(phase) as each phase ends (the
/// time since the previous mark was spent in it), Close at the next step's
/// start (the time since the last mark is kOther). Each instant of the gap
/// is counted once, so the parts sum to the whole up to rounding.
/// Thread-compatible: the training thread only.
class GapClock {
 public:
  using Clock = std::chrono::steady_clock;

  /// Starts a gap at `since` (the previous step's last action end); drops
  /// one left open.
  void Open(Clock::time_point since);
  /// The time from the previous mark (or Open) to `now` was spent in
  /// `phase`. Nothing when no gap is open (before an attempt's first step).
  void Mark(GapPhase phase, Clock::time_point now = Clock::now());
  /// Ends the open gap at `until` (the step's start) and returns it;
  /// nullopt when none is open. `until` is at or after the last mark (a
  /// step starts after what preceded it).
  std::optional<StepGap> Close(Clock::time_point until);

 private:
  std::optional<Clock::time_point> since_;  // Set while a gap is open.
  Clock::time_point last_;                  // The last mark (or Open).
  StepGap gap_;
};

/// ReportStepRequest.breakdown (job.proto StepBreakdown) into `out`: the
/// step's span and, when given, the gap before it (none before an
/// attempt's first step). Seconds, as measured.
void FillStepBreakdown(const SpanBreakdown& span, const std::optional<StepGap>& gap,
                       v1::StepBreakdown& out);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_RUNTIME_STEP_TIMELINE_H_
