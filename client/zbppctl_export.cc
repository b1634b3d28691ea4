#include "client/zbppctl_export.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/zbppctl_json.h"
#include "common/read_file.h"

namespace zbpp::ctl {
namespace {

// A file under $TMPDIR (or /tmp), removed with the object.
class TemporaryFile {
 public:
  TemporaryFile() {
    const char* directory = std::getenv("TMPDIR");
    path_ = absl::StrCat(directory != nullptr && *directory ? directory : "/tmp",
                         "/zbppctl-export-XXXXXX");
    fd_ = ::mkstemp(path_.data());
  }
  ~TemporaryFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());
    }
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string LastLine(const std::string& text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty()) last = std::string(line);
  }
  return last;
}

}  // namespace

std::string ExporterScript() {
  const char* script = std::getenv("ZBPP_EXPORT_SCRIPT");
  return script != nullptr && *script ? script : ZBPP_EXPORT_SCRIPT_DEFAULT;
}

absl::Status ExportJob(const v1::Job& job, const std::string& out_dir, bool force,
                       const std::string& script, std::string* stdout_text) {
  if (job.last_checkpoint_step() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), " has no checkpoint to export yet"));
  }
  absl::StatusOr<std::string> json = JobStatusJson(job);
  if (!json.ok()) return json.status();
  TemporaryFile job_file, out_file, err_file;
  if (job_file.fd() < 0 || out_file.fd() < 0 || err_file.fd() < 0 ||
      !WriteAll(job_file.fd(), *json)) {
    return absl::ErrnoToStatus(errno, "zbppctl export: a temporary file");
  }
  std::vector<std::string> args = {script, "--job", job_file.path(), "--out", out_dir};
  if (force) args.push_back("--force");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "zbppctl export: fork");
  if (pid == 0) {
    ::dup2(out_file.fd(), STDOUT_FILENO);
    ::dup2(err_file.fd(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  absl::StatusOr<std::string> out = ReadFileToString(out_file.path());
  absl::StatusOr<std::string> err = ReadFileToString(err_file.path());
  if (out.ok()) *stdout_text += *out;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code == 0) return absl::OkStatus();
  if (code == 127) {
    return absl::NotFoundError(absl::StrCat("cannot run the exporter ", script,
                                            " (set ZBPP_EXPORT_SCRIPT to scripts/export)"));
  }
  const std::string why = err.ok() && !LastLine(*err).empty()
                              ? LastLine(*err)
                              : absl::StrCat("the exporter ", script, " exited ", code);
  return code == 2 ? absl::InvalidArgumentError(why) : absl::InternalError(why);
}

}  // namespace zbpp::ctl
