#include "coordinator/service/schedule_page.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "api/schedule_proto.h"
#include "scheduler/export_svg.h"
#include "scheduler/simulator.h"

namespace zbpp::coordinator {
namespace {

using sched::EscapeMarkup;

bool Stepped(const v1::Job& job) { return job.steps_completed() > 0 && job.has_last_step(); }

std::string Percent(double ratio) { return absl::StrFormat("%.1f%%", 100 * ratio); }

// Bytes in MiB (2^20), "-" for 0: not measured (workers that predate the
// measurement) or not predicted.
std::string MiB(double bytes) {
  return bytes > 0 ? absl::StrFormat("%.2f", bytes / (1024.0 * 1024.0)) : "-";
}

// ToSvg writes a standalone file; inside HTML the XML declaration must go.
// The chart fills the page's width but is never drawn larger than ToSvg
// made it, nor smaller than 1200 px (a long measured step is wide: ToSvg
// gives its shortest pass 18 px), so that its labels stay readable; the
// container scrolls sideways instead.
std::string Inline(std::string svg) {
  if (absl::StartsWith(svg, "<?xml")) svg.erase(0, svg.find('\n') + 1);
  const size_t width_at = svg.find(" width=\"");
  double width = 0;
  if (width_at != std::string::npos) {
    const size_t begin = width_at + 8;
    const size_t end = svg.find('"', begin);
    if (end != std::string::npos && absl::SimpleAtod(svg.substr(begin, end - begin), &width) &&
        width > 0) {
      svg.insert(width_at, absl::StrFormat(" style=\"max-width:%.0fpx;min-width:%.0fpx\"",
                                           width, std::min(width, 1200.0)));
    }
  }
  return svg;
}

// Page chrome: the idle hatch the charts' row backgrounds use (CSS fills
// `rect.row`, which ToSvg draws under the passes), badges, cards, tables.
constexpr char kStyle[] = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:12px 24px;display:flex;align-items:baseline;gap:16px}
header h1{font-size:18px;margin:0}header a{color:#9ecbff;font-size:13px}
main{padding:16px 24px;max-width:1400px}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.12);padding:16px 20px;margin-bottom:16px}
h2{font-size:17px;margin:0 0 8px}h3{font-size:14px;margin:16px 0 4px;color:#44506a}
table{border-collapse:collapse;font-size:13px}td,th{padding:4px 10px;text-align:left;border-bottom:1px solid #e6e8ee}
th{color:#5a6478;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;background:#7a8599}
.RUNNING{background:#2f80ed}.SUCCEEDED{background:#27ae60}.FAILED{background:#eb5757}.CANCELLED{background:#828282}
.RECOVERING,.ASSIGNING,.PENDING,.DEGRADED{background:#f2994a}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:8px 0}
.card{background:#f4f5f7;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:20px}.card span{font-size:12px;color:#5a6478}
.chart{overflow-x:auto}.chart svg{width:100%;height:auto;display:block}
.chart rect.row{fill:url(#idle)}
.note{color:#5a6478;font-size:13px}
.bar{display:inline-block;height:10px;border-radius:2px;vertical-align:middle}
.bar.m{background:#eb5757}.bar.p{background:#b0b8c8}
)css";

std::string Head(const std::string& title, bool refresh, int refresh_seconds) {
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
      refresh ? absl::StrCat("<meta http-equiv=\"refresh\" content=\"", refresh_seconds, "\">")
              : "",
      "<title>", EscapeMarkup(title), "</title><style>", kStyle, "</style></head><body>\n",
      // The hatch that marks idle time in both charts.
      "<svg width=\"0\" height=\"0\" style=\"position:absolute\"><defs>"
      "<pattern id=\"idle\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f6f6f8\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d9dbe2\" stroke-width=\"2\"/>"
      "</pattern></defs></svg>\n",
      "<header><h1>zbpp coordinator</h1><a href=\"/\">jobs</a>"
      "<a href=\"/metrics\">/metrics</a>",
      refresh ? absl::StrCat("<span class=\"note\" style=\"color:#9aa5b8\">refreshing every ",
                             refresh_seconds, " s</span>")
              : "",
      "</header><main>\n");
}

constexpr char kTail[] = "</main></body></html>\n";

// The body of one job: figures, the two charts of the version that ran its
// last step (`ran`), bubble per stage.
std::string JobSection(const v1::Job& job, const v1::ScheduleVersion& ran) {
  const v1::StepSummary& last = job.last_step();
  std::string html = absl::StrCat(
      "<section class=\"job\" id=\"job-", EscapeMarkup(job.id()), "\"><h2><a href=\"/jobs/",
      EscapeMarkup(job.id()), "\">", EscapeMarkup(job.id()), "</a> ",
      EscapeMarkup(job.spec().name()),
      " <span class=\"badge ", JobStateName(job.state()), "\">", JobStateName(job.state()),
      "</span></h2>");
  if (!job.state_message().empty()) {
    absl::StrAppend(&html, "<p class=\"note\">", EscapeMarkup(job.state_message()), "</p>");
  }
  absl::StrAppend(
      &html, "<div class=\"cards\">", "<div class=\"card\"><b>", job.steps_completed(), " / ",
      job.spec().steps(), "</b><span>steps</span></div>", "<div class=\"card\"><b>",
      EscapeMarkup(job.schedule().schedule().name().empty() ? job.spec().schedule().name()
                                                      : job.schedule().schedule().name()),
      " v", job.schedule_version(), "</b><span>schedule</span></div>");
  if (job.layout_size() > 0) {
    absl::StrAppend(&html, "<div class=\"card\" title=\"", EscapeMarkup(job.layout_reason()),
                    "\"><b>",
                    LayoutText(std::vector<int>(job.layout().begin(), job.layout().end())),
                    "</b><span>blocks per virtual stage</span></div>");
  }
  if (Stepped(job)) {
    absl::StrAppend(
        &html, "<div class=\"card\"><b>", absl::StrFormat("%.4f", last.loss()),
        "</b><span>loss</span></div><div class=\"card\"><b>",
        absl::StrFormat("%.3f s", last.step_seconds()),
        "</b><span>step time</span></div><div class=\"card\"><b>",
        absl::StrFormat("%.0f", last.tokens_per_second()),
        "</b><span>tokens/s</span></div><div class=\"card\"><b>",
        Percent(last.measured_bubble_rate()), " / ", Percent(last.predicted_bubble_rate()),
        "</b><span>bubble measured / predicted</span></div>");
  }
  absl::StrAppend(&html, "</div>");

  absl::StrAppend(&html, "<h3>Last step as measured (step ", Stepped(job) ? last.step() : 0,
                  ")</h3>");
  absl::StatusOr<std::string> measured = MeasuredStepSvg(job, ran);
  if (measured.ok()) {
    absl::StrAppend(&html, "<div class=\"chart measured\">", Inline(*measured), "</div>");
  } else {
    absl::StrAppend(&html, "<p class=\"note measured-missing\">",
                    EscapeMarkup(std::string(measured.status().message())), "</p>");
  }
  absl::StrAppend(&html, "<h3>Planned (the simulator, schedule version ", ran.version(),
                  ")</h3>");
  if (job.schedule().version() > ran.version()) {
    absl::StrAppend(&html, "<p class=\"note later-version\">The latest version is ",
                    job.schedule().version(), ", from step ", job.schedule().effective_step(),
                    ".</p>");
  }
  absl::StatusOr<std::string> planned =
      ran.version() > 0
          ? PlannedScheduleSvg(ran)
          : absl::StatusOr<std::string>(absl::FailedPreconditionError("no schedule yet"));
  if (planned.ok()) {
    absl::StrAppend(&html, "<div class=\"chart planned\">", Inline(*planned), "</div>");
  } else {
    absl::StrAppend(&html, "<p class=\"note\">",
                    EscapeMarkup(std::string(planned.status().message())), "</p>");
  }

  if (Stepped(job) && last.stages_size() > 0) {
    absl::StrAppend(&html,
                    "<h3>Bubble rate and activation memory per stage (last step)</h3>"
                    "<table class=\"stages\"><tr>"
                    "<th>stage</th><th>worker</th><th>measured</th><th></th><th>predicted</th>"
                    "<th></th><th>F s</th><th>B s</th><th>W s</th><th>idle s</th>"
                    "<th>peak MiB</th><th>predicted peak MiB</th></tr>");
    for (const v1::StageStepStats& s : last.stages()) {
      absl::StrAppend(
          &html, "<tr class=\"stage\"><td>", s.stage(), "</td><td>", EscapeMarkup(s.worker_id()),
          "</td><td class=\"num\">", Percent(s.measured_bubble_rate()),
          "</td><td><span class=\"bar m\" style=\"width:",
          absl::StrFormat("%.0f", 200 * std::clamp(s.measured_bubble_rate(), 0.0, 1.0)),
          "px\"></span></td><td class=\"num\">", Percent(s.predicted_bubble_rate()),
          "</td><td><span class=\"bar p\" style=\"width:",
          absl::StrFormat("%.0f", 200 * std::clamp(s.predicted_bubble_rate(), 0.0, 1.0)),
          "px\"></span></td><td class=\"num\">", absl::StrFormat("%.4f", s.f_seconds()),
          "</td><td class=\"num\">", absl::StrFormat("%.4f", s.b_seconds()),
          "</td><td class=\"num\">", absl::StrFormat("%.4f", s.w_seconds()),
          "</td><td class=\"num\">", absl::StrFormat("%.4f", s.idle_seconds()),
          "</td><td class=\"num peak\">", MiB(s.peak_activation_bytes()),
          "</td><td class=\"num predicted-peak\">", MiB(s.predicted_peak_activation_bytes()),
          "</td></tr>");
    }
    absl::StrAppend(&html, "</table>");
  }
  absl::StrAppend(&html, "</section>\n");
  return html;
}

// VersionThatRanLastStep, or the job's latest version should the core lack
// it (a store that lost a version): the measured chart then says why it
// cannot be drawn, and the rest of the page is still there.
v1::ScheduleVersion RanOrLatest(const Coordinator& core, const v1::Job& job) {
  absl::StatusOr<v1::ScheduleVersion> ran = VersionThatRanLastStep(core, job);
  return ran.ok() ? *std::move(ran) : job.schedule();
}

metrics::HttpResponse NotFound(const std::string& what) {
  return {404, "text/plain; charset=utf-8", absl::StrCat(what, "\n")};
}

}  // namespace

absl::StatusOr<std::string> MeasuredStepSvg(const v1::Job& job, const v1::ScheduleVersion& ran) {
  absl::StatusOr<TimedSchedule> measured = MeasuredLastStep(job, ran);
  if (!measured.ok()) return measured.status();
  return sched::ToSvg(measured->schedule, measured->timing);
}

absl::StatusOr<std::string> PlannedScheduleSvg(const v1::ScheduleVersion& version) {
  absl::StatusOr<TimedSchedule> planned = SimulatedVersion(version);
  if (!planned.ok()) return planned.status();
  return sched::ToSvg(planned->schedule, planned->timing);
}

absl::StatusOr<v1::ScheduleVersion> VersionThatRanLastStep(const Coordinator& core,
                                                           const v1::Job& job) {
  const int64_t ran = job.last_step_timeline().schedule_version();
  if (ran == 0 || ran == job.schedule().version()) return job.schedule();
  return core.GetScheduleVersion(job.id(), ran);
}

std::string JobsPageHtml(const std::vector<v1::Job>& jobs, const v1::ScheduleVersion& first_ran,
                         int refresh_seconds) {
  const bool live = std::any_of(jobs.begin(), jobs.end(),
                                [](const v1::Job& j) { return !IsTerminal(j.state()); });
  std::string html = Head("zbpp jobs", live, refresh_seconds);
  absl::StrAppend(&html, "<section><h2>Jobs</h2>");
  if (jobs.empty()) {
    absl::StrAppend(&html, "<p class=\"note\">No jobs yet: <code>zbppctl submit JOB.yaml</code>"
                           "</p>");
  } else {
    absl::StrAppend(&html, "<table class=\"jobs\"><tr><th>job</th><th>name</th><th>state</th>"
                           "<th>steps</th><th>schedule</th><th>loss</th><th>tokens/s</th>"
                           "<th>bubble measured</th><th>bubble predicted</th></tr>");
    for (const v1::Job& job : jobs) {
      const bool stepped = Stepped(job);
      absl::StrAppend(
          &html, "<tr class=\"job-row\"><td><a href=\"/jobs/", EscapeMarkup(job.id()), "\">",
          EscapeMarkup(job.id()), "</a></td><td>", EscapeMarkup(job.spec().name()),
          "</td><td><span class=\"badge ", JobStateName(job.state()), "\">",
          JobStateName(job.state()), "</span></td><td class=\"num\">", job.steps_completed(),
          " / ", job.spec().steps(), "</td><td>", EscapeMarkup(job.spec().schedule().name()),
          "</td><td class=\"num\">",
          stepped ? absl::StrFormat("%.4f", job.last_step().loss()) : "-",
          "</td><td class=\"num\">",
          stepped ? absl::StrFormat("%.0f", job.last_step().tokens_per_second()) : "-",
          "</td><td class=\"num\">",
          stepped ? Percent(job.last_step().measured_bubble_rate()) : "-",
          "</td><td class=\"num\">",
          stepped ? Percent(job.last_step().predicted_bubble_rate()) : "-", "</td></tr>");
    }
    absl::StrAppend(&html, "</table>");
  }
  absl::StrAppend(&html, "</section>\n");
  if (!jobs.empty()) absl::StrAppend(&html, JobSection(jobs.front(), first_ran));
  absl::StrAppend(&html, kTail);
  return html;
}

std::string JobPageHtml(const v1::Job& job, const v1::ScheduleVersion& ran,
                        int refresh_seconds) {
  std::string html = Head(absl::StrCat("zbpp ", job.id()), !IsTerminal(job.state()),
                          refresh_seconds);
  absl::StrAppend(&html, JobSection(job, ran), kTail);
  return html;
}

metrics::HttpResponse ServeSchedulePage(const Coordinator& core, const std::string& path) {
  if (path == "/") {
    v1::ListJobsRequest request;
    request.set_page_size(50);
    request.set_view(v1::JOB_VIEW_BASIC);
    absl::StatusOr<v1::ListJobsResponse> jobs = core.ListJobs(request);
    if (!jobs.ok()) {
      return {500, "text/plain; charset=utf-8", std::string(jobs.status().message())};
    }
    std::vector<v1::Job> list(jobs->jobs().begin(), jobs->jobs().end());
    // The newest job's charts need its FULL view and the version that ran
    // its last step.
    v1::ScheduleVersion first_ran;
    if (!list.empty()) {
      absl::StatusOr<v1::Job> full = core.GetJob(list.front().id(), v1::JOB_VIEW_FULL);
      if (full.ok()) list.front() = *std::move(full);
      first_ran = RanOrLatest(core, list.front());
    }
    return {200, "text/html; charset=utf-8", JobsPageHtml(list, first_ran)};
  }
  absl::string_view rest = path;
  if (!absl::ConsumePrefix(&rest, "/jobs/") || rest.empty()) {
    return NotFound(absl::StrCat("no page at ", path));
  }
  std::string suffix;
  for (const char* picture : {"/measured.svg", "/planned.svg"}) {
    if (absl::ConsumeSuffix(&rest, picture)) suffix = picture;
  }
  const std::string job_id(rest);
  absl::StatusOr<v1::Job> job = core.GetJob(job_id, v1::JOB_VIEW_FULL);
  if (!job.ok()) return NotFound(absl::StrCat("no job \"", job_id, "\""));
  const v1::ScheduleVersion ran = RanOrLatest(core, *job);
  if (suffix.empty()) return {200, "text/html; charset=utf-8", JobPageHtml(*job, ran)};
  absl::StatusOr<std::string> svg = suffix == "/measured.svg" ? MeasuredStepSvg(*job, ran)
                                                              : PlannedScheduleSvg(ran);
  if (!svg.ok()) return NotFound(std::string(svg.status().message()));
  return {200, "image/svg+xml", *std::move(svg)};
}

}  // namespace zbpp::coordinator
