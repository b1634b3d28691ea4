// `zbppctl watch JOB`: turns the WatchJob stream into one plain line per
// event (pipes, logs) or a live progress bar (a terminal).

#ifndef ZBPP_CLIENT_ZBPPCTL_WATCH_H_
#define ZBPP_CLIENT_ZBPPCTL_WATCH_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "zbpp/v1/job.pb.h"

namespace zbpp::ctl {

/// What the progress bar shows; updated from the events.
struct WatchProgress {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  int64_t steps_completed = 0;
  int64_t steps = 0;  ///< spec.steps; 0 when unknown.
  int64_t schedule_version = 0;
  bool has_step = false;  ///< A step summary was seen (the rest is valid).
  double loss = 0;
  double tokens_per_second = 0;
  double measured_bubble_rate = 0;
  double predicted_bubble_rate = 0;
};

/// One event as one line of `key=value` words after the event's kind, no
/// newline. `steps` is spec.steps (0 when unknown). Shapes:
///   snapshot job=J state=RUNNING step=5/100 schedule_version=2
///   state job=J state=FAILED previous=RUNNING message="..."
///   step job=J step=6/100 loss=3.1416 tokens_per_second=1234.5
///        bubble_rate=0.1234 predicted_bubble_rate=0.1000
///        step_seconds=0.5320 schedule_version=2
///   schedule job=J schedule_version=3 effective_step=40 reason=RESOLVE
///        name=zb-auto predicted_step_seconds=1.2300
///        predicted_bubble_rate=0.0500 [previous_step_seconds=1.3000]
///        [detail="..."]
///   validation job=J step=5 decision=CLIPPED [mode=POST]
///        global_grad_norm=1.5000 [inf_nan=true] [clip_coefficient=0.6667]
///        [rolled_back_stages=1,2 rollback_seconds=0.0120]
/// `step=N/M` counts completed steps (a StepSummary's 0-based step + 1); a
/// validation's `step=N` is the 0-based step it decided (so it matches
/// zbpp-worker --inject-nan-step N), and clip_coefficient appears on CLIPPED
/// only.
std::string EventLine(const v1::JobEvent& event, int64_t steps);

/// The progress bar: state, a 30-cell bar, completed/total steps, then the
/// last step's loss, tokens/s and measured (predicted) bubble rate, and the
/// schedule version. ASCII, no newline.
std::string ProgressLine(const WatchProgress& progress);

/// Prints a WatchJob stream to `out`. With `terminal` false: EventLine per
/// event. With `terminal` true: the progress bar, redrawn in place ("\r",
/// erase line), with state changes, schedule changes and validations other
/// than COMMITTED printed as lines above it. Not thread-safe.
class WatchPrinter {
 public:
  WatchPrinter(std::ostream& out, bool terminal);

  /// Prints `event`. Returns false once the job is in a terminal state
  /// (nothing more will come).
  bool OnEvent(const v1::JobEvent& event);

  /// Ends the progress bar's line (terminal mode); idempotent.
  void Finish();

  const WatchProgress& progress() const { return progress_; }
  /// The last state's message (Job.state_message).
  const std::string& state_message() const { return state_message_; }

 private:
  void Update(const v1::JobEvent& event);

  std::ostream& out_;
  const bool terminal_;
  bool bar_drawn_ = false;
  WatchProgress progress_;
  std::string state_message_;
};

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_WATCH_H_
