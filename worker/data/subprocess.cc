#include "worker/data/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace zbpp::worker {
namespace {

// Kept from the child's stderr for the error message.
constexpr size_t kStderrTailBytes = 400;

absl::Status ErrnoError(int error_number, const std::string& what) {
  // ErrnoToStatus appends ": <strerror>" itself.
  return absl::ErrnoToStatus(error_number, what);
}

// Closes the descriptors it holds when the scope ends, on every error path.
struct Pipe {
  int fds[2] = {-1, -1};
  ~Pipe() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  void CloseWriteEnd() {
    ::close(fds[1]);
    fds[1] = -1;
  }
};

}  // namespace

absl::StatusOr<std::string> RunAndCaptureStdout(
    const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  const std::string& program = argv[0];
  if (::access(program.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("program ", program, " not found"));
  }
  Pipe out, err;
  if (::pipe2(out.fds, O_CLOEXEC) != 0 || ::pipe2(err.fds, O_CLOEXEC) != 0) {
    return ErrnoError(errno, "pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawn_error = ::posix_spawn(&pid, program.c_str(), &actions,
                                        nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    return ErrnoError(spawn_error, absl::StrCat("cannot run ", program));
  }
  out.CloseWriteEnd();
  err.CloseWriteEnd();

  // Drain both pipes together: a child that fills the stderr pipe while we
  // block on stdout would otherwise deadlock.
  std::string stdout_text, stderr_text;
  absl::Status read_status;
  pollfd fds[2] = {{out.fds[0], POLLIN, 0}, {err.fds[0], POLLIN, 0}};
  std::string* sinks[2] = {&stdout_text, &stderr_text};
  int open_fds = 2;
  char buffer[1 << 16];
  while (open_fds > 0 && read_status.ok()) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      read_status = ErrnoError(errno, absl::StrCat("poll output of ", program));
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_fds;
      } else if (errno != EINTR) {
        read_status =
            ErrnoError(errno, absl::StrCat("read output of ", program));
        break;
      }
    }
  }
  // A child we stopped reading from could block forever on a full pipe.
  if (!read_status.ok()) ::kill(pid, SIGKILL);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR)
      return ErrnoError(errno, absl::StrCat("wait for ", program));
  }
  if (!read_status.ok()) return read_status;
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    const std::string how =
        WIFEXITED(wait_status)
            ? absl::StrCat("exited with status ", WEXITSTATUS(wait_status))
            : absl::StrCat("died of signal ", WTERMSIG(wait_status));
    const size_t tail_start = stderr_text.size() > kStderrTailBytes
                                  ? stderr_text.size() - kStderrTailBytes
                                  : 0;
    return absl::InternalError(
        absl::StrCat(absl::StrJoin(argv, " "), " ", how,
                     "; stderr: ", stderr_text.substr(tail_start)));
  }
  return stdout_text;
}

}  // namespace zbpp::worker
