#ifndef ZBPP_COORDINATOR_CORE_JOB_SPEC_CHECK_H_
#define ZBPP_COORDINATOR_CORE_JOB_SPEC_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "coordinator/core/spec_refusal.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::coordinator {

/// The name of the policy that lets the coordinator pick the schedule
/// (`schedule.name: auto`); every other name is a scheduler registry name.
inline constexpr char kAutoScheduleName[] = "auto";

/// Upper bounds on the pipeline's shape. Not in the paper: they keep one
/// submitted spec from asking the solver (at submission, planning.h, and at
/// every re-solve) for minutes of work. Measured on 2 cores: ZB-V at p = 128, m = 1024
/// takes about 4 s, at p = 256, m = 4096 about 40 s and 1.5 GB.
inline constexpr int kMaxStages = 128;         ///< pipeline.stages.
inline constexpr int kMaxVirtualStages = 512;  ///< stages * chunks.
inline constexpr int kMaxMicrobatches = 1024;  ///< pipeline.microbatches.
/// pipeline.stages * pipeline.data_parallel: the workers of one job. Every
/// step the coordinator aggregates one report from each (a few hundred
/// bytes per action), and a schedule version goes to each.
inline constexpr int kMaxWorkersPerJob = 4096;

/// Upper bounds on the model's sizes, far above any model trained today:
/// they keep every size a worker derives (4·hidden, vocab·hidden elements,
/// seq_len² attention scores) within int32 and the allocations it makes
/// finite, so that a typo fails at submission instead of on every worker.
inline constexpr int kMaxHidden = 65536;               ///< model.hidden.
inline constexpr int kMaxFfnHidden = 4 * kMaxHidden;   ///< model.ffn_hidden.
inline constexpr int kMaxVocab = 1 << 20;              ///< model.vocab.
inline constexpr int kMaxSeqLen = 131072;              ///< model.seq_len.
inline constexpr int kMaxLayers = 4096;                ///< model.layers.
inline constexpr int kMaxMicrobatchSize = 65536;       ///< pipeline.microbatch_size.
/// steps: a billion optimizer steps (decades at one a second).
inline constexpr int64_t kMaxSteps = 1000000000;
/// checkpoint.directory and dataset.text_file: Linux's PATH_MAX less the
/// terminating zero.
inline constexpr size_t kMaxPathBytes = 4095;

/// Checks every rule of `spec` that a user can break (the comments of
/// proto/zbpp/v1/job_spec.proto) and that needs no scheduler, before
/// anything is stored. How the fields fit the schedule (ZB-H2's m >= 2p,
/// 1F1B-interleaved's m % p == 0, layers that divide into the virtual
/// stages, a fixed schedule's peak memory above the limit) is planning's
/// to say (PlanJob, planning.h, runs this first).
///
/// Returns OK or InvalidArgument carrying a SpecRefusal (spec_refusal.h):
/// the offending field's path and the reason, in the message as
/// "field: reason", e.g.
///   "pipeline.microbatches: must be >= 1, got 0"
///   "schedule.name: unknown schedule \"zb-h3\"; known: auto gpipe ..."
///   "schedule.memory_limit_m_b: 0.5 is below one microbatch (1 M_B)"
///   "dataset: required"
/// The first broken rule is reported (fields in proto order).
/// Thread-safe (pure).
absl::Status CheckJobSpecFields(const zbpp::v1::JobSpec& spec);

/// The rules of CheckJobSpecFields for the fields planning reads (model,
/// pipeline, schedule), so that InitialProblem can be asked of any spec.
/// Errors as CheckJobSpecFields. Thread-safe (pure).
absl::Status CheckPlanningFields(const zbpp::v1::JobSpec& spec);

/// PipelineSpec.layout against the job's `virtual_stages` (stages *
/// chunks): empty needs model.layers >= them (a block each), and divisible
/// by them under layout_policy EVEN; otherwise one entry per virtual stage,
/// each >= 1, summing to model.layers. InvalidArgument (a refusal naming
/// "pipeline.layout", or "model.layers" for an empty layout) otherwise.
/// Thread-safe (pure).
absl::Status CheckLayout(const zbpp::v1::JobSpec& spec, int64_t virtual_stages);

/// The field that holds the memory limit, where a refusal about it is
/// reported: schedule.memory_limit_bytes or schedule.memory_limit_m_b;
/// "schedule.name" when none is set (the limit is then the schedule's
/// own). Thread-safe (pure).
std::string LimitField(const zbpp::v1::SchedulePolicy& schedule);

/// The refusal a user of `spec` reads when the scheduler refuses its
/// problem with `refusal`: under the field of the input the scheduler
/// names as data (sched::RefusedInputOf: pipeline.microbatches,
/// pipeline.chunks, or the limit's field, LimitField), else schedule.name;
/// the reason is the scheduler's message. Thread-safe (pure).
SpecRefusal RefusalOfSchedule(const zbpp::v1::JobSpec& spec,
                              const absl::Status& refusal);

}  // namespace zbpp::coordinator

#endif  // ZBPP_COORDINATOR_CORE_JOB_SPEC_CHECK_H_
