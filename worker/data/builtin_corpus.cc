#include "worker/data/builtin_corpus.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "worker/data/subprocess.h"

namespace zbpp::worker {
namespace {

// gzip is Essential in Debian, so /bin/gzip exists on every installation.
constexpr char kGzipProgram[] = "/bin/gzip";

std::string Prefix(const std::string& name) {
  return absl::StrCat("dataset.builtin \"", name, "\": ");
}

// Prefixes the field to an error and, for NotFound, names the package that
// provides what is missing.
absl::Status Explain(const std::string& name, const absl::Status& status,
                     const std::string& package) {
  std::string message = absl::StrCat(Prefix(name), status.message());
  if (absl::IsNotFound(status)) {
    absl::StrAppend(&message, "; install the Debian package ", package);
  }
  return absl::Status(status.code(), message);
}

absl::StatusOr<std::string> ReadFortunes(const std::string& directory) {
  std::error_code error;
  std::vector<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(directory, error)) {
    const std::string file_name = entry.path().filename();
    // .dat are strfile's binary indexes, .u8 are links to the text files.
    if (!entry.is_regular_file() || entry.is_symlink() ||
        absl::EndsWith(file_name, ".dat") || absl::EndsWith(file_name, ".u8")) {
      continue;
    }
    files.push_back(entry.path());
  }
  if (error && error != std::errc::no_such_file_or_directory) {
    return absl::ErrnoToStatus(
        error.value(),
        absl::StrCat("cannot list ", directory, ": ", error.message()));
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no fortune files in ", directory));
  }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const std::string& file : files) {
    absl::StatusOr<std::string> contents = ReadFileToString(file);
    if (!contents.ok()) return contents.status();
    text += *contents;
  }
  return text;
}

absl::StatusOr<std::string> ReadJargon(const std::string& file) {
  // gzip would report a missing file only as an exit status: check first.
  std::error_code error;
  if (!std::filesystem::exists(file, error)) {
    return absl::NotFoundError(absl::StrCat(file, " not found"));
  }
  return RunAndCaptureStdout({kGzipProgram, "-dc", file});
}

}  // namespace

absl::Status CheckBuiltinCorpusName(const std::string& name) {
  if (name == "bible-kjv" || name == "fortunes" || name == "jargon-text") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Prefix(name), "unknown corpus; known: bible-kjv, fortunes, jargon-text"));
}

absl::StatusOr<std::string> ReadBuiltinCorpusText(
    const std::string& name, const BuiltinCorpusPaths& paths) {
  if (absl::Status status = CheckBuiltinCorpusName(name); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::string> text;
  std::string package;
  if (name == "bible-kjv") {
    text = RunAndCaptureStdout({paths.bible_program, "gen1:1-rev22:21"});
    package = "bible-kjv";
  } else if (name == "fortunes") {
    text = ReadFortunes(paths.fortunes_directory);
    package = "fortunes (or fortunes-min)";
  } else {
    text = ReadJargon(paths.jargon_file);
    package =
        "jargon-text (slim container images may also drop /usr/share/doc "
        "through dpkg path-exclude)";
  }
  if (!text.ok()) return Explain(name, text.status(), package);
  return text;
}

}  // namespace zbpp::worker
