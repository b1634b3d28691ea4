#ifndef ZBPP_WORKER_DATA_DATASET_FILE_H_
#define ZBPP_WORKER_DATA_DATASET_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
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
inline constexpr int64_t kMaxTokenFileBytes = int64_t{1} << 40;  // memory-mapped

/// A read-only memory mapping of a whole dataset file; unmapped on
/// destruction. An empty file maps to data() == nullptr, size() == 0.
/// Immutable; thread-safe.
class MappedFile {
 public:
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  friend absl::StatusOr<std::shared_ptr<const MappedFile>> MapDatasetFile(
      const std::string&, const std::string&, const DataRoots&, int64_t);
  MappedFile(const uint8_t* data, int64_t size) : data_(data), size_(size) {}

  const uint8_t* data_;
  int64_t size_;
};

/// Reads the whole dataset file `path` (the DatasetSpec field `field`, for
/// messages) into memory, opened as OpenDatasetFile describes; at most
/// `max_bytes`. Errors as OpenDatasetFile's, plus the errno's code (naming
/// the path) for a failed read. Blocking; thread-safe.
absl::StatusOr<std::string> ReadDatasetFile(const std::string& path, const std::string& field,
                                            const DataRoots& roots, int64_t max_bytes);

/// Maps the whole dataset file `path` read-only (MAP_SHARED: pages come from
/// the page cache, nothing is copied), opened as below; at most `max_bytes`.
/// Blocking only for the open and the mapping; thread-safe.
///
/// How a dataset file is opened, for ReadDatasetFile and MapDatasetFile:
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
absl::StatusOr<std::shared_ptr<const MappedFile>> MapDatasetFile(const std::string& path,
                                                                 const std::string& field,
                                                                 const DataRoots& roots,
                                                                 int64_t max_bytes);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_DATASET_FILE_H_
