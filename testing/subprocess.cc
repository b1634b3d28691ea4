#include "testing/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace zbpp::ctltest {
namespace {

// Milliseconds left until `deadline`, for poll(); at least 0.
int MillisLeft(absl::Time deadline) {
  return static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

// Forks and execs `argv` with `env` (a full environment). Everything the
// child needs is built before fork: after fork in a threaded process (gRPC)
// only async-signal-safe calls are allowed.
pid_t Spawn(const std::vector<std::string>& argv,
            const std::vector<std::string>& env, int stdin_fd, int stdout_fd,
            int stderr_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Die with the test: a test binary killed by CTest's timeout must not
    // leave daemons running (they would hold the cores for the rest of CI).
    // The signal follows the forking thread; tests spawn from their main one.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (stdin_fd >= 0) dup2(stdin_fd, 0);
    if (stdout_fd >= 0) dup2(stdout_fd, 1);
    if (stderr_fd >= 0) dup2(stderr_fd, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  return pid;
}

std::vector<std::string> Environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const std::string& x : extra)
      overridden |= x.rfind(name + "=", 0) == 0;
    if (!overridden) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

int ExitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env,
                         absl::Duration timeout) {
  ProcessResult result;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return result;
  if (pipe2(err, O_CLOEXEC) != 0) return result;
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = Spawn(argv, Environment(env), devnull, out[1], err[1]);
  close(devnull);
  close(out[1]);
  close(err[1]);
  const absl::Time deadline = absl::Now() + timeout;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, MillisLeft(deadline)) <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, n);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = ExitCode(status);
  return result;
}

ProcessResult RunInTerminal(const std::vector<std::string>& argv,
                            absl::Duration timeout) {
  ProcessResult result;
  int terminal = -1, child_side = -1;
  if (openpty(&terminal, &child_side, nullptr, nullptr, nullptr) != 0)
    return result;
  fcntl(terminal, F_SETFD, FD_CLOEXEC);
  fcntl(child_side, F_SETFD, FD_CLOEXEC);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid =
      Spawn(argv, Environment({}), devnull, child_side, child_side);
  close(devnull);
  close(child_side);
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    pollfd fd = {terminal, POLLIN, 0};
    if (poll(&fd, 1, MillisLeft(deadline)) <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    char buffer[4096];
    // EIO once the child closed its side: the terminal's EOF.
    const ssize_t n = read(terminal, buffer, sizeof(buffer));
    if (n <= 0) break;
    result.out.append(buffer, n);
  }
  close(terminal);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = ExitCode(status);
  return result;
}

std::unique_ptr<BackgroundProcess> BackgroundProcess::Start(
    const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return nullptr;
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = Spawn(argv, Environment({}), devnull, out[1], -1);
  close(devnull);
  close(out[1]);
  if (pid < 0) {
    close(out[0]);
    return nullptr;
  }
  return std::unique_ptr<BackgroundProcess>(new BackgroundProcess(pid, out[0]));
}

BackgroundProcess::~BackgroundProcess() {
  kill(pid_, SIGTERM);
  int status = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  close(out_fd_);
}

std::optional<std::string> BackgroundProcess::ReadLine(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (size_t newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    pollfd fd = {out_fd_, POLLIN, 0};
    if (poll(&fd, 1, MillisLeft(deadline)) <= 0) return std::nullopt;
    char chunk[4096];
    const ssize_t n = read(out_fd_, chunk, sizeof(chunk));
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, n);
  }
}

int ClosedLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<RunningCoordinator> StartCoordinator(
    const std::string& binary, const std::vector<std::string>& flags,
    absl::Duration timeout) {
  std::vector<std::string> argv = {binary, "--listen", "127.0.0.1:0",
                                   "--metrics-listen", "127.0.0.1:0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  RunningCoordinator coordinator;
  coordinator.process = BackgroundProcess::Start(argv);
  if (coordinator.process == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot start ", binary));
  }
  const std::optional<std::string> line =
      coordinator.process->ReadLine(timeout);
  if (!line.has_value()) {
    return absl::UnavailableError(
        absl::StrCat(binary, " printed no listening line"));
  }
  std::smatch match;
  if (!std::regex_search(
          *line, match,
          std::regex("^zbpp-coordinator listening grpc=(\\S+) metrics=(\\S+)$"))) {
    return absl::UnavailableError(
        absl::StrCat(binary, " printed \"", *line, "\""));
  }
  coordinator.grpc_address = match[1];
  coordinator.metrics_address = match[2];
  return coordinator;
}

}  // namespace zbpp::ctltest
