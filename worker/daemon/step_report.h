#ifndef ZBPP_WORKER_DAEMON_STEP_REPORT_H_
#define ZBPP_WORKER_DAEMON_STEP_REPORT_H_

#include <cstdint>

#include "scheduler/schedule.h"
#include "worker/runtime/stage_trainer.h"
#include "zbpp/v1/worker.pb.h"

namespace zbpp::worker {

/// What one step measured on stage `stage`, into its report
/// (worker.proto ReportStepRequest): each action's start and end and the
/// step's seconds from `result.timeline`; the idle and communication
/// seconds and the breakdown of the step and of the gap before it
/// (BreakDownSpan over the stage's actions in `schedule`, which the step
/// ran; a reduction is communication, not compute); the loss, the local
/// gradient norm and inf/nan flag; the validations settled with the step
/// (their decision from the clip coefficient: 0 SKIPPED, below 1 CLIPPED,
/// else COMMITTED); the process's peak resident memory and the step's peak
/// activation memory, bytes. The report's identity (job, attempt, step,
/// stage, version) is the caller's. Thread-compatible.
void FillStepMeasurements(const StepResult& result, const sched::Schedule& schedule, int stage,
                          v1::ReportStepRequest& report);

/// This process's peak resident memory, bytes (getrusage's ru_maxrss).
uint64_t PeakResidentBytes();

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DAEMON_STEP_REPORT_H_
