#ifndef ZBPP_WORKER_DATA_BUILTIN_CORPUS_H_
#define ZBPP_WORKER_DATA_BUILTIN_CORPUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zbpp::worker {

/// Where the builtin corpora (DatasetSpec.builtin) come from. The defaults
/// are the paths Debian 12's packages install; tests point them elsewhere.
struct BuiltinCorpusPaths {
  /// "bible-kjv": program of the package bible-kjv, run as
  /// `bible "gen1:1-rev22:21"` (the whole King James Bible, ~4.3 MB).
  std::string bible_program = "/usr/bin/bible";
  /// "fortunes": directory of fortune files, filled by the packages
  /// fortunes-min (3 files, ~100 KB) and fortunes (~40 files, ~4 MB).
  std::string fortunes_directory = "/usr/share/games/fortunes";
  /// "jargon-text": the gzip-compressed Jargon File of the package
  /// jargon-text (~1.8 MB of text).
  std::string jargon_file = "/usr/share/doc/jargon-text/jargon.txt.gz";
};

/// OK when `name` is a builtin corpus ("bible-kjv", "fortunes",
/// "jargon-text"); otherwise InvalidArgument, one line listing the known
/// names. Callers check before using `name` in a path (e.g. a cache file).
absl::Status CheckBuiltinCorpusName(const std::string& name);

/// Produces the text of the builtin corpus `name`:
/// * "bible-kjv": the stdout of the bible program (fixed argv, no shell);
/// * "fortunes": every fortune file of the directory (regular files, not
///   the `.dat` indexes nor the `.u8` links), in name order, concatenated
///   as is (fortunes stay separated by their "%" lines);
/// * "jargon-text": the Jargon File, decompressed by `/bin/gzip -dc`.
///
/// Deterministic for fixed installed packages. Errors, each one line
/// starting with `dataset.builtin "<name>": `: NotFound naming the missing
/// program/file/directory and the Debian package to install;
/// InvalidArgument for an unknown name (CheckBuiltinCorpusName); Internal or
/// the errno's code when a program fails or a file cannot be read.
/// Thread-safe.
absl::StatusOr<std::string> ReadBuiltinCorpusText(
    const std::string& name, const BuiltinCorpusPaths& paths);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_BUILTIN_CORPUS_H_
