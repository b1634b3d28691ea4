#include "worker/data/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

absl::Status ErrnoError(int error_number, const std::string& what,
                        const std::string& path) {
  // ErrnoToStatus appends ": <strerror>" itself.
  return absl::ErrnoToStatus(error_number, absl::StrCat("cannot ", what, " ", path));
}

}  // namespace

absl::Status SyncDirectory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open directory", directory);
  const int rc = ::fsync(fd);
  const int error_number = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError(error_number, "fsync directory", directory);
  return absl::OkStatus();
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Open(std::string path) {
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) return ErrnoError(error.value(), "create directory", parent);
  }
  // The process id keeps concurrent writers (two workers on one machine
  // filling the same cache) off each other's temporary file. A link planted
  // under its name is not followed (it would truncate what it points to).
  std::string temporary_path = absl::StrCat(path, ".tmp-", ::getpid());
  const int fd = ::open(temporary_path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "create", temporary_path);
  return AtomicFileWriter(std::move(path), std::move(temporary_path), fd);
}

AtomicFileWriter::AtomicFileWriter(std::string path, std::string temporary_path,
                                   int fd)
    : path_(std::move(path)),
      temporary_path_(std::move(temporary_path)),
      fd_(fd) {}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temporary_path_(std::move(other.temporary_path_)),
      fd_(std::exchange(other.fd_, -1)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temporary_path_.c_str());
}

absl::Status AtomicFileWriter::Append(const void* data, size_t size) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("write to ", path_, " after it was committed"));
  }
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", temporary_path_);
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " was already committed"));
  }
  if (::fsync(fd_) != 0) return ErrnoError(errno, "fsync", temporary_path_);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int error_number = errno;
    ::unlink(temporary_path_.c_str());
    return ErrnoError(error_number, "close", temporary_path_);
  }
  if (::rename(temporary_path_.c_str(), path_.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(temporary_path_.c_str());
    return ErrnoError(error_number, "rename into place", path_);
  }
  const std::string parent = std::filesystem::path(path_).parent_path();
  return SyncDirectory(parent.empty() ? "." : parent);
}

}  // namespace zbpp::worker
