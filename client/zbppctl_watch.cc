#include "client/zbppctl_watch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/job_state.h"
#include "client/zbppctl_tables.h"
#include "common/text_table.h"

namespace zbpp::ctl {
namespace {

constexpr int kBarCells = 30;
// Carriage return, then erase to the end of the line (ANSI EL).
constexpr char kClearLine[] = "\r\x1b[K";

std::string Quoted(const std::string& text) {
  std::string quoted = "\"";
  for (char c : PrintableText(text)) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// Event lines spell nan out (a field, not a table cell).
std::string Fixed(double value) { return std::isnan(value) ? "nan" : Number("%.4f", value); }

std::string StepOf(int64_t completed, int64_t steps) {
  return steps > 0 ? absl::StrCat(completed, "/", steps)
                   : absl::StrCat(completed);
}

// The last step's figures, as the bar shows them.
void TakeStep(const v1::StepSummary& step, WatchProgress& progress) {
  progress.has_step = true;
  progress.loss = step.loss();
  progress.tokens_per_second = step.tokens_per_second();
  progress.measured_bubble_rate = step.measured_bubble_rate();
  progress.predicted_bubble_rate = step.predicted_bubble_rate();
}

}  // namespace

std::string EventLine(const v1::JobEvent& event, int64_t steps) {
  const std::string job = "job=" + event.job_id();
  switch (event.event_case()) {
    case v1::JobEvent::kSnapshot: {
      const v1::Job& s = event.snapshot();
      return absl::StrCat("snapshot ", job, " state=", JobStateName(s.state()),
                          " step=", StepOf(s.steps_completed(), steps),
                          " schedule_version=", s.schedule_version());
    }
    case v1::JobEvent::kStateChange: {
      const v1::JobStateChange& c = event.state_change();
      std::string line =
          absl::StrCat("state ", job, " state=", JobStateName(c.new_state()),
                       " previous=", JobStateName(c.old_state()));
      if (!c.message().empty())
        absl::StrAppend(&line, " message=", Quoted(c.message()));
      return line;
    }
    case v1::JobEvent::kStep: {
      const v1::StepSummary& s = event.step();
      return absl::StrCat(
          "step ", job, " step=", StepOf(s.step() + 1, steps),
          " loss=", Fixed(s.loss()),
          " tokens_per_second=", Number("%.1f", s.tokens_per_second()),
          " bubble_rate=", Fixed(s.measured_bubble_rate()),
          " predicted_bubble_rate=", Fixed(s.predicted_bubble_rate()),
          " step_seconds=", Fixed(s.step_seconds()),
          " schedule_version=", s.schedule_version());
    }
    case v1::JobEvent::kScheduleChange: {
      const v1::ScheduleVersion& v = event.schedule_change();
      std::string line = absl::StrCat(
          "schedule ", job, " schedule_version=", v.version(),
          " effective_step=", v.effective_step(), " reason=",
          ShortEnumName(v1::ScheduleChangeReason_Name(v.reason()),
                        "SCHEDULE_CHANGE_REASON_"),
          " name=", v.schedule().name(),
          " predicted_step_seconds=", Fixed(v.predicted().step_seconds()),
          " predicted_bubble_rate=", Fixed(v.predicted().bubble_rate()));
      if (v.has_previous_predicted()) {
        absl::StrAppend(&line, " previous_step_seconds=",
                        Fixed(v.previous_predicted().step_seconds()));
      }
      if (!v.reason_detail().empty()) {
        absl::StrAppend(&line, " detail=", Quoted(v.reason_detail()));
      }
      return line;
    }
    case v1::JobEvent::kValidation: {
      const v1::ValidationOutcome& o = event.validation();
      std::string line =
          absl::StrCat("validation ", job, " step=", o.step(), " decision=",
                       ShortEnumName(v1::ValidationDecision_Name(o.decision()),
                                     "VALIDATION_DECISION_"));
      if (o.mode() != v1::VALIDATION_MODE_UNSPECIFIED) {
        absl::StrAppend(&line, " mode=", ValidationModeName(o.mode()));
      }
      absl::StrAppend(&line, " global_grad_norm=", Fixed(o.global_grad_norm()));
      if (o.found_inf_nan()) absl::StrAppend(&line, " inf_nan=true");
      if (o.decision() == v1::VALIDATION_DECISION_CLIPPED) {
        absl::StrAppend(&line,
                        " clip_coefficient=", Fixed(o.clip_coefficient()));
      }
      if (o.rolled_back_stages_size() > 0) {
        absl::StrAppend(&line, " rolled_back_stages=",
                        absl::StrJoin(o.rolled_back_stages(), ","),
                        " rollback_seconds=", Fixed(o.rollback_seconds()));
      }
      return line;
    }
    case v1::JobEvent::EVENT_NOT_SET:
      break;
  }
  return absl::StrCat("event ", job, " sequence=", event.sequence());
}

std::string ProgressLine(const WatchProgress& p) {
  const double done =
      p.steps > 0 ? std::clamp(double(p.steps_completed) / p.steps, 0.0, 1.0)
                  : 0.0;
  const int filled = static_cast<int>(done * kBarCells);
  std::string line =
      absl::StrCat(JobStateName(p.state), " [", std::string(filled, '#'),
                   std::string(kBarCells - filled, '.'), "] ",
                   StepOf(p.steps_completed, p.steps));
  if (p.has_step) {
    absl::StrAppend(
        &line, "  loss ", Number("%.4f", p.loss), "  ",
        Number("%.0f", p.tokens_per_second), " tok/s  bubble ",
        absl::StrFormat("%.1f%% (pred %.1f%%)", 100 * p.measured_bubble_rate,
                        100 * p.predicted_bubble_rate));
  }
  if (p.schedule_version > 0) absl::StrAppend(&line, "  v", p.schedule_version);
  return line;
}

WatchPrinter::WatchPrinter(std::ostream& out, bool terminal)
    : out_(out), terminal_(terminal) {}

void WatchPrinter::Update(const v1::JobEvent& event) {
  switch (event.event_case()) {
    case v1::JobEvent::kSnapshot: {
      const v1::Job& job = event.snapshot();
      progress_.state = job.state();
      progress_.steps = job.spec().steps();
      progress_.steps_completed = job.steps_completed();
      progress_.schedule_version = job.schedule_version();
      state_message_ = job.state_message();
      if (job.has_last_step()) TakeStep(job.last_step(), progress_);
      break;
    }
    case v1::JobEvent::kStateChange:
      progress_.state = event.state_change().new_state();
      state_message_ = event.state_change().message();
      break;
    case v1::JobEvent::kStep:
      TakeStep(event.step(), progress_);
      progress_.steps_completed =
          std::max(progress_.steps_completed, event.step().step() + 1);
      progress_.schedule_version = event.step().schedule_version();
      break;
    case v1::JobEvent::kScheduleChange:
    case v1::JobEvent::kValidation:
    case v1::JobEvent::EVENT_NOT_SET:
      break;
  }
}

bool WatchPrinter::OnEvent(const v1::JobEvent& event) {
  Update(event);
  if (!terminal_) {
    out_ << EventLine(event, progress_.steps) << "\n" << std::flush;
    return !IsTerminal(progress_.state);
  }
  const bool as_line =
      event.has_state_change() || event.has_schedule_change() ||
      (event.has_validation() &&
       event.validation().decision() != v1::VALIDATION_DECISION_COMMITTED);
  if (bar_drawn_) out_ << kClearLine;
  if (as_line) out_ << EventLine(event, progress_.steps) << "\n";
  out_ << ProgressLine(progress_) << std::flush;
  bar_drawn_ = true;
  return !IsTerminal(progress_.state);
}

void WatchPrinter::Finish() {
  if (terminal_ && bar_drawn_) out_ << "\n" << std::flush;
  bar_drawn_ = false;
}

}  // namespace zbpp::ctl
