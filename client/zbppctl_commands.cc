#include "client/zbppctl_commands.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "api/job_state.h"
#include "client/job_spec_yaml.h"
#include "client/zbppctl_export.h"
#include "client/zbppctl_json.h"
#include "client/zbppctl_report.h"
#include "client/zbppctl_schedule.h"
#include "client/zbppctl_tables.h"
#include "client/zbppctl_watch.h"
#include "common/read_file.h"
#include "common/text_table.h"

namespace zbpp::ctl {
namespace {

// Prints `status` as the one stderr line every error gets. Connection
// failures already name the coordinator; other errors get `context`
// ("status JOB") and the code so that NOT_FOUND and friends are plain.
int Fail(const CommandIo& io, const std::string& context,
         const absl::Status& status) {
  std::string line;
  if (status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kDeadlineExceeded) {
    line = std::string(status.message());
  } else {
    line = absl::StrCat(context, ": ", absl::StatusCodeToString(status.code()),
                        ": ", status.message());
  }
  io.err << "zbppctl: " << PrintableText(line) << "\n";
  return kExitError;
}

std::string Context(const CtlOptions& options) {
  std::string context = CommandName(options.command);
  if (!options.argument.empty())
    absl::StrAppend(&context, " ", options.argument);
  return context;
}

int Submit(const CtlOptions& options, CoordinatorClient& client,
           const CommandIo& io) {
  absl::StatusOr<std::string> yaml = ReadFileToString(options.argument);
  if (!yaml.ok()) {
    return Fail(io, Context(options), absl::NotFoundError(yaml.status().message()));
  }
  absl::StatusOr<v1::JobSpec> spec = client::JobSpecFromYaml(*yaml);
  if (!spec.ok()) return Fail(io, Context(options), spec.status());
  if (absl::Status loaded = client::LoadScheduleFile(options.argument, *spec);
      !loaded.ok()) {
    return Fail(io, Context(options), loaded);
  }
  absl::StatusOr<v1::Job> job = client.SubmitJob(*spec);
  if (!job.ok()) return Fail(io, Context(options), job.status());
  io.out << job->id() << "\n";
  return kExitOk;
}

int Status(const CtlOptions& options, CoordinatorClient& client,
           const CommandIo& io) {
  absl::StatusOr<v1::Job> job =
      client.GetJob(options.argument, v1::JOB_VIEW_FULL);
  if (!job.ok()) return Fail(io, Context(options), job.status());
  if (options.format == "json") {
    absl::StatusOr<std::string> json = JobStatusJson(*job);
    if (!json.ok()) return Fail(io, Context(options), json.status());
    io.out << *json;
  } else {
    io.out << JobStatusTable(*job, io.now);
  }
  return kExitOk;
}

int Watch(const CtlOptions& options, CoordinatorClient& client,
          const CommandIo& io) {
  WatchPrinter printer(io.out, io.out_is_terminal);
  absl::Status streamed = client.WatchJob(
      options.argument,
      [&printer](const v1::JobEvent& event) { return printer.OnEvent(event); });
  printer.Finish();
  if (!streamed.ok()) return Fail(io, Context(options), streamed);
  const v1::JobState state = printer.progress().state;
  std::string why = PrintableText(printer.state_message());
  why = why.empty() ? "" : ": " + why;
  switch (state) {
    case v1::JOB_STATE_SUCCEEDED:
      return kExitOk;
    case v1::JOB_STATE_FAILED:
      io.err << "zbppctl: job " << options.argument << " FAILED" << why << "\n";
      return kExitJobFailed;
    case v1::JOB_STATE_CANCELLED:
      io.err << "zbppctl: job " << options.argument << " CANCELLED" << why
             << "\n";
      return kExitJobCancelled;
    default:
      return Fail(
          io, Context(options),
          absl::UnknownError(absl::StrCat("the stream ended while the job was ",
                                          JobStateName(state))));
  }
}

// The job of `options.argument` in full, with its current schedule version;
// FailedPrecondition before the first.
absl::StatusOr<v1::Job> JobWithSchedule(const CtlOptions& options,
                                        CoordinatorClient& client) {
  absl::StatusOr<v1::Job> job =
      client.GetJob(options.argument, v1::JOB_VIEW_FULL);
  if (!job.ok()) return job.status();
  if (!job->has_schedule() || job->schedule().version() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job has no schedule yet (state ", JobStateName(job->state()), ")"));
  }
  return job;
}

// The schedule version that ran the last completed step of `job` (FULL
// view): Job.schedule, or the older version GetScheduleVersion reads back
// when a later one was published since (a re-solve published after the
// last step once hid the schedule that ran it). Job.schedule
// before the first step.
absl::StatusOr<v1::ScheduleVersion> VersionThatRanLastStep(const v1::Job& job,
                                                           CoordinatorClient& client) {
  const int64_t ran = job.last_step_timeline().schedule_version();
  if (ran == 0 || ran == job.schedule().version()) return job.schedule();
  return client.GetScheduleVersion(job.id(), ran);
}

// The version in force at `step` (VersionInForce, api/schedule_version.h:
// of the versions in publication order, the last one effective at `step` or
// before, so of versions sharing an effective step the later wins), found
// from the job's newest version down: the first effective at `step` or
// before is that one. InvalidArgument naming --step for a step past the
// job's last; NotFound when no version is in force then.
absl::StatusOr<v1::ScheduleVersion> VersionInForceAt(const std::string& job_id, int64_t step,
                                                     CoordinatorClient& client) {
  absl::StatusOr<v1::Job> job = client.GetJob(job_id, v1::JOB_VIEW_BASIC);
  if (!job.ok()) return job.status();
  if (step >= job->spec().steps()) {
    return absl::InvalidArgumentError(absl::StrCat("--step: job ", job_id, " runs steps 0 to ",
                                                   job->spec().steps() - 1, ", got ", step));
  }
  for (int64_t number = job->schedule_version(); number >= 1; --number) {
    absl::StatusOr<v1::ScheduleVersion> version = client.GetScheduleVersion(job_id, number);
    // Numbers are never reused but need not all be held: skip a missing one.
    if (version.status().code() == absl::StatusCode::kNotFound) continue;
    if (!version.ok() || version->effective_step() <= step) return version;
  }
  return absl::NotFoundError(
      absl::StrCat("--step: job ", job_id, " has no schedule version in force at step ", step));
}

// The version `schedule` and `costs` show: --schedule-version N, the one in
// force at --step S, else the job's (FULL view, read into `*job`) version
// that ran its last step when `else_last_step_ran`, its latest otherwise.
absl::StatusOr<v1::ScheduleVersion> ChosenVersion(const CtlOptions& options,
                                                  CoordinatorClient& client,
                                                  absl::StatusOr<v1::Job>* job,
                                                  bool else_last_step_ran) {
  if (options.schedule_version > 0) {
    return client.GetScheduleVersion(options.argument, options.schedule_version);
  }
  if (options.step.has_value()) return VersionInForceAt(options.argument, *options.step, client);
  *job = JobWithSchedule(options, client);
  if (!job->ok()) return job->status();
  if (!else_last_step_ran) return (*job)->schedule();
  return VersionThatRanLastStep(**job, client);
}

int Schedule(const CtlOptions& options, CoordinatorClient& client,
             const CommandIo& io) {
  absl::StatusOr<v1::Job> job;  // Read only without --schedule-version and --step.
  absl::StatusOr<v1::ScheduleVersion> version =
      ChosenVersion(options, client, &job, /*else_last_step_ran=*/true);
  if (!version.ok()) return Fail(io, Context(options), version.status());
  // ParseCommandLine refuses measured-trace with either flag: `job` is read.
  absl::StatusOr<std::string> text = options.format == "measured-trace"
                                         ? RenderMeasuredTrace(*job, *version)
                                         : RenderSchedule(*version, options.format);
  if (!text.ok()) return Fail(io, Context(options), text.status());
  io.out << *text;
  if (!text->empty() && text->back() != '\n') io.out << "\n";
  return kExitOk;
}

int Costs(const CtlOptions& options, CoordinatorClient& client,
          const CommandIo& io) {
  absl::StatusOr<v1::Job> job;
  absl::StatusOr<v1::ScheduleVersion> version =
      ChosenVersion(options, client, &job, /*else_last_step_ran=*/false);
  if (!version.ok()) return Fail(io, Context(options), version.status());
  absl::StatusOr<std::string> text = RenderCostFile(*version);
  if (!text.ok()) return Fail(io, Context(options), text.status());
  io.out << *text;
  return kExitOk;
}

int Report(const CtlOptions& options, CoordinatorClient& client, const CommandIo& io) {
  absl::StatusOr<v1::Job> job = client.GetJob(options.argument, v1::JOB_VIEW_BASIC);
  if (!job.ok()) return Fail(io, Context(options), job.status());
  absl::StatusOr<std::vector<v1::StepSummary>> steps = client.ListSteps(options.argument);
  if (!steps.ok()) return Fail(io, Context(options), steps.status());
  // The versions that ran the first and the last step, read back by number:
  // the job may have published others since (Job.schedule is the latest). A
  // version the coordinator no longer holds is left out of the report.
  std::vector<v1::ScheduleVersion> versions;
  if (!steps->empty()) {
    for (int64_t number : {steps->front().schedule_version(), steps->back().schedule_version()}) {
      if (number < 1 || (!versions.empty() && versions.back().version() == number)) continue;
      absl::StatusOr<v1::ScheduleVersion> version =
          client.GetScheduleVersion(options.argument, number);
      if (version.status().code() == absl::StatusCode::kNotFound) continue;
      if (!version.ok()) return Fail(io, Context(options), version.status());
      versions.push_back(*std::move(version));
    }
  }
  absl::StatusOr<TrainingReport> report = BuildReport(*job, *steps, versions);
  if (!report.ok()) return Fail(io, Context(options), report.status());
  io.out << (options.format == "json" ? ReportJson(*report) : ReportTable(*report));
  return kExitOk;
}

}  // namespace

int RunCommand(const CtlOptions& options, CoordinatorClient& client,
               const CommandIo& io) {
  switch (options.command) {
    case Command::kSubmit:
      return Submit(options, client, io);
    case Command::kStatus:
      return Status(options, client, io);
    case Command::kWatch:
      return Watch(options, client, io);
    case Command::kReport:
      return Report(options, client, io);
    case Command::kSchedule:
      return Schedule(options, client, io);
    case Command::kCosts:
      return Costs(options, client, io);
    case Command::kList: {
      absl::StatusOr<std::vector<v1::Job>> jobs = client.ListJobs();
      if (!jobs.ok()) return Fail(io, Context(options), jobs.status());
      io.out << JobsTable(*jobs, io.now);
      return kExitOk;
    }
    case Command::kCancel: {
      absl::StatusOr<v1::Job> job = client.CancelJob(options.argument);
      if (!job.ok()) return Fail(io, Context(options), job.status());
      io.out << job->id() << " " << JobStateName(job->state()) << "\n";
      return kExitOk;
    }
    case Command::kExport: {
      absl::StatusOr<v1::Job> job = client.GetJob(options.argument, v1::JOB_VIEW_FULL);
      if (!job.ok()) return Fail(io, Context(options), job.status());
      std::string summary;
      absl::Status exported =
          ExportJob(*job, options.out_dir, options.force, ExporterScript(), &summary);
      io.out << summary;
      if (!exported.ok()) return Fail(io, Context(options), exported);
      return kExitOk;
    }
    case Command::kWorkers: {
      absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
      if (!workers.ok()) return Fail(io, Context(options), workers.status());
      io.out << WorkersTable(*workers, io.now);
      return kExitOk;
    }
    case Command::kHelp:
      break;
  }
  io.out << UsageText();
  return kExitOk;
}

}  // namespace zbpp::ctl
