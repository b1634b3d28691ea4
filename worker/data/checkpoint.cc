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
  std::error_code error;
  std::optional<int64_t> latest;
  for (const auto& entry :
       std::filesystem::directory_iterator(directory, error)) {
    const std::optional<int64_t> step =
        ParseStepDirectory(entry.path().filename());
    if (!step.has_value() || (latest.has_value() && *step <= *latest)) continue;
    bool complete = true;
    for (int rank = 0; rank < ranks && complete; ++rank) {
      std::error_code ignored;  // unreadable counts as absent
      complete = std::filesystem::is_regular_file(
          CheckpointPath(directory, *step, rank), ignored);
    }
    if (complete) latest = step;
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::ErrnoToStatus(
        error.value(), absl::StrCat("cannot list checkpoints in ", directory,
                                    ": ", error.message()));
  }
  if (!latest.has_value()) {
    return absl::NotFoundError(absl::StrCat("no complete checkpoint (all ",
                                            ranks, " ranks) in ", directory));
  }
  return *latest;
}

}  // namespace zbpp::worker
