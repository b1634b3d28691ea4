// zbppctl export: a job's checkpoint as a Hugging Face model directory,
// written by the exporter script (scripts/export; scripts/hf/export.py says
// what it writes) from the job as `zbppctl status --format json` prints it.

#ifndef ZBPP_CLIENT_ZBPPCTL_EXPORT_H_
#define ZBPP_CLIENT_ZBPPCTL_EXPORT_H_

#include <string>

#include "absl/status/status.h"
#include "zbpp/v1/job.pb.h"

namespace zbpp::ctl {

/// The exporter to run: $ZBPP_EXPORT_SCRIPT when set, else this source
/// tree's scripts/export (fixed when zbppctl is built). Thread-safe.
std::string ExporterScript();

/// Runs `script --job FILE --out out_dir [--force]` (--force when `force`:
/// the script refuses a non-empty out_dir without it), FILE a temporary file holding
/// `job` (GetJob's FULL view: its spec, checkpoint directory and last
/// checkpoint step) as JobStatusJson prints it, removed afterwards. The
/// script's stdout (one summary line) is appended to `*stdout_text`; its
/// stderr is kept for the error.
///
/// Errors: FailedPrecondition when the job has no checkpoint yet;
/// NotFound when `script` cannot be run (naming it and
/// ZBPP_EXPORT_SCRIPT); InvalidArgument with the script's last stderr line
/// (e.g. "export: --checkpoint /x: No such file or directory") when it
/// exits 2, Internal with it otherwise. Blocking (the script loads torch
/// and reads every stage's file); thread-compatible.
absl::Status ExportJob(const v1::Job& job, const std::string& out_dir, bool force,
                       const std::string& script, std::string* stdout_text);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_EXPORT_H_
