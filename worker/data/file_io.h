#ifndef ZBPP_WORKER_DATA_FILE_IO_H_
#define ZBPP_WORKER_DATA_FILE_IO_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::worker {

/// Makes the entries of `directory` durable (fsync of the directory): a
/// rename or a new file or subdirectory in it survives a crash once this
/// returns OK. Errors (naming the directory and the errno text): it cannot
/// be opened or fsynced. Blocking; thread-safe.
absl::Status SyncDirectory(const std::string& directory);

/// Writes a file whole or not at all: bytes go to a temporary file beside the
/// target (`<path>.tmp-<pid>`), and `Commit` fsyncs it, renames it over
/// `path` and fsyncs the directory. Readers of `path` see either the old
/// file or the complete new one; a crash before `Commit` leaves at most the
/// temporary file, which the next writer in the same process id overwrites
/// and readers never open. Destroying an uncommitted writer removes the
/// temporary file.
///
/// Errors (as Status, naming the path and the errno text): the parent
/// directories cannot be created, the temporary file cannot be opened or
/// written (e.g. disk full), fsync or rename fail.
///
/// Thread-safety: one writer per object; two processes writing the same path
/// use different temporary files and the last rename wins. Two threads of one
/// process must not write the same path at once.
class AtomicFileWriter {
 public:
  /// Creates the parent directories of `path` as needed and opens the
  /// temporary file (truncating a stale one left by a crash).
  static absl::StatusOr<AtomicFileWriter> Open(std::string path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  /// Appends `size` bytes; retries short writes and EINTR.
  absl::Status Append(const void* data, size_t size);

  /// Makes the file durable under its final name; the writer is then closed.
  /// Calling Append or Commit after Commit is FailedPrecondition.
  absl::Status Commit();

  /// The final path.
  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter(std::string path, std::string temporary_path, int fd);

  std::string path_;
  std::string temporary_path_;
  int fd_;  // -1 once committed or moved from
};

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_FILE_IO_H_
