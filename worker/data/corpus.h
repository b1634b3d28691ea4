#ifndef ZBPP_WORKER_DATA_CORPUS_H_
#define ZBPP_WORKER_DATA_CORPUS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/data/builtin_corpus.h"

namespace zbpp::v1 {
class DatasetSpec;
}  // namespace zbpp::v1

namespace zbpp::worker {

/// Which part of a corpus a batch is drawn from.
enum class Split {
  kTrain,  ///< the first (1 - eval_fraction) of the text
  kEval,   ///< the held-out last eval_fraction of the text
};

/// The training text of a job, tokenized byte-level (vocabulary 256: token =
/// byte value), split into a train part and a held-out eval part that never
/// overlap: eval is the last `floor(size * eval_fraction)` tokens. A
/// synthetic corpus holds no tokens: the sampler derives them from the seed.
///
/// Immutable; thread-safe. Shared between the executor and evaluation
/// through std::shared_ptr<const Corpus>.
class Corpus {
 public:
  /// A text corpus: `tokens` are the bytes of the text; the last
  /// `eval_tokens` (in [0, tokens.size()]) form the eval split.
  /// `description` names the source for messages (`dataset.builtin
  /// "bible-kjv"`).
  static Corpus Text(std::string description, std::string tokens,
                     int64_t eval_tokens);
  /// A synthetic corpus of `sequences` distinct sequences per split (>= 1),
  /// or endless when 0.
  static Corpus Synthetic(int64_t sequences);

  /// The source, as the DatasetSpec field and value: `dataset.builtin
  /// "bible-kjv"`, `dataset.text_file "/data/x.txt"`, `dataset.synthetic`.
  const std::string& description() const { return description_; }

  /// True for DatasetSpec.synthetic (no tokens held).
  bool synthetic() const { return synthetic_; }
  /// Synthetic only: distinct sequences per split; 0 means endless.
  int64_t synthetic_sequences() const { return synthetic_sequences_; }

  /// The tokens of `split`, each in [0, 256); empty for a synthetic corpus.
  /// The span lives as long as the Corpus.
  absl::Span<const uint8_t> tokens(Split split) const;

  /// A 64-bit hash (FNV-1a) of the tokens and the split point, or of the
  /// synthetic parameters. Workers of one job must hold the same corpus
  /// (stage 0 samples inputs, the last stage targets, from their own copy):
  /// comparing fingerprints catches different package versions or
  /// eval_fraction settings between machines.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  Corpus() = default;

  std::string description_;
  std::string tokens_;
  int64_t train_tokens_ = 0;
  bool synthetic_ = false;
  int64_t synthetic_sequences_ = 0;
  uint64_t fingerprint_ = 0;
};

/// How LoadCorpus finds, caches and checks a corpus.
struct CorpusOptions {
  // Caching.
  /// Directory for `<name>.tokens` caches of builtin corpora (e.g.
  /// "$HOME/.cache/zbpp"), created as needed; empty disables caching.
  std::string cache_dir;

  // Split and length checks.
  /// Fraction of the text held out for evaluation, taken from its end; in
  /// (0, 1).
  double eval_fraction = 0.01;
  /// Tokens per training sequence (model.seq_len); >= 1. Each split must
  /// hold at least seq_len + 1 tokens (inputs plus the shifted target).
  int64_t seq_len = 0;

  // Sources.
  /// Where builtin corpora come from (Debian's paths by default).
  BuiltinCorpusPaths builtin_paths;
};

/// Loads the corpus `spec` describes:
/// * builtin: from `<cache_dir>/<name>.tokens` when that file is a complete
///   cache; otherwise produced by ReadBuiltinCorpusText and then cached
///   (atomically: a crash leaves only a `.tmp-<pid>` file, never a partial
///   cache). A damaged cache file is rebuilt. The cache is keyed by name
///   only: after upgrading or adding a corpus package, delete the file.
/// * text_file: the file's bytes, read on every load (not cached: reading
///   the file costs what reading a cache would).
/// * synthetic: no I/O; tokens come from the sampler's seed.
///
/// Errors, each one line naming the DatasetSpec field:
/// * InvalidArgument: no source set; unknown builtin (listing the known
///   ones); synthetic.sequences < 1; seq_len < 1 or eval_fraction outside
///   (0, 1); a split shorter than seq_len + 1 tokens (with both numbers).
/// * NotFound: a builtin's program or files are missing (naming the Debian
///   package to install); text_file does not exist (naming the path).
/// * PermissionDenied: text_file cannot be opened.
/// * Others (naming the path): the cache cannot be written, a program fails.
///
/// Blocking (runs a program or reads files; bible-kjv on the project's
/// 2-core machine: ~0.07 s the first time, ~0.015 s from the cache).
/// Thread-safe; processes sharing a cache_dir may load at once.
absl::StatusOr<std::shared_ptr<const Corpus>> LoadCorpus(
    const v1::DatasetSpec& spec, const CorpusOptions& options);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_CORPUS_H_
