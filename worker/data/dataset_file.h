#ifndef ZBPP_WORKER_DATA_DATASET_FILE_H_
#define ZBPP_WORKER_DATA_DATASET_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::worker {

/// Where a worker may open dataset files (`zbpp-worker --data-root DIR`,
/// required and repeatable): canonical directories (realpath, no trailing
/// slash). `zbpp-worker` refuses to start without one; `--data-root /`
/// confines nothing (the explicit opt-out). Empty only in-process (tests
/// that build a runner by hand): unconfined. Checkpoint directories are not
/// confined by it, nor the builtin corpora (read from Debian's packages).
struct DataRoots {
  std::vector<std::string> directories;
};

/// Checks each of `directories` (the flag's values) and resolves it with
/// realpath. Errors (InvalidArgument, naming `flag` and the directory): not
/// an absolute path, does not exist, not a directory. Thread-safe.
absl::StatusOr<DataRoots> ResolveDataRoots(const std::vector<std::string>& directories,
                                           const std::string& flag);

/// Bounds on what a dataset file may hold, in bytes.
inline constexpr int64_t kMaxTextFileBytes = int64_t{2} << 30;    // held in memory
inline constexpr int64_t kMaxTokenFileBytes = int64_t{1} << 40;  // read where needed

/// A dataset file kept open and read at explicit offsets (pread), never
/// memory-mapped: a file truncated under a mapping kills the reading
/// process with SIGBUS, while a short read here is an error naming the
/// file. Closed on destruction. Immutable; thread-safe.
class DatasetFile {
 public:
  ~DatasetFile();
  DatasetFile(const DatasetFile&) = delete;
  DatasetFile& operator=(const DatasetFile&) = delete;

  /// The file's size in bytes when it was opened.
  int64_t size() const { return size_; }
  /// The DatasetSpec field and path, for messages: `dataset.tokens.path "/d/x.bin"`.
  const std::string& description() const { return description_; }

  /// Reads `bytes` bytes at byte `offset` into `out` (offset, bytes >= 0;
  /// offset + bytes <= size()). Errors: DataLoss naming the file, the
  /// offset and both sizes when the file holds fewer bytes now (it shrank
  /// since it was opened: dataset files must not change while a job runs);
  /// the errno's code naming the file when the read fails. Blocking;
  /// thread-safe.
  absl::Status ReadAt(int64_t offset, int64_t bytes, uint8_t* out) const;

 private:
  friend absl::StatusOr<std::shared_ptr<const DatasetFile>> OpenDatasetFile(
      const std::string&, const std::string&, const DataRoots&, int64_t);
  DatasetFile(int fd, int64_t size, std::string description)
      : fd_(fd), size_(size), description_(std::move(description)) {}

  int fd_;
  int64_t size_;
  std::string description_;
};

/// Reads the whole dataset file `path` (the DatasetSpec field `field`, for
/// messages) into memory, opened as OpenDatasetFile describes; at most
/// `max_bytes`. Errors as OpenDatasetFile's, plus the errno's code (naming
/// the path) for a failed read. Blocking; thread-safe.
absl::StatusOr<std::string> ReadDatasetFile(const std::string& path, const std::string& field,
                                            const DataRoots& roots, int64_t max_bytes);

/// Opens the dataset file `path` for reads at offsets (DatasetFile::ReadAt:
/// nothing is read yet), opened as below; at most `max_bytes`. Blocking only
/// for the open; thread-safe.
///
/// How a dataset file is opened, for ReadDatasetFile and OpenDatasetFile:
/// * With data roots, `path` is resolved with realpath and must lie under
///   one of them; the file actually opened (/proc/self/fd) is checked again,
///   so a link swapped in meanwhile cannot lead out. A path outside the
///   roots, whether it exists or not, is PermissionDenied "`field` \"path\":
///   outside the worker's data roots (--data-root)": nothing about it (its
///   existence, size or content) appears in the message.
/// * The open never blocks (O_NONBLOCK: a FIFO with no writer does not hang
///   the worker) and only a regular file is accepted: anything else (FIFO,
///   device such as /dev/zero, directory, socket) is InvalidArgument naming
///   the field and the file's kind. A file larger than `max_bytes` is
///   InvalidArgument with both numbers.
/// * NotFound for a missing file, PermissionDenied for one the worker may not
///   read; each naming the field and the path.
absl::StatusOr<std::shared_ptr<const DatasetFile>> OpenDatasetFile(const std::string& path,
                                                                   const std::string& field,
                                                                   const DataRoots& roots,
                                                                   int64_t max_bytes);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_DATASET_FILE_H_
