// Human-readable output of zbppctl: job and worker tables and the one-job
// status page. Pure functions of the protos (and of "now", for ages).

#ifndef ZBPP_CLIENT_ZBPPCTL_TABLES_H_
#define ZBPP_CLIENT_ZBPPCTL_TABLES_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "zbpp/v1/job.pb.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::ctl {

/// `value` printed with `format`, one printf conversion of a double ("%.4f",
/// "%.3f s"), for a cell or a line: "-" for nan; past 1e9 in magnitude
/// (a diverged loss, a forged time) the conversion becomes "%.4g", so 1e308
/// prints as "1e+308", not as 309 digits.
std::string Number(const char* format, double value);

/// `name` without `prefix` when it starts with it: ShortEnumName(
/// "WORKER_STATE_IDLE", "WORKER_STATE_") is "IDLE".
std::string ShortEnumName(const std::string& name, const std::string& prefix);

/// `mode` without its prefix: "POST", "SYNCHRONOUS", "AUTO"; empty for
/// UNSPECIFIED (a job before its first schedule version).
std::string ValidationModeName(v1::ValidationMode mode);

/// The spec's validation policy by name: "AUTO" when left unset.
std::string ValidationPolicyName(const v1::JobSpec& spec);

/// The job's precision in capitals, "FP32" when left unset
/// (zbpp.v1.Precision): "FP32", "BF16" or "FP16".
std::string PrecisionName(const v1::JobSpec& spec);

/// The transport the job runs on, with why: "NCCL (auto: every worker has
/// a GPU of its own)" once an attempt resolved it (Job.transport and
/// transport_reason); before that, what the spec asks, e.g. "AUTO (decided
/// when workers are assigned)".
std::string TransportSummary(const v1::Job& job);

/// The blocks of each virtual stage with how they were chosen (Job.layout,
/// layout_reason): "[6, 2] (auto: [6, 2] predicts a step 1.23x shorter than
/// the even split [4, 4])"; "-" for a job stored before layouts were
/// recorded.
std::string LayoutSummary(const std::vector<int>& layout, const std::string& reason);

/// Validation in one phrase: the mode in force ("-" when none yet), the
/// policy where it differs, and the counters:
/// "POST (policy AUTO): 3 rollbacks, 1 skipped, 2 clipped".
std::string ValidationSummary(const std::string& mode,
                              const std::string& policy, int64_t rollbacks,
                              int64_t skipped_steps, int64_t clipped_steps);

/// One state change of a job (Job.transitions) on one line:
/// "RUNNING -> DEGRADED at step 15 (12:03:04): worker w-3 lost ...", the
/// step being Job.steps_completed then and the time of day UTC (none when
/// unset); no ": " part when the change set no message. PrintableText: the message is the
/// coordinator's (a worker's error inside) and may hold control bytes.
std::string TransitionLine(const v1::JobTransition& transition);

/// `now - then` rounded down to one unit: "42s", "5m", "3h", "2d"; "-" when
/// `then` is absl::InfinitePast().
std::string Age(absl::Time then, absl::Time now);

/// `zbppctl list`: a header and one aligned row per job (ID, NAME, STATE,
/// STEP as completed/steps, SCHEDULE as name and version, LOSS, BUBBLE as
/// the last step's measured bubble rate, AGE), in the given order.
std::string JobsTable(const std::vector<v1::Job>& jobs, absl::Time now);

/// `zbppctl status JOB`: one "key: value" line per field (state, step,
/// pipeline shape as "P stages x D replicas (N workers)", loss, tokens/s,
/// bubble rates, schedule with the reason for its version (and its
/// detail), validation as the mode in force, the spec's policy where it
/// differs and the rollback / skipped / clipped counts on one line,
/// precision, transport (TransportSummary), recoveries, the newest state
/// change (TransitionLine) with how many are listed, the parameter
/// checksum once set, checkpoint, age),
/// then a table of the last step's per-stage measurements when the job has
/// any (with D > 1 also each stage's REDUCE_S and EXPOSED_S seconds).
std::string JobStatusTable(const v1::Job& job, absl::Time now);

/// `zbppctl workers`: one aligned row per worker (ID, NAME, HOST, DEVICE,
/// MEMORY in GiB, STATE, JOB, STAGE, REPLICA, PHASE, HEARTBEAT age).
std::string WorkersTable(const std::vector<v1::Worker>& workers,
                         absl::Time now);

}  // namespace zbpp::ctl

#endif  // ZBPP_CLIENT_ZBPPCTL_TABLES_H_
