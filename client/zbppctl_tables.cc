#include "client/zbppctl_tables.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/job_state.h"
#include "api/pipeline_shape.h"
#include "api/time_proto.h"
#include "common/text_table.h"

namespace zbpp::ctl {
namespace {

std::string Steps(const v1::Job& job) {
  return absl::StrCat(job.steps_completed(), "/", job.spec().steps());
}

std::string ScheduleCell(const v1::Job& job) {
  const std::string& name = job.schedule().schedule().name().empty()
                                ? job.spec().schedule().name()
                                : job.schedule().schedule().name();
  if (job.schedule_version() == 0) return name.empty() ? "-" : name;
  return absl::StrCat(name, " v", job.schedule_version());
}

}  // namespace

std::string Number(const char* format, double value) {
  if (std::isnan(value)) return "-";
  if (std::abs(value) < 1e9) return absl::StrFormat(format, value);
  const std::string text(format);
  const size_t percent = text.find('%');
  const size_t conversion = text.find('f', percent);
  if (percent == std::string::npos || conversion == std::string::npos) {
    return absl::StrFormat("%.4g", value);
  }
  return absl::StrCat(text.substr(0, percent), absl::StrFormat("%.4g", value),
                      text.substr(conversion + 1));
}

std::string ShortEnumName(const std::string& name, const std::string& prefix) {
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

std::string ValidationModeName(v1::ValidationMode mode) {
  if (mode == v1::VALIDATION_MODE_UNSPECIFIED) return "";
  return ShortEnumName(v1::ValidationMode_Name(mode), "VALIDATION_MODE_");
}

std::string ValidationPolicyName(const v1::JobSpec& spec) {
  return spec.validation() == v1::VALIDATION_MODE_UNSPECIFIED
             ? "AUTO"
             : ValidationModeName(spec.validation());
}

std::string PrecisionName(const v1::JobSpec& spec) {
  return spec.precision() == v1::PRECISION_UNSPECIFIED
             ? "FP32"
             : ShortEnumName(v1::Precision_Name(spec.precision()), "PRECISION_");
}

std::string TransportSummary(const v1::Job& job) {
  if (job.transport() == v1::TRANSPORT_AUTO) {
    return absl::StrCat(ShortEnumName(v1::Transport_Name(job.spec().transport()), "TRANSPORT_"),
                        " (decided when workers are assigned)");
  }
  std::string text = ShortEnumName(v1::Transport_Name(job.transport()), "TRANSPORT_");
  if (!job.transport_reason().empty()) absl::StrAppend(&text, " (", job.transport_reason(), ")");
  return text;
}

std::string LayoutSummary(const std::vector<int>& layout, const std::string& reason) {
  if (layout.empty()) return "-";
  std::string text = LayoutText(layout);
  if (!reason.empty()) absl::StrAppend(&text, " (", reason, ")");
  return text;
}

std::string ValidationSummary(const std::string& mode,
                              const std::string& policy, int64_t rollbacks,
                              int64_t skipped_steps, int64_t clipped_steps) {
  std::string text = mode.empty() ? "-" : mode;
  if (policy != mode) absl::StrAppend(&text, " (policy ", policy, ")");
  absl::StrAppend(&text, ": ", rollbacks,
                  rollbacks == 1 ? " rollback, " : " rollbacks, ",
                  skipped_steps, " skipped, ", clipped_steps, " clipped");
  return text;
}

std::string TransitionLine(const v1::JobTransition& transition) {
  std::string line = absl::StrCat(JobStateName(transition.from()), " -> ",
                                  JobStateName(transition.to()), " at step ",
                                  transition.steps_completed());
  if (transition.has_time()) {
    absl::StrAppend(&line, " (",
                    absl::FormatTime("%H:%M:%S", FromTimestamp(transition.time()),
                                     absl::UTCTimeZone()),
                    ")");
  }
  if (!transition.message().empty()) absl::StrAppend(&line, ": ", transition.message());
  return PrintableText(line);
}

std::string Age(absl::Time then, absl::Time now) {
  if (then == absl::InfinitePast()) return "-";
  const int64_t seconds =
      std::max<int64_t>(0, absl::ToInt64Seconds(now - then));
  if (seconds < 120) return absl::StrCat(seconds, "s");
  if (seconds < 2 * 3600) return absl::StrCat(seconds / 60, "m");
  if (seconds < 2 * 86400) return absl::StrCat(seconds / 3600, "h");
  return absl::StrCat(seconds / 86400, "d");
}

std::string JobsTable(const std::vector<v1::Job>& jobs, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATE", "STEP", "SCHEDULE", "LOSS", "BUBBLE", "AGE"}};
  for (const v1::Job& job : jobs) {
    const bool stepped = job.has_last_step();
    rows.push_back(
        {job.id(), job.spec().name().empty() ? "-" : job.spec().name(),
         JobStateName(job.state()), Steps(job), ScheduleCell(job),
         stepped ? Number("%.4f", job.last_step().loss()) : "-",
         stepped ? Number("%.3f", job.last_step().measured_bubble_rate()) : "-",
         Age(FromTimestamp(job.create_time()), now)});
  }
  return FormatTable(rows);
}

std::string JobStatusTable(const v1::Job& job, absl::Time now) {
  std::vector<std::vector<std::string>> rows;
  auto add = [&rows](const std::string& key, const std::string& value) {
    rows.push_back({key + ":", value});
  };
  add("id", job.id());
  if (!job.spec().name().empty()) add("name", job.spec().name());
  add("state", JobStateName(job.state()));
  if (!job.state_message().empty()) add("message", job.state_message());
  add("step", Steps(job));
  const v1::PipelineSpec& pipeline = job.spec().pipeline();
  const int replicas = DataParallelOf(pipeline);
  add("pipeline", absl::StrCat(pipeline.stages(), pipeline.stages() == 1 ? " stage x " : " stages x ",
                               replicas, replicas == 1 ? " replica (" : " replicas (",
                               WorkersOf(pipeline), " workers)"));
  if (job.state() == v1::JOB_STATE_DEGRADED) {
    add("replicas", absl::StrCat(job.replicas_active(), " of ", replicas,
                                 " running (degraded: the same global batch)"));
  }
  if (job.has_last_step()) {
    const v1::StepSummary& step = job.last_step();
    add("loss", Number("%.4f", step.loss()));
    add("tokens/s", Number("%.1f", step.tokens_per_second()));
    add("step time", Number("%.3f s", step.step_seconds()));
    add("bubble rate",
        absl::StrCat(Number("%.3f", step.measured_bubble_rate()), " measured, ",
                     Number("%.3f", step.predicted_bubble_rate()),
                     " predicted"));
  }
  std::string schedule = ScheduleCell(job);
  if (job.has_schedule()) {
    const v1::ScheduleVersion& version = job.schedule();
    absl::StrAppend(
        &schedule, " (from step ", version.effective_step(), ", ",
        ShortEnumName(v1::ScheduleChangeReason_Name(version.reason()),
                      "SCHEDULE_CHANGE_REASON_"),
        version.reason_detail().empty() ? "" : ": ", version.reason_detail(),
        "); predicted step ",
        Number("%.3f s", version.predicted().step_seconds()), ", bubble rate ",
        Number("%.3f", version.predicted().bubble_rate()));
  }
  add("schedule", schedule);
  add("validation",
      ValidationSummary(ValidationModeName(job.validation_mode()),
                        ValidationPolicyName(job.spec()), job.rollbacks_total(),
                        job.skipped_steps_total(), job.clipped_steps_total()));
  add("precision", PrecisionName(job.spec()));
  add("transport", TransportSummary(job));
  add("layout", LayoutSummary(std::vector<int>(job.layout().begin(), job.layout().end()),
                              job.layout_reason()));
  if (job.better_layout_size() > 0) {
    add("better layout",
        LayoutSummary(std::vector<int>(job.better_layout().begin(), job.better_layout().end()),
                      job.better_layout_reason()));
  }
  // A recovery from memory runs no step again; a restart does
  // (docs/elastic.md).
  add("recoveries",
      absl::StrCat(job.recoveries_total(), " (", job.restarts_total(),
                   job.restarts_total() == 1 ? " restart" : " restarts",
                   job.degraded_steps() > 0
                       ? absl::StrCat(", ", job.degraded_steps(), " steps degraded")
                       : std::string(),
                   ")"));
  if (job.transitions_size() > 0) {
    const int listed = job.transitions_size();
    add("last change",
        absl::StrCat(TransitionLine(job.transitions(listed - 1)),
                     listed > 1 ? absl::StrCat(" (the newest of ", listed,
                                               "; zbppctl report lists them)")
                                : std::string()));
  }
  if (job.has_param_checksum()) {
    add("checksum", absl::StrFormat("%.17g", job.param_checksum()));
  }
  add("checkpoint", job.last_checkpoint_step() < 0
                        ? std::string("none")
                        : absl::StrCat("step ", job.last_checkpoint_step()));
  if (job.spec().checkpoint().snapshot_interval_steps() > 0) {
    add("snapshot", job.snapshot_steps_size() == 0 || job.last_snapshot_step() < 0
                        ? std::string("none")
                        : absl::StrCat("step ", job.last_snapshot_step()));
  }
  add("age", Age(FromTimestamp(job.create_time()), now));
  std::string text = FormatTable(rows);

  if (job.last_step().stages_size() > 0) {
    // With replicas: means over them, and the reductions' seconds.
    std::vector<std::vector<std::string>> stages = {
        {"STAGE", "WORKER", "BUBBLE", "PREDICTED", "IDLE_S", "COMM_S", "F_S",
         "B_S", "W_S"}};
    if (replicas > 1) stages[0].insert(stages[0].end(), {"REDUCE_S", "EXPOSED_S"});
    for (const v1::StageStepStats& s : job.last_step().stages()) {
      stages.push_back(
          {absl::StrCat(s.stage()), s.worker_id(),
           Number("%.3f", s.measured_bubble_rate()),
           Number("%.3f", s.predicted_bubble_rate()),
           Number("%.4f", s.idle_seconds()), Number("%.4f", s.comm_seconds()),
           Number("%.4f", s.f_seconds()), Number("%.4f", s.b_seconds()),
           Number("%.4f", s.w_seconds())});
      if (replicas > 1) {
        stages.back().insert(stages.back().end(),
                             {Number("%.4f", s.reduce_seconds()),
                              Number("%.4f", s.exposed_reduce_seconds())});
      }
    }
    text += "\n" + FormatTable(stages);
  }
  return text;
}

std::string WorkersTable(const std::vector<v1::Worker>& workers,
                         absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "HOST", "DEVICE", "MEMORY", "STATE", "JOB", "STAGE",
       "REPLICA", "PHASE", "HEARTBEAT"}};
  for (const v1::Worker& w : workers) {
    const v1::WorkerDescription& d = w.description();
    const bool has_job = !w.job_id().empty();
    rows.push_back(
        {w.worker_id(), d.name().empty() ? "-" : d.name(), d.host(),
         absl::StrCat(ShortEnumName(v1::DeviceKind_Name(d.device_kind()),
                                    "DEVICE_KIND_"),
                      ":", d.device_index()),
         absl::StrFormat("%.1fGiB", d.memory_bytes() / double(1ull << 30)),
         ShortEnumName(v1::WorkerState_Name(w.state()), "WORKER_STATE_"),
         has_job ? w.job_id() : "-", has_job ? absl::StrCat(w.stage()) : "-",
         has_job ? absl::StrCat(w.replica()) : "-",
         ShortEnumName(v1::WorkerPhase_Name(w.phase()), "WORKER_PHASE_"),
         Age(FromTimestamp(w.last_heartbeat_time()), now)});
  }
  return FormatTable(rows);
}

}  // namespace zbpp::ctl
