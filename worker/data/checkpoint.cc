#include "worker/data/checkpoint.h"

#include <sys/stat.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "worker/data/file_io.h"

namespace zbpp::worker {
namespace {

constexpr char kStepPrefix[] = "step-";

absl::Status CheckStepAndRank(int64_t step, int rank) {
  if (step < 0 || rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step and rank must be >= 0, got step ", step,
                     " rank ", rank));
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

// The ordered part of "step-<digits>"; nullopt for any other name.
std::optional<int64_t> ParseStepDirectory(const std::string& name) {
  if (!absl::StartsWith(name, kStepPrefix)) return std::nullopt;
  const std::string digits = name.substr(sizeof(kStepPrefix) - 1);
  int64_t step = 0;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &step)) {
    return std::nullopt;
  }
  return step;
}

// Every step directory under `directory`, ascending; empty when it does not
// exist. The errno's code when it cannot be listed.
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

// Whether every rank in [0, ranks) has its file at `step`.
bool Complete(const std::string& directory, int64_t step, int ranks) {
  for (int rank = 0; rank < ranks; ++rank) {
    std::error_code ignored;  // unreadable counts as absent
    if (!std::filesystem::is_regular_file(CheckpointPath(directory, step, rank), ignored)) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string CheckpointPath(const std::string& directory, int64_t step,
                           int rank) {
  return absl::StrFormat("%s/%s%08d/rank-%03d.pt", directory, kStepPrefix, step,
                         rank);
}

absl::Status WriteCheckpoint(const std::string& directory, int64_t step,
                             int rank, const NamedTensors& tensors) {
  if (absl::Status status = CheckStepAndRank(step, rank); !status.ok()) {
    return status;
  }
  const std::string path = CheckpointPath(directory, step, rank);
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

absl::StatusOr<NamedTensors> ReadCheckpoint(const std::string& directory,
                                            int64_t step, int rank,
                                            const ExpectedShapes& expected) {
  if (absl::Status status = CheckStepAndRank(step, rank); !status.ok()) {
    return status;
  }
  const std::string path = CheckpointPath(directory, step, rank);
  struct stat file_status;
  if (::stat(path.c_str(), &file_status) != 0) {
    const int error_number = errno;
    // ErrnoToStatus appends ": <strerror>" ("No such file or directory").
    return absl::ErrnoToStatus(error_number, absl::StrCat("checkpoint ", path));
  }
  const std::string mismatch =
      absl::StrCat("checkpoint ", path, " does not match the model: ");
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, at::Device(at::kCPU));
    std::set<std::string> expected_names;
    for (const auto& [name, shape] : expected) expected_names.insert(name);
    for (const std::string& key : archive.keys()) {
      if (expected_names.count(key) == 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            mismatch, "it holds \"", key, "\", which the model does not have"));
      }
    }
    NamedTensors tensors;
    for (const auto& [name, shape] : expected) {
      c10::IValue value;
      if (!archive.try_read(name, value)) {
        return absl::FailedPreconditionError(
            absl::StrCat(mismatch, "\"", name, "\" is missing"));
      }
      if (!value.isTensor()) {
        return absl::DataLossError(absl::StrCat("checkpoint ", path, ": \"",
                                                name, "\" is not a tensor"));
      }
      at::Tensor tensor = value.toTensor();
      if (tensor.sizes() != at::IntArrayRef(shape)) {
        return absl::FailedPreconditionError(absl::StrCat(
            mismatch, "\"", name, "\" has shape ", ShapeString(tensor.sizes()),
            ", the model expects ", ShapeString(shape)));
      }
      tensors.emplace_back(name, std::move(tensor));
    }
    return tensors;
  } catch (const c10::Error& error) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path,
                     " cannot be read: ", error.what_without_backtrace()));
  }
}

absl::StatusOr<int64_t> LatestCompleteCheckpoint(const std::string& directory,
                                                 int ranks) {
  if (ranks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks must be >= 1, got ", ranks));
  }
  absl::StatusOr<std::vector<int64_t>> steps = StepDirectories(directory);
  if (!steps.ok()) return steps.status();
  for (auto it = steps->rbegin(); it != steps->rend(); ++it) {
    if (Complete(directory, *it, ranks)) return *it;
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint (all ",
                                          ranks, " ranks) in ", directory));
}

absl::StatusOr<int> PruneCheckpoints(const std::string& directory, int rank, int ranks,
                                     int keep_last) {
  if (rank < 0 || rank >= ranks || keep_last < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pruning checkpoints needs 0 <= rank < ranks and keep_last >= 1, got rank ", rank,
        " of ", ranks, ", keep_last ", keep_last));
  }
  absl::StatusOr<std::vector<int64_t>> steps = StepDirectories(directory);
  if (!steps.ok()) return steps.status();
  // The oldest step kept: the keep_last-th newest complete one.
  int complete = 0;
  std::optional<int64_t> oldest_kept;
  for (auto it = steps->rbegin(); it != steps->rend() && complete < keep_last; ++it) {
    if (Complete(directory, *it, ranks)) {
      ++complete;
      oldest_kept = *it;
    }
  }
  if (complete < keep_last) return 0;
  int removed = 0;
  for (int64_t step : *steps) {
    if (step >= *oldest_kept) break;
    const std::string path = CheckpointPath(directory, step, rank);
    std::error_code error;
    if (std::filesystem::remove(path, error)) {
      ++removed;
    } else if (error) {
      return absl::ErrnoToStatus(error.value(), absl::StrCat("cannot remove old checkpoint ",
                                                             path, ": ", error.message()));
    }
    // The last rank to prune a step removes its directory; the others'
    // attempts fail because it is not empty yet, which is fine.
    std::error_code not_empty;
    std::filesystem::remove(std::filesystem::path(path).parent_path(), not_empty);
  }
  return removed;
}

absl::StatusOr<int> RemoveUnfinishedCheckpointWrites(const std::string& directory, int rank) {
  if (rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rank must be >= 0, got ", rank));
  }
  absl::StatusOr<std::vector<int64_t>> steps = StepDirectories(directory);
  if (!steps.ok()) return steps.status();
  int removed = 0;
  for (int64_t step : *steps) {
    const std::filesystem::path file = CheckpointPath(directory, step, rank);
    const std::string prefix = file.filename().string() + ".tmp-";
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(file.parent_path(), error)) {
      if (!absl::StartsWith(entry.path().filename().string(), prefix)) continue;
      std::error_code removal;
      if (!std::filesystem::remove(entry.path(), removal) && removal) {
        return absl::ErrnoToStatus(removal.value(),
                                   absl::StrCat("cannot remove unfinished checkpoint write ",
                                                entry.path().string(), ": ", removal.message()));
      }
      ++removed;
    }
  }
  return removed;
}

}  // namespace zbpp::worker
