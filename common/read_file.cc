#include "common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zbpp {

absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             const std::string& what) {
  // absl::ErrnoToStatus appends ": <the errno's text>" itself.
  auto error = [&](int error_number) {
    return absl::ErrnoToStatus(error_number,
                               absl::StrCat("cannot read ", what.empty() ? path : what));
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(errno);
  std::string contents;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error_number = errno;
      ::close(fd);
      return error(error_number);
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return contents;
}

}  // namespace zbpp
