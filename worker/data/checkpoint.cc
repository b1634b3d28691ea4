#include "worker/data/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "worker/data/file_io.h"

namespace zbpp::worker {
namespace {

constexpr char kStepPrefix[] = "step-";
constexpr char kOwnerSuffix[] = ".owner";
constexpr char kTemporaryInfix[] = ".tmp-";  // AtomicFileWriter's
constexpr size_t kMaxOwnerBytes = 256;

absl::Status CheckStepAndStage(int64_t step, int stage) {
  if (step < 0 || stage < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step and stage must be >= 0, got step ", step,
                     " stage ", stage));
  }
  return absl::OkStatus();
}

absl::Status CheckOwner(const std::string& owner) {
  if (owner.empty() || owner.size() > kMaxOwnerBytes ||
      owner.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a checkpoint owner must be one line of 1 to ", kMaxOwnerBytes, " bytes, got ",
        owner.size(), " bytes"));
  }
  return absl::OkStatus();
}

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A view stores its whole storage (e.g. a slice of a fused weight would drag
// the rest along): copy only those whose storage is larger than their data.
at::Tensor CompactCpuCopy(const at::Tensor& tensor) {
  at::Tensor cpu = tensor.detach().cpu().contiguous();
  if (cpu.storage().nbytes() != cpu.nbytes()) cpu = cpu.clone();
  return cpu;
}

std::string StepName(int64_t step) { return absl::StrFormat("%s%08d", kStepPrefix, step); }
std::string StepDirectoryPath(const std::string& directory, int64_t step) {
  return absl::StrCat(directory, "/", StepName(step));
}
std::string StageName(int stage) { return absl::StrFormat("stage-%03d", stage); }
// The name zbpp gave a stage's file before files were named per stage: read
// (ReadCheckpoint, LatestCompleteCheckpoint) so that older checkpoints still
// resume, never written, claimed or pruned.
std::string LegacyStageName(int stage) { return absl::StrFormat("rank-%03d", stage); }
std::string OwnerPath(const std::string& step_directory, int stage) {
  return absl::StrCat(step_directory, "/", StageName(stage), kOwnerSuffix);
}

// The step of a directory named as StepName names it; nullopt for any other
// name ("step-4", "step-junk"): zbpp writes only the canonical names, so
// only those can be its own.
std::optional<int64_t> ParseStepDirectory(const std::string& name) {
  if (!absl::StartsWith(name, kStepPrefix)) return std::nullopt;
  const std::string digits = name.substr(sizeof(kStepPrefix) - 1);
  int64_t step = 0;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &step) || StepName(step) != name) {
    return std::nullopt;
  }
  return step;
}

// Every step directory name under `directory` (links included; see
// Inspect), ascending; empty when it does not exist. The errno's code when
// it cannot be listed.
absl::StatusOr<std::vector<int64_t>> StepDirectories(const std::string& directory) {
  std::error_code error;
  std::vector<int64_t> steps;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (std::optional<int64_t> step = ParseStepDirectory(entry.path().filename())) {
      steps.push_back(*step);
    }
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::ErrnoToStatus(error.value(), absl::StrCat("cannot list checkpoints in ",
                                                           directory, ": ", error.message()));
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

// What is at a path, the path itself and not what a link points to (lstat).
enum class Entry { kAbsent, kFile, kDirectory, kLink, kOther };

absl::StatusOr<Entry> Inspect(const std::string& path) {
  struct stat status;
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return Entry::kAbsent;
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot inspect ", path));
  }
  if (S_ISLNK(status.st_mode)) return Entry::kLink;
  if (S_ISREG(status.st_mode)) return Entry::kFile;
  if (S_ISDIR(status.st_mode)) return Entry::kDirectory;
  return Entry::kOther;
}

absl::Status NotFollowed(const std::string& path, Entry entry, const char* expected) {
  return absl::FailedPreconditionError(
      entry == Entry::kLink
          ? absl::StrCat(path, " is a symbolic link; zbpp does not follow links in a "
                               "checkpoint directory")
          : absl::StrCat(path, " is not a ", expected));
}

// Makes `path` a directory if it is absent (its parent must exist) and
// checks that it is a real one; fsyncs the parent when it was created, so
// that the new entry survives a crash.
absl::Status MakeDirectory(const std::string& path) {
  const bool created = ::mkdir(path.c_str(), 0755) == 0;
  if (!created && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create directory ", path));
  }
  absl::StatusOr<Entry> entry = Inspect(path);
  if (!entry.ok()) return entry.status();
  if (*entry != Entry::kDirectory) return NotFollowed(path, *entry, "directory");
  if (!created) return absl::OkStatus();
  return SyncDirectory(std::filesystem::path(path).parent_path());
}

// Creates `directory` (with its parents) and its step directory of `step`.
absl::Status MakeStepDirectory(const std::string& directory, int64_t step) {
  std::error_code error;
  const bool created = std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::ErrnoToStatus(error.value(),
                               absl::StrCat("cannot create directory ", directory));
  }
  if (created) {
    const std::string parent = std::filesystem::path(directory).parent_path();
    if (absl::Status synced = SyncDirectory(parent.empty() ? "." : parent); !synced.ok()) {
      return synced;
    }
  }
  return MakeDirectory(StepDirectoryPath(directory, step));
}

// An open file descriptor, closed on destruction.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The line of the owner file at `path`: nullopt when there is none; "" when
// it is no regular file or too long to be one zbpp wrote. Read without
// following a link or blocking (a FIFO planted there is not opened for
// reading in earnest).
absl::StatusOr<std::optional<std::string>> ReadOwner(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    if (errno == ELOOP) return std::string();
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
  }
  struct stat status;
  if (::fstat(fd.get(), &status) != 0 || !S_ISREG(status.st_mode) ||
      status.st_size > static_cast<off_t>(kMaxOwnerBytes + 1)) {
    return std::string();
  }
  std::string text(static_cast<size_t>(status.st_size), '\0');
  if (::pread(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return std::string();
  }
  if (absl::EndsWith(text, "\n")) text.pop_back();
  return text;
}

// Whose `stage`'s files in the step directory `step_directory` (a real
// directory) are.
struct StageFiles {
  bool present = false;   // a checkpoint or an owner file exists
  bool owned = false;     // the owner file names the caller's owner
  bool checkpoint = false;  // and stage-<s>.pt is a regular file
  std::string foreign;    // why not owned, when present
};

absl::StatusOr<StageFiles> InspectStage(const std::string& step_directory, int stage,
                                      const std::string& owner) {
  const std::string file = absl::StrCat(step_directory, "/", StageName(stage), ".pt");
  absl::StatusOr<Entry> checkpoint = Inspect(file);
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<std::optional<std::string>> line = ReadOwner(OwnerPath(step_directory, stage));
  if (!line.ok()) return line.status();
  StageFiles files;
  files.present = *checkpoint != Entry::kAbsent || line->has_value();
  if (!files.present) return files;
  if (*checkpoint != Entry::kAbsent && *checkpoint != Entry::kFile) {
    files.foreign = std::string(NotFollowed(file, *checkpoint, "regular file").message());
  } else if (!line->has_value()) {
    files.foreign = absl::StrCat(file, " has no owner file (", StageName(stage), kOwnerSuffix,
                                 "): zbpp did not write it for a job");
  } else if (**line != owner) {
    // The line is shown only when it is plain text: it comes from disk.
    const bool printable = !(*line)->empty() && std::all_of((*line)->begin(), (*line)->end(),
                                                            [](char c) { return c >= ' ' && c < 127; });
    files.foreign = absl::StrCat(step_directory, "/", StageName(stage), " belongs to ",
                                 printable ? **line : std::string("another owner"));
  } else {
    files.owned = true;
    files.checkpoint = *checkpoint == Entry::kFile;
  }
  return files;
}

// Whether every stage in [0, stages) has its checkpoint at `step`, owned by
// `owner` (any writer when `owner` is null).
absl::StatusOr<bool> Complete(const std::string& directory, int64_t step, int stages,
                              const std::string* owner) {
  const std::string step_directory = StepDirectoryPath(directory, step);
  absl::StatusOr<Entry> entry = Inspect(step_directory);
  if (!entry.ok()) return entry.status();
  if (*entry != Entry::kDirectory) return false;
  for (int stage = 0; stage < stages; ++stage) {
    if (owner == nullptr) {
      absl::StatusOr<Entry> file =
          Inspect(absl::StrCat(step_directory, "/", StageName(stage), ".pt"));
      if (!file.ok()) return file.status();
      if (*file == Entry::kAbsent) {
        file = Inspect(absl::StrCat(step_directory, "/", LegacyStageName(stage), ".pt"));
        if (!file.ok()) return file.status();
      }
      if (*file != Entry::kFile) return false;
      continue;
    }
    absl::StatusOr<StageFiles> files = InspectStage(step_directory, stage, *owner);
    if (!files.ok()) return files.status();
    if (!files->checkpoint) return false;
  }
  return true;
}

// Removes `stage`'s temporary files (unfinished writes of its checkpoint or
// owner file) in `step_directory`; the number removed.
absl::StatusOr<int> RemoveTemporaryFiles(const std::string& step_directory, int stage) {
  const std::string checkpoint = absl::StrCat(StageName(stage), ".pt", kTemporaryInfix);
  const std::string owner = absl::StrCat(StageName(stage), kOwnerSuffix, kTemporaryInfix);
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(step_directory, error)) {
    const std::string name = entry.path().filename();
    if (!absl::StartsWith(name, checkpoint) && !absl::StartsWith(name, owner)) continue;
    // unlink removes a link itself, never what it points to.
    if (::unlink(entry.path().c_str()) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot remove unfinished checkpoint write ", entry.path().string()));
    }
    ++removed;
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::ErrnoToStatus(error.value(), absl::StrCat("cannot list ", step_directory));
  }
  return removed;
}

// Removes the file at `path` (a link itself, never its target); whether it
// existed.
absl::StatusOr<bool> RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return absl::ErrnoToStatus(errno, absl::StrCat("cannot remove old checkpoint ", path));
}

}  // namespace

std::string CheckpointPath(const std::string& directory, int64_t step,
                           int stage) {
  return absl::StrCat(StepDirectoryPath(directory, step), "/", StageName(stage), ".pt");
}

bool CheckpointSteps::Contains(int64_t step) const {
  return interval_steps > 0 && step >= first_step && step < end_step &&
         (step + 1) % interval_steps == 0;
}

absl::Status WriteCheckpoint(const std::string& directory, int64_t step,
                             int stage, const NamedTensors& tensors) {
  if (absl::Status status = CheckStepAndStage(step, stage); !status.ok()) {
    return status;
  }
  const std::string path = CheckpointPath(directory, step, stage);
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || !names.insert(name).second || !tensor.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", path, ": tensor \"", name, "\" is ",
          name.empty() ? "unnamed"
                       : (tensor.defined() ? "named twice" : "undefined")));
    }
  }
  torch::serialize::OutputArchive archive;
  try {
    for (const auto& [name, tensor] : tensors) {
      archive.write(name, c10::IValue(CompactCpuCopy(tensor)));
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("checkpoint ", path, ": ",
                                            error.what_without_backtrace()));
  }

  if (absl::Status made = MakeStepDirectory(directory, step); !made.ok()) return made;
  absl::StatusOr<AtomicFileWriter> writer = AtomicFileWriter::Open(path);
  if (!writer.ok()) return writer.status();
  // After a failed write the callback still reports every byte as written:
  // LibTorch answers a short write by throwing (seen with 1.13), and then
  // throws again from PyTorchStreamWriter's destructor, which terminates the
  // process. The first error is kept and returned once save_to has finished.
  absl::Status write_status;
  try {
    archive.save_to([&](const void* data, size_t size) -> size_t {
      if (write_status.ok()) write_status = writer->Append(data, size);
      return size;
    });
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("checkpoint ", path, ": ",
                                            error.what_without_backtrace()));
  }
  if (!write_status.ok()) return write_status;
  return writer->Commit();
}

namespace {

// Every tensor of `stage`'s file at `step`, in the file's order, opened as
// ReadCheckpoint says (no link followed); `*read_from` is set to the path
// read (the current name, or the former rank-NNN.pt). Errors as
// ReadCheckpoint's, but for the model checks.
absl::StatusOr<NamedTensors> ReadStageFile(const std::string& directory, int64_t step,
                                          int stage, std::string* read_from) {
  if (absl::Status status = CheckStepAndStage(step, stage); !status.ok()) {
    return status;
  }
  const std::string step_directory = StepDirectoryPath(directory, step);
  std::string path = CheckpointPath(directory, step, stage);
  // Both the step directory and the file are opened without following a
  // link; ErrnoToStatus appends ": <strerror>" ("No such file or directory").
  FileDescriptor step_fd(
      ::open(step_directory.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (step_fd.get() < 0) {
    const int error_number = errno;
    if (error_number == ELOOP || error_number == ENOTDIR) {
      absl::StatusOr<Entry> entry = Inspect(step_directory);
      return NotFollowed(step_directory, entry.ok() ? *entry : Entry::kOther, "directory");
    }
    return absl::ErrnoToStatus(error_number, absl::StrCat("checkpoint ", path));
  }
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int opened = ::openat(step_fd.get(), absl::StrCat(StageName(stage), ".pt").c_str(), kFlags);
  if (opened < 0 && errno == ENOENT) {
    // A checkpoint written before files were named per stage; when neither
    // exists, the error names the current name.
    const std::string legacy = absl::StrCat(LegacyStageName(stage), ".pt");
    const int legacy_fd = ::openat(step_fd.get(), legacy.c_str(), kFlags);
    if (legacy_fd >= 0 || errno != ENOENT) {
      opened = legacy_fd;
      path = absl::StrCat(step_directory, "/", legacy);
    }
  }
  FileDescriptor fd(opened);
  if (fd.get() < 0) {
    if (errno == ELOOP) return NotFollowed(path, Entry::kLink, "regular file");
    return absl::ErrnoToStatus(errno, absl::StrCat("checkpoint ", path));
  }
  struct stat file_status;
  if (::fstat(fd.get(), &file_status) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("checkpoint ", path));
  }
  if (!S_ISREG(file_status.st_mode)) return NotFollowed(path, Entry::kOther, "regular file");
  *read_from = path;
  const auto read = [&fd](uint64_t position, void* buffer, size_t size) -> size_t {
    size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd.get(), static_cast<char*>(buffer) + done, size - done,
                                  static_cast<off_t>(position + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // LibTorch reports the short read
      done += static_cast<size_t>(got);
    }
    return done;
  };
  const size_t size = static_cast<size_t>(file_status.st_size);
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(read, [size] { return size; }, at::Device(at::kCPU));
    NamedTensors tensors;
    for (const std::string& key : archive.keys()) {
      c10::IValue value;
      if (!archive.try_read(key, value) || !value.isTensor()) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": \"",
                                                key, "\" is not a tensor"));
      }
      tensors.emplace_back(key, value.toTensor());
    }
    return tensors;
  } catch (const c10::Error& error) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path,
                     " cannot be read: ", error.what_without_backtrace()));
  }
}

// FailedPrecondition unless `tensor` has `shape`; `mismatch` starts the
// message.
absl::Status CheckShape(const std::string& mismatch, const std::string& name,
                        const at::Tensor& tensor, const std::vector<int64_t>& shape) {
  if (tensor.sizes() == at::IntArrayRef(shape)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(mismatch, "\"", name, "\" has shape ",
                                                    ShapeString(tensor.sizes()),
                                                    ", the model expects ", ShapeString(shape)));
}

}  // namespace

absl::StatusOr<NamedTensors> ReadCheckpoint(const std::string& directory,
                                            int64_t step, int stage,
                                            const ExpectedShapes& expected) {
  std::string read_from;
  absl::StatusOr<NamedTensors> file = ReadStageFile(directory, step, stage, &read_from);
  if (!file.ok()) return file.status();
  const std::string mismatch =
      absl::StrCat("checkpoint ", read_from, " does not match the model: ");
  std::map<std::string, at::Tensor> by_name(file->begin(), file->end());
  std::set<std::string> expected_names;
  for (const auto& [name, shape] : expected) expected_names.insert(name);
  for (const auto& [key, tensor] : *file) {
    if (expected_names.count(key) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(mismatch, "it holds \"", key, "\", which the model does not have"));
    }
  }
  NamedTensors tensors;
  for (const auto& [name, shape] : expected) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::FailedPreconditionError(absl::StrCat(mismatch, "\"", name, "\" is missing"));
    }
    if (absl::Status st = CheckShape(mismatch, name, it->second, shape); !st.ok()) return st;
    tensors.emplace_back(name, it->second);
  }
  return tensors;
}

absl::StatusOr<NamedTensors> ReadCheckpointOfAnyLayout(const std::string& directory,
                                                       int64_t step, int stage,
                                                       const ExpectedShapes& expected) {
  std::string own_path;
  absl::StatusOr<NamedTensors> own = ReadStageFile(directory, step, stage, &own_path);
  if (!own.ok()) return own.status();
  std::set<std::string> own_names, expected_names;
  for (const auto& [name, tensor] : *own) own_names.insert(name);
  for (const auto& [name, shape] : expected) expected_names.insert(name);
  // The same layout: the strict check, whose errors name the file.
  if (own_names == expected_names) return ReadCheckpoint(directory, step, stage, expected);
  // Another layout: the names are global, so gather them from every
  // stage's file until each expected one is found.
  std::map<std::string, std::vector<int64_t>> wanted(expected.begin(), expected.end());
  std::map<std::string, at::Tensor> found;
  for (int file_stage = 0; found.size() < wanted.size(); ++file_stage) {
    std::string read_from = own_path;
    absl::StatusOr<NamedTensors> file =
        file_stage == stage ? std::move(own)
                            : ReadStageFile(directory, step, file_stage, &read_from);
    if (absl::IsNotFound(file.status())) break;  // Past the last stage's file.
    if (!file.ok()) return file.status();
    const std::string mismatch =
        absl::StrCat("checkpoint ", read_from, " does not match the model: ");
    for (auto& [name, tensor] : *file) {
      auto it = wanted.find(name);
      if (it == wanted.end() || found.count(name) > 0) continue;
      if (absl::Status st = CheckShape(mismatch, name, tensor, it->second); !st.ok()) return st;
      found.emplace(name, std::move(tensor));
    }
  }
  NamedTensors tensors;
  for (const auto& [name, shape] : expected) {
    auto it = found.find(name);
    if (it == found.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", StepDirectoryPath(directory, step),
          " does not match the model: no stage's file holds \"", name, "\""));
    }
    tensors.emplace_back(name, it->second);
  }
  return tensors;
}

absl::StatusOr<int64_t> LatestCompleteCheckpoint(const std::string& directory,
                                                 int stages) {
  if (stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("stages must be >= 1, got ", stages));
  }
  absl::StatusOr<std::vector<int64_t>> steps = StepDirectories(directory);
  if (!steps.ok()) return steps.status();
  for (auto it = steps->rbegin(); it != steps->rend(); ++it) {
    absl::StatusOr<bool> complete = Complete(directory, *it, stages, /*owner=*/nullptr);
    if (!complete.ok()) return complete.status();
    if (*complete) return *it;
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint (all ",
                                          stages, " stages) in ", directory));
}

absl::Status ClaimCheckpoint(const std::string& directory, int64_t step, int stage,
                             const std::string& owner) {
  if (absl::Status status = CheckStepAndStage(step, stage); !status.ok()) return status;
  if (absl::Status status = CheckOwner(owner); !status.ok()) return status;
  if (absl::Status made = MakeStepDirectory(directory, step); !made.ok()) return made;
  const std::string step_directory = StepDirectoryPath(directory, step);
  absl::StatusOr<StageFiles> files = InspectStage(step_directory, stage, owner);
  if (!files.ok()) return files.status();
  if (files->owned) return absl::OkStatus();
  if (files->present) {
    return absl::FailedPreconditionError(absl::StrCat(
        files->foreign, "; zbpp never overwrites a checkpoint it did not write for this job"));
  }
  absl::StatusOr<AtomicFileWriter> writer =
      AtomicFileWriter::Open(OwnerPath(step_directory, stage));
  if (!writer.ok()) return writer.status();
  const std::string line = owner + "\n";
  if (absl::Status st = writer->Append(line.data(), line.size()); !st.ok()) return st;
  return writer->Commit();
}

absl::StatusOr<int> PrepareCheckpointDirectory(const std::string& directory, int stage,
                                               int stages, const std::string& owner,
                                               const CheckpointSteps& steps) {
  if (stage < 0 || stage >= stages || steps.interval_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "preparing checkpoints needs 0 <= stage < stages and interval_steps >= 1, got stage ",
        stage, " of ", stages, ", interval_steps ", steps.interval_steps));
  }
  if (absl::Status status = CheckOwner(owner); !status.ok()) return status;
  absl::StatusOr<std::vector<int64_t>> found = StepDirectories(directory);
  if (!found.ok()) return found.status();
  int removed = 0;
  for (int64_t step : *found) {
    if (!steps.Contains(step)) continue;
    const std::string step_directory = StepDirectoryPath(directory, step);
    const std::string refused = absl::StrCat(
        "this job writes step ", step, " but ");
    const std::string remedy = absl::StrCat(
        "; zbpp never overwrites another job's checkpoint: choose another directory, or move ",
        StepName(step), " away");
    absl::StatusOr<Entry> entry = Inspect(step_directory);
    if (!entry.ok()) return entry.status();
    if (*entry != Entry::kDirectory) {
      return absl::FailedPreconditionError(absl::StrCat(
          refused, NotFollowed(step_directory, *entry, "directory").message(), remedy));
    }
    for (int other = 0; other < stages; ++other) {
      absl::StatusOr<StageFiles> files = InspectStage(step_directory, other, owner);
      if (!files.ok()) return files.status();
      if (files->present && !files->owned) {
        return absl::FailedPreconditionError(absl::StrCat(refused, files->foreign, remedy));
      }
    }
    absl::StatusOr<int> temporary = RemoveTemporaryFiles(step_directory, stage);
    if (!temporary.ok()) return temporary.status();
    removed += *temporary;
  }
  return removed;
}

absl::StatusOr<int> PruneCheckpoints(const std::string& directory, int stage, int stages,
                                     int keep_last, const std::string& owner,
                                     int64_t written_step) {
  if (stage < 0 || stage >= stages || keep_last < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pruning checkpoints needs 0 <= stage < stages and keep_last >= 1, got stage ", stage,
        " of ", stages, ", keep_last ", keep_last));
  }
  if (absl::Status status = CheckOwner(owner); !status.ok()) return status;
  absl::StatusOr<std::vector<int64_t>> found = StepDirectories(directory);
  if (!found.ok()) return found.status();
  // The owner's steps of this stage up to the one just written, and which of
  // them are complete. Steps after it (an earlier attempt's, about to be
  // rewritten) and everything not the owner's are left alone.
  std::vector<int64_t> mine;
  std::vector<int64_t> complete;
  for (int64_t step : *found) {
    if (step > written_step) break;
    const std::string step_directory = StepDirectoryPath(directory, step);
    absl::StatusOr<Entry> entry = Inspect(step_directory);
    if (!entry.ok()) return entry.status();
    if (*entry != Entry::kDirectory) continue;
    absl::StatusOr<StageFiles> files = InspectStage(step_directory, stage, owner);
    if (!files.ok()) return files.status();
    if (!files->owned) continue;
    mine.push_back(step);
    absl::StatusOr<bool> whole = Complete(directory, step, stages, &owner);
    if (!whole.ok()) return whole.status();
    if (*whole) complete.push_back(step);
  }
  if (static_cast<int>(complete.size()) < keep_last) return 0;
  // The oldest step kept: the keep_last-th newest complete one, never after
  // written_step, so the step just written stays too.
  const int64_t oldest_kept = complete[complete.size() - keep_last];
  int removed = 0;
  for (int64_t step : mine) {
    if (step >= oldest_kept || step == written_step) break;
    const std::string step_directory = StepDirectoryPath(directory, step);
    // The checkpoint first, its owner file last: a crash in between leaves
    // an owner file alone, which the next prune removes.
    absl::StatusOr<bool> gone = RemoveFile(CheckpointPath(directory, step, stage));
    if (!gone.ok()) return gone.status();
    removed += *gone ? 1 : 0;
    absl::StatusOr<int> temporary = RemoveTemporaryFiles(step_directory, stage);
    if (!temporary.ok()) return temporary.status();
    if (absl::StatusOr<bool> owner_gone = RemoveFile(OwnerPath(step_directory, stage));
        !owner_gone.ok()) {
      return owner_gone.status();
    }
    // The last stage to prune a step removes its directory; the others'
    // attempts fail because it is not empty yet, which is fine.
    ::rmdir(step_directory.c_str());
  }
  return removed;
}

absl::Status WriteOwnedCheckpoint(const std::string& directory, int64_t step, int stage,
                                  int stages, const std::string& owner,
                                  const NamedTensors& tensors, int keep_last) {
  if (absl::Status st = ClaimCheckpoint(directory, step, stage, owner); !st.ok()) return st;
  if (absl::Status st = WriteCheckpoint(directory, step, stage, tensors); !st.ok()) return st;
  if (keep_last >= 1) {
    absl::StatusOr<int> pruned =
        PruneCheckpoints(directory, stage, stages, keep_last, owner, step);
    if (!pruned.ok()) std::cerr << "zbpp-worker: " << pruned.status().message() << "\n";
  }
  return absl::OkStatus();
}

}  // namespace zbpp::worker
