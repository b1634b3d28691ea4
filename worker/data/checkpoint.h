#ifndef ZBPP_WORKER_DATA_CHECKPOINT_H_
#define ZBPP_WORKER_DATA_CHECKPOINT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::worker {

/// Named tensors of one stage (parameters, optimizer state), in the
/// caller's order. Names are the caller's (e.g.
/// "chunk1.block0.attn.qkv.weight"); any non-empty, unique strings.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Names expected in a checkpoint, with their shapes.
using ExpectedShapes =
    std::vector<std::pair<std::string, std::vector<int64_t>>>;

/// The file of `stage` at `step`: `<directory>/step-<step, 8 digits>/
/// stage-<stage, 3 digits>.pt` (more digits when the number needs them).
/// Checkpoints written before files were named per stage hold
/// `rank-<stage, 3 digits>.pt` instead: ReadCheckpoint,
/// ReadCheckpointOfAnyLayout and LatestCompleteCheckpoint read that name
/// where the current one is absent; nothing writes, claims or prunes it.
std::string CheckpointPath(const std::string& directory, int64_t step,
                           int stage);

/// The steps a job writes checkpoints at (CheckpointSpec.interval_steps):
/// every step s in [first_step, end_step) with (s + 1) % interval_steps == 0.
struct CheckpointSteps {
  int64_t first_step = 0;      ///< The attempt's start step.
  int64_t end_step = 0;        ///< JobSpec.steps: one past the last step.
  int64_t interval_steps = 0;  ///< >= 1; 0 means none.

  bool Contains(int64_t step) const;
};

/// Writes the checkpoint file of `stage` at `step` (CheckpointPath), in
/// LibTorch's serialize format (torch::serialize::OutputArchive, one entry
/// per name; loadable by torch.jit.load), creating the directories.
///
/// Durable and atomic: the bytes go to `<file>.tmp-<pid>` in the same
/// directory (opened with O_NOFOLLOW), which is fsynced and renamed over the
/// file, and the step directory is fsynced (so is `directory` when the step
/// directory is new); a reader sees the old file whole or the new one
/// whole, a crash leaves at most the temporary file (which
/// LatestCompleteCheckpoint ignores), and a failed write removes it. When
/// it returns OK the file survives a power cut.
///
/// Links are not followed: a step directory that is a symbolic link (or no
/// directory) is FailedPrecondition naming it, and nothing is written.
///
/// Tensors may live on any device; they are stored as CPU tensors with
/// their dtype and shape (non-contiguous ones are fine).
///
/// Errors: InvalidArgument for step < 0, stage < 0, an empty or duplicate
/// name or an undefined tensor; otherwise the errno's code (disk full →
/// ResourceExhausted, ...) with a message naming the path and the errno
/// text; Internal when LibTorch fails to serialize.
///
/// Blocking (file I/O and fsync). Thread-safe for different (directory,
/// step, stage); one writer per file at a time within a process.
absl::Status WriteCheckpoint(const std::string& directory, int64_t step,
                             int stage, const NamedTensors& tensors);

/// Reads the checkpoint file of `stage` at `step` and returns its tensors in
/// the order of `expected`, as CPU tensors with the stored dtypes. The file
/// may have been written by any job (CheckpointSpec.resume_step); only its
/// contents are checked.
///
/// The file must hold exactly the expected names, each with the expected
/// shape. Errors: NotFound naming the missing file; FailedPrecondition
/// naming the file and the first mismatch: a tensor with another shape
/// (`checkpoint F does not match the model: "w" has shape [384, 128], the
/// model expects [192, 64]`), an expected name it lacks, or a name the model
/// does not expect; FailedPrecondition naming the path when the step
/// directory or the file is a symbolic link or not what it should be (links
/// are not followed: O_NOFOLLOW on both); DataLoss when the file is not a
/// readable checkpoint; InvalidArgument for step < 0 or stage < 0. Blocking;
/// thread-safe.
absl::StatusOr<NamedTensors> ReadCheckpoint(const std::string& directory,
                                            int64_t step, int stage,
                                            const ExpectedShapes& expected);

/// As ReadCheckpoint when `stage`'s own file holds exactly the names of
/// `expected` (the same layout; its errors name the file); otherwise
/// (a checkpoint written under another layout, PipelineSpec.layout, or
/// another number of stages: every parameter keeps its global name) each
/// expected tensor is taken from whichever stage's file at `step` holds it,
/// reading files stage-000, stage-001, ... until all are found. Each tensor's
/// shape is checked; names of other stages' files that `expected` lacks are
/// ignored. Errors as ReadCheckpoint; FailedPrecondition naming the file of
/// a tensor whose shape differs, or the step directory and the first
/// expected name that no file holds. Blocking; thread-safe.
absl::StatusOr<NamedTensors> ReadCheckpointOfAnyLayout(const std::string& directory,
                                                       int64_t step, int stage,
                                                       const ExpectedShapes& expected);

/// The highest step under `directory` whose stage files exist for every stage
/// in [0, stages), whoever wrote them: a step some stage did not finish
/// writing is skipped, and so are step directories and files that are
/// symbolic links. Temporary files of unfinished writes do not count.
///
/// Errors: InvalidArgument for stages < 1; NotFound (naming the directory)
/// when it does not exist or holds no complete step; the errno's code when
/// the directory cannot be listed. Blocking; thread-safe.
absl::StatusOr<int64_t> LatestCompleteCheckpoint(const std::string& directory,
                                                 int stages);

// Ownership. A job's checkpoints belong to the job: beside each stage file
// `stage-<s>.pt` it writes `stage-<s>.owner`, one line naming the owner (the
// job id and its spec's fingerprint: the same for every attempt of the job
// and across coordinator restarts). Pruning removes only files whose owner
// file names the pruning job; a step the job is about to write must be free
// of anyone else's files. Nothing here follows a symbolic link.

/// Marks `stage`'s file at `step` as `owner`'s, before WriteCheckpoint: makes
/// the step directory (as WriteCheckpoint does) and writes the owner file
/// durably (temporary file, fsync, rename, directory fsync).
///
/// Errors: InvalidArgument for step < 0, stage < 0, or an owner that is
/// empty, longer than 256 bytes or holds a line break; FailedPrecondition
/// naming the path when the step directory is a symbolic link or no
/// directory, or `stage`'s file or owner file there belongs to someone else
/// (another owner, no owner file, a link): zbpp never overwrites a
/// checkpoint it did not write for this owner; the errno's code naming the
/// path when a file operation fails. Blocking; thread-safe for different
/// (directory, step, stage).
absl::Status ClaimCheckpoint(const std::string& directory, int64_t step, int stage,
                             const std::string& owner);

/// Checks, when an attempt starts and before any write, that every step in
/// `steps` is free for `owner` under `directory`: its step directory is
/// absent, or a real directory whose stage files (of stages [0, stages)) are
/// absent or `owner`'s (an earlier attempt of the same job). Then removes
/// the temporary files (`<file>.tmp-<pid>`) that a crash of an earlier
/// attempt left of `stage`'s writes at those steps (no write of the stage is
/// in flight then). Steps outside `steps` are neither checked nor touched.
///
/// Returns the number of temporary files removed. Errors: InvalidArgument
/// for stage outside [0, stages), an invalid owner (ClaimCheckpoint) or
/// steps.interval_steps < 1; FailedPrecondition naming the step directory
/// or file and its owner ("belongs to job-3 spec …", "has no owner file",
/// "is a symbolic link") for the first step that is not free; the errno's
/// code naming the path when listing or removing fails. Blocking.
absl::StatusOr<int> PrepareCheckpointDirectory(const std::string& directory, int stage,
                                               int stages, const std::string& owner,
                                               const CheckpointSteps& steps);

/// After `stage` wrote its file at `written_step` (ClaimCheckpoint, then
/// WriteCheckpoint), removes `stage`'s files (checkpoint, owner file,
/// temporary files) of `owner`'s steps older than the `keep_last` newest of
/// `owner`'s complete steps up to `written_step` (complete: every stage in
/// [0, stages) has its file there, owned by `owner`), and a step directory
/// once it is empty. Never removed: `written_step`, any step after it,
/// anything not `owner`'s (another job's checkpoints at any step, files
/// without an owner file, symbolic links and what they point to). Nothing
/// is removed while fewer than `keep_last` of `owner`'s steps are complete,
/// and an incomplete step never counts: a crash between two stages' writes
/// leaves a complete checkpoint to restart from. Each stage prunes its own
/// files (CheckpointSpec.keep_last, after each write).
///
/// Returns the number of checkpoint files removed. Errors: InvalidArgument
/// for stage outside [0, stages), keep_last < 1 or an invalid owner; the
/// errno's code naming the path when listing or removing fails. Blocking;
/// thread-safe for different stages.
absl::StatusOr<int> PruneCheckpoints(const std::string& directory, int stage, int stages,
                                     int keep_last, const std::string& owner,
                                     int64_t written_step);

/// A stage's write of its own file at `step`, as a job writes its
/// checkpoints (and snapshots): ClaimCheckpoint for `owner` first (a file
/// is never without its owner file), WriteCheckpoint, then, when keep_last
/// >= 1, PruneCheckpoints of the stage's older steps. Both files are durable
/// when it returns OK, so a report of the write never names a file a crash
/// could lose. A failed prune costs disk, not the file just written: it is
/// logged to stderr and not returned. Errors: ClaimCheckpoint's and
/// WriteCheckpoint's. Blocking; thread-safe for different (directory,
/// stage).
absl::Status WriteOwnedCheckpoint(const std::string& directory, int64_t step, int stage,
                                  int stages, const std::string& owner,
                                  const NamedTensors& tensors, int keep_last);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_CHECKPOINT_H_
