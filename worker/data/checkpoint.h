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

/// Named tensors of one pipeline rank (parameters, optimizer state), in the
/// caller's order. Names are the caller's (e.g.
/// "chunk1.block0.attn.qkv.weight"); any non-empty, unique strings.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Names expected in a checkpoint, with their shapes.
using ExpectedShapes =
    std::vector<std::pair<std::string, std::vector<int64_t>>>;

/// The file of `rank` at `step`: `<directory>/step-<step, 8 digits>/
/// rank-<rank, 3 digits>.pt` (more digits when the number needs them).
std::string CheckpointPath(const std::string& directory, int64_t step,
                           int rank);

/// Writes the checkpoint file of `rank` at `step` (CheckpointPath), in
/// LibTorch's serialize format (torch::serialize::OutputArchive, one entry
/// per name; loadable by torch.jit.load), creating the directories.
///
/// Atomic: the bytes go to `<file>.tmp-<pid>` in the same directory, which
/// is fsynced and renamed over the file, and the directory is fsynced; a
/// reader sees the old file whole or the new one whole, a crash leaves at
/// most the temporary file (which LatestCompleteCheckpoint ignores), and a
/// failed write removes it.
///
/// Tensors may live on any device; they are stored as CPU tensors with
/// their dtype and shape (non-contiguous ones are fine).
///
/// Errors: InvalidArgument for step < 0, rank < 0, an empty or duplicate
/// name or an undefined tensor; otherwise the errno's code (disk full →
/// ResourceExhausted, ...) with a message naming the path and the errno
/// text; Internal when LibTorch fails to serialize.
///
/// Blocking (file I/O and fsync). Thread-safe for different (directory,
/// step, rank); one writer per file at a time within a process.
absl::Status WriteCheckpoint(const std::string& directory, int64_t step,
                             int rank, const NamedTensors& tensors);

/// Reads the checkpoint file of `rank` at `step` and returns its tensors in
/// the order of `expected`, as CPU tensors with the stored dtypes.
///
/// The file must hold exactly the expected names, each with the expected
/// shape. Errors: NotFound naming the missing file; FailedPrecondition
/// naming the file and the first mismatch: a tensor with another shape
/// (`checkpoint F does not match the model: "w" has shape [384, 128], the
/// model expects [192, 64]`), an expected name it lacks, or a name the model
/// does not expect; DataLoss when the file is not a readable checkpoint;
/// InvalidArgument for step < 0 or rank < 0. Blocking; thread-safe.
absl::StatusOr<NamedTensors> ReadCheckpoint(const std::string& directory,
                                            int64_t step, int rank,
                                            const ExpectedShapes& expected);

/// The highest step under `directory` whose rank files exist for every rank
/// in [0, ranks): a step some rank did not finish writing is skipped.
/// Temporary files of unfinished writes do not count.
///
/// Errors: InvalidArgument for ranks < 1; NotFound (naming the directory)
/// when it does not exist or holds no complete step; the errno's code when
/// the directory cannot be listed. Blocking; thread-safe.
absl::StatusOr<int64_t> LatestCompleteCheckpoint(const std::string& directory,
                                                 int ranks);

/// Removes `rank`'s files of every step older than the `keep_last` newest
/// complete steps under `directory` (complete: every rank in [0, ranks) has
/// its file; see LatestCompleteCheckpoint), and a step directory once it is
/// empty. Nothing is removed while fewer than `keep_last` steps are
/// complete, and an incomplete newer step never counts: a crash between two
/// ranks' writes leaves a complete checkpoint to restart from. Each rank
/// prunes its own files (CheckpointSpec.keep_last, after each write).
///
/// Returns the number of files removed. Errors: InvalidArgument for rank
/// outside [0, ranks) or keep_last < 1; the errno's code naming the path
/// when listing or removing fails. Blocking; thread-safe for different
/// ranks.
absl::StatusOr<int> PruneCheckpoints(const std::string& directory, int rank, int ranks,
                                     int keep_last);

/// Removes the temporary files (`<file>.tmp-<pid>`, WriteCheckpoint) of
/// `rank`'s writes that a crash left under `directory`. Call when the rank
/// starts, before it writes: no write of its is in flight then. Returns the
/// number of files removed. Errors: InvalidArgument for rank < 0; the
/// errno's code naming the path when listing or removing fails. Blocking.
absl::StatusOr<int> RemoveUnfinishedCheckpointWrites(const std::string& directory, int rank);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_CHECKPOINT_H_
