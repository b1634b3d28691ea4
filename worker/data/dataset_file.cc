#include "worker/data/dataset_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace zbpp::worker {
namespace {

// Closes the descriptor when the scope ends.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  int release() { return std::exchange(fd_, -1); }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct OpenedFile {
  FileDescriptor fd;
  int64_t size;
};

std::string Quoted(const std::string& field, const std::string& path) {
  return absl::StrCat(field, " \"", path, "\"");
}

bool UnderRoot(const std::string& resolved, const DataRoots& roots) {
  for (const std::string& root : roots.directories) {
    if (resolved == root || absl::StartsWith(resolved, root == "/" ? root : root + "/")) {
      return true;
    }
  }
  return false;
}

std::string Resolved(const std::string& path, int* error_number) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    *error_number = errno;
    return "";
  }
  return buffer;
}

const char* KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::StatusOr<OpenedFile> OpenChecked(const std::string& path, const std::string& field,
                                       const DataRoots& roots, int64_t max_bytes) {
  const bool confined = !roots.directories.empty();
  const absl::Status outside = absl::PermissionDeniedError(absl::StrCat(
      Quoted(field, path), ": outside the worker's data roots (--data-root)"));
  std::string target = path;
  if (confined) {
    // Whether a path outside the roots exists is nobody's business: every
    // failure outside them reads the same.
    int error_number = 0;
    target = Resolved(path, &error_number);
    if (target.empty()) {
      if (error_number == ENOENT && UnderRoot(path, roots)) {
        return absl::NotFoundError(absl::StrCat(Quoted(field, path), ": no such file"));
      }
      return outside;
    }
    if (!UnderRoot(target, roots)) return outside;
  }
  FileDescriptor fd(::open(target.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error_number = errno;
    if (confined && error_number != ENOENT && error_number != EACCES) return outside;
    return absl::ErrnoToStatus(error_number, Quoted(field, path));
  }
  if (confined) {
    // The file opened, not the name resolved a moment ago: a link swapped
    // in between must not lead out of the roots.
    int error_number = 0;
    const std::string opened = Resolved(absl::StrCat("/proc/self/fd/", fd.get()), &error_number);
    if (opened.empty() || !UnderRoot(opened, roots)) return outside;
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(Quoted(field, path), ": fstat"));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(field, path), " is ",
                                                   KindOf(info.st_mode),
                                                   "; only regular files are read"));
  }
  const int64_t size = info.st_size;
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(field, path), " holds ", size,
                                                   " bytes, more than the limit of ", max_bytes));
  }
  return OpenedFile{std::move(fd), size};
}

}  // namespace

absl::StatusOr<DataRoots> ResolveDataRoots(const std::vector<std::string>& directories,
                                           const std::string& flag) {
  DataRoots roots;
  for (const std::string& directory : directories) {
    if (directory.empty() || directory[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": must be an absolute path, got \"", directory, "\""));
    }
    int error_number = 0;
    std::string resolved = Resolved(directory, &error_number);
    struct stat info {};
    if (resolved.empty() || ::stat(resolved.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": \"", directory, "\" is not a directory",
          resolved.empty() ? absl::StrCat(" (", std::strerror(error_number), ")") : ""));
    }
    roots.directories.push_back(std::move(resolved));
  }
  return roots;
}

DatasetFile::~DatasetFile() { ::close(fd_); }

absl::Status DatasetFile::ReadAt(int64_t offset, int64_t bytes, uint8_t* out) const {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, static_cast<size_t>(bytes - done),
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat(description_, ": read at byte ",
                                                     offset + done));
    }
    if (n == 0) {
      struct stat info {};
      const int64_t now = ::fstat(fd_, &info) == 0 ? int64_t{info.st_size} : -1;
      return absl::DataLossError(absl::StrCat(
          description_, ": ", bytes, " bytes at byte ", offset, " are gone: the file holds ",
          now, " bytes now, ", size_,
          " when the job opened it (it was truncated; dataset files must not change while a "
          "job runs)"));
    }
    done += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadDatasetFile(const std::string& path, const std::string& field,
                                            const DataRoots& roots, int64_t max_bytes) {
  absl::StatusOr<OpenedFile> file = OpenChecked(path, field, roots, max_bytes);
  if (!file.ok()) return file.status();
  // The size fstat saw bounds the read: a file that grows meanwhile is cut.
  std::string contents(static_cast<size_t>(file->size), '\0');
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(file->fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat(Quoted(field, path), ": read"));
    if (n == 0) break;  // shrunk meanwhile
    done += static_cast<size_t>(n);
  }
  contents.resize(done);
  return contents;
}

absl::StatusOr<std::shared_ptr<const DatasetFile>> OpenDatasetFile(const std::string& path,
                                                                   const std::string& field,
                                                                   const DataRoots& roots,
                                                                   int64_t max_bytes) {
  absl::StatusOr<OpenedFile> file = OpenChecked(path, field, roots, max_bytes);
  if (!file.ok()) return file.status();
  return std::shared_ptr<const DatasetFile>(
      new DatasetFile(file->fd.release(), file->size, Quoted(field, path)));
}

}  // namespace zbpp::worker
