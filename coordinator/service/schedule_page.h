// The coordinator's schedule page (deploy/README.md): HTML over the core's jobs,
// served on the metrics HTTP port by metrics::MetricsServer. It lives beside
// the gRPC services, not in the core, so that the core stays free of HTTP.

#ifndef ZBPP_COORDINATOR_SERVICE_SCHEDULE_PAGE_H_
#define ZBPP_COORDINATOR_SERVICE_SCHEDULE_PAGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/coordinator.h"
#include "metrics/metrics_server.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/schedule.pb.h"

namespace zbpp::coordinator {

/// The last completed step of `job` (FULL view) as the workers measured it,
/// drawn by sched::ToSvg: one row per stage, each stage's
/// clock from its own step start, F/B/W coloured, idle left blank; its
/// actions named by `ran`, the schedule version that step ran
/// (StepTimeline.schedule_version: VersionThatRanLastStep), which later
/// versions may have followed. FailedPrecondition before the first
/// measured step or when `ran` is another version. Pure.
absl::StatusOr<std::string> MeasuredStepSvg(const v1::Job& job, const v1::ScheduleVersion& ran);

/// The schedule `version` as planned: simulated under its own cost model
/// and drawn by sched::ToSvg — the picture `zbppctl schedule JOB --format
/// svg` writes. Errors of ScheduleFromProto, ProblemFromCostModel and
/// sched::Simulate. Pure.
absl::StatusOr<std::string> PlannedScheduleSvg(const v1::ScheduleVersion& version);

/// The schedule version that ran the last completed step of `job` (FULL
/// view): Job.schedule when that is it, else read from `core` (every
/// version stays there, Coordinator::GetScheduleVersion); Job.schedule
/// before the first step. NotFound when the core lacks it.
absl::StatusOr<v1::ScheduleVersion> VersionThatRanLastStep(const Coordinator& core,
                                                           const v1::Job& job);

/// The page at "/": a table of `jobs` (newest first, each linking to its
/// own page) followed by the first job's charts (JobPageHtml's, `first_ran`
/// the version its last step ran). Refreshes itself every
/// `refresh_seconds` while any job is not terminal. Pure.
std::string JobsPageHtml(const std::vector<v1::Job>& jobs, const v1::ScheduleVersion& first_ran,
                         int refresh_seconds = 2);

/// The page of one job (FULL view) at "/jobs/ID": state and progress, the
/// last step as measured above the same schedule version as planned
/// (`ran`, the version that step ran: VersionThatRanLastStep; a note names
/// a later one), and per stage the bubble rate and peak activation memory
/// (measured and predicted, MiB; "-" where 0). Refreshes itself every `refresh_seconds` while the job is not terminal.
/// Pure.
std::string JobPageHtml(const v1::Job& job, const v1::ScheduleVersion& ran,
                        int refresh_seconds = 2);

/// Answers a GET of `path` from `core`: "/" (JobsPageHtml), "/jobs/ID"
/// (JobPageHtml), "/jobs/ID/measured.svg" and "/jobs/ID/planned.svg" (the
/// two pictures alone); 404 naming the path for anything else or an unknown
/// job. Thread-safe (the core is); `core` must outlive the server that
/// calls this.
metrics::HttpResponse ServeSchedulePage(const Coordinator& core, const std::string& path);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_SERVICE_SCHEDULE_PAGE_H_
