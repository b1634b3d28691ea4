#ifndef ZBPP_SCHEDULER_SCHEDULE_IO_H_
#define ZBPP_SCHEDULER_SCHEDULE_IO_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {

/// CSV as torchtitan loads it: one row per stage, one action per cell in
/// the text form of ActionToString (`0F0,0F1,0I0,0W0,...`). Rows may have
/// different lengths; nothing else is written. Vocabulary passes are
/// written in zbpp's own form (`3S0`, `3T0`), which ScheduleFromCsv reads
/// back and PyTorch pipelining does not.
std::string ScheduleToCsv(const Schedule& schedule);

/// Parses ScheduleToCsv's form. The CSV carries only actions, so the caller
/// says how virtual stages are placed; p is the number of rows, v and m are
/// inferred (largest virtual stage + 1 over p, largest microbatch + 1). Errors:
/// InvalidArgument naming the row, the cell and why.
absl::StatusOr<Schedule> ScheduleFromCsv(std::string_view csv,
                                         Placement placement);

/// What ScheduleFromPytorchCsv read: the schedule and what else the file held.
struct PytorchCsvImport {
  /// The compute actions, with `stage_of` taken from which row holds
  /// each virtual stage (so a V schedule's file imports with V placement).
  Schedule schedule;
  /// SEND_F, RECV_F, SEND_B and RECV_B actions read, each checked against the
  /// communication the compute actions imply.
  int communication_actions = 0;
  /// UNSHARD and RESHARD actions (FSDP's all-gather and release of a virtual stage's
  /// parameters) read and ignored: zbpp's cost model has no such cost.
  int ignored_actions = 0;
  /// OVERLAP_F_B actions read, each split into its sub-actions in order.
  int overlapped_actions = 0;
};

/// Parses a schedule as PyTorch 2.11's `torch.distributed.pipelining` writes
/// it (`_PipelineScheduleRuntime._dump_csv`, schedules.py): one row per stage,
/// one action per cell in `_Action`'s text form, in either of its formats:
///   * "compute_only": `{virtual stage}{F|I|W|B}{microbatch}` (PyTorch's B is the
///     fused backward, zbpp's BW; I the input gradient, zbpp's B), empty
///     cells for idle slots, `{virtual stage}REDUCE_GRAD`, and `(a;b)OVERLAP_F_B`
///     (DualPipeV's overlapped forward and backward), read as a then b;
///   * "compute_comms": the same plus `{virtual stage}SEND_F{mb}`, `RECV_F`,
///     `SEND_B`, `RECV_B` and `{virtual stage}UNSHARD` / `RESHARD`.
/// ScheduleToCsv's form is the compute-only one. p is the number of rows,
/// the virtual stages each row holds give `stage_of` (every virtual stage in exactly
/// one row, every row the same number v of them), m is the largest
/// microbatch + 1.
///
/// When the file holds any communication action, every dependency between
/// two stages that the compute actions imply (F of s on another stage
/// than F of s+1; I or B of s on another stage than that of s-1) must have
/// its SEND after the producing action in the sender's row and its RECV
/// before the consuming action in the receiver's row, exactly once, and no
/// other SEND or RECV may appear. UNSHARD and RESHARD are ignored.
///
/// PyTorch pipelining has no vocabulary passes: a cell holding one (`3S0`)
/// is refused.
///
/// Errors: InvalidArgument naming the row, the cell and why, e.g.
/// `row 1 (stage 0), cell 5 (0SEND_F3): virtual stage 1 is on the same stage, no
/// SEND_F is needed` or `row 2 (stage 1), cell 7 (1F2): no 1SEND_F2 after
/// it`. Whether the schedule is complete, deadlock-free and within memory is
/// the simulator's to say (CheckSchedule, Simulate). Thread-safe (pure).
absl::StatusOr<PytorchCsvImport> ScheduleFromPytorchCsv(std::string_view csv);

/// JSON object {"name", "stages", "chunks", "microbatches",
/// "stage_of": [..], "actions": [["0F0", ...], ...]}.
std::string ScheduleToJson(const Schedule& schedule);

/// Parses ScheduleToJson's form. Errors: InvalidArgument naming the field.
absl::StatusOr<Schedule> ScheduleFromJson(std::string_view json);

/// A schedule file as a user gives one (`zbpp-sched simulate --import`, a
/// job spec's `schedule.file`): zbpp's JSON when its first non-blank
/// character is '{' (the counts are then 0), PyTorch pipelining's CSV
/// otherwise. A schedule without a name is named "imported". Errors: those
/// of ScheduleFromJson and ScheduleFromPytorchCsv. Thread-safe (pure).
absl::StatusOr<PytorchCsvImport> ImportSchedule(std::string_view text);

/// How `schedule` places its virtual stages: kLoop or kV when its
/// stage_of is PlaceVirtualStages' for that placement. InvalidArgument
/// otherwise (the problem's per-stage M_B unit, MbUnitBytes, needs one of
/// the two). Thread-safe (pure).
absl::StatusOr<Placement> PlacementOf(const Schedule& schedule);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_SCHEDULE_IO_H_
