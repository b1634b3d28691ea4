#include "worker/data/corpus.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/data/token_cache.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {
namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
// Ids read at once by the scan, between two polls of
// CorpusOptions::cancelled: 512 KiB of int64 ids, which stay in cache.
constexpr int64_t kIdsPerRead = int64_t{1} << 16;

uint64_t Fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash = (hash ^ bytes[i]) * kFnvPrime;
  }
  return hash;
}

// FNV-1a over ids (each folded in whole; for width 1 the same as over the
// bytes), checking each against `vocab` (0: no check) on the way.
// `first_index` is the index of ids[0] in its file, for messages.
absl::Status ScanIds(const TokenView& ids, int64_t first_index, int64_t vocab,
                     const std::string& field, const CorpusOptions& options, uint64_t* hash) {
  uint64_t h = *hash;
  std::vector<int64_t> chunk(static_cast<size_t>(std::min(ids.size(), kIdsPerRead)));
  for (int64_t begin = 0; begin < ids.size(); begin += kIdsPerRead) {
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(absl::StrCat(field, ": loading cancelled"));
    }
    const int64_t count = std::min(ids.size() - begin, kIdsPerRead);
    if (absl::Status st = ids.Read(begin, count, chunk.data()); !st.ok()) return st;
    int64_t largest = 0;
    for (int64_t i = 0; i < count; ++i) {
      largest = std::max(largest, chunk[i]);
      h = (h ^ static_cast<uint64_t>(chunk[i])) * kFnvPrime;
    }
    if (vocab > 0 && largest >= vocab) {
      const int64_t i = std::find_if(chunk.begin(), chunk.end(),
                                     [vocab](int64_t id) { return id >= vocab; }) -
                        chunk.begin();
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": token id ", chunk[i], " at index ", first_index + begin + i,
          " of the file is >= model.vocab = ", vocab,
          " (a tokenizer with a larger vocabulary, or the wrong dtype?)"));
    }
  }
  *hash = h;
  return absl::OkStatus();
}

absl::Status WithPrefix(const std::string& prefix, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::StatusOr<std::string> LoadBuiltin(const std::string& name,
                                        const CorpusOptions& options) {
  // Checked before the name becomes part of a cache path.
  if (absl::Status status = CheckBuiltinCorpusName(name); !status.ok()) {
    return status;
  }
  const std::string cache_path =
      options.cache_dir.empty()
          ? ""
          : absl::StrCat(options.cache_dir, "/", name, ".tokens");
  if (!cache_path.empty()) {
    absl::StatusOr<std::string> cached = ReadTokenCache(cache_path);
    // A missing or damaged cache is rebuilt from the source below; any other
    // failure (e.g. permissions) would recur on writing, so report it now.
    if (cached.ok() || !(absl::IsNotFound(cached.status()) ||
                         absl::IsDataLoss(cached.status()))) {
      return cached;
    }
  }
  absl::StatusOr<std::string> text =
      ReadBuiltinCorpusText(name, options.builtin_paths);
  if (!text.ok() || cache_path.empty()) return text;
  if (absl::Status status = WriteTokenCache(cache_path, *text); !status.ok()) {
    return WithPrefix(absl::StrCat("dataset.builtin \"", name, "\": cache: "),
                      status);
  }
  return text;
}

}  // namespace

Corpus Corpus::Text(std::string description, std::string tokens,
                    int64_t eval_tokens) {
  auto text = std::make_shared<const std::string>(std::move(tokens));
  const auto* data = reinterpret_cast<const uint8_t*>(text->data());
  const auto total = static_cast<int64_t>(text->size());
  const TokenView train(data, total - eval_tokens, 1);
  const TokenView eval(data + train.size(), eval_tokens, 1);
  uint64_t fingerprint = Fnv1a(kFnvOffsetBasis, data, text->size());
  const int64_t train_tokens = train.size();
  fingerprint = Fnv1a(fingerprint, &train_tokens, sizeof(train_tokens));
  return Stored(std::move(description), std::move(text), train, eval, /*vocab=*/256,
                fingerprint);
}

absl::Status TokenView::Read(int64_t begin, int64_t count, int64_t* out) const {
  const uint8_t* bytes = data_ + begin * width_;
  std::vector<uint8_t> buffer;
  if (file_ != nullptr) {
    buffer.resize(static_cast<size_t>(count * width_));
    if (absl::Status st = file_->ReadAt(offset_ + begin * width_, count * width_, buffer.data());
        !st.ok()) {
      return st;
    }
    bytes = buffer.data();
  }
  // Little-endian unsigned ids of width_ bytes; one loop per width, so that
  // the scan of a token file runs at memory speed.
  const uint8_t* p = bytes;
  switch (width_) {
    case 1:
      for (int64_t i = 0; i < count; ++i) out[i] = p[i];
      break;
    case 2:
      for (int64_t i = 0; i < count; ++i, p += 2) out[i] = p[0] | (int64_t{p[1]} << 8);
      break;
    default:
      for (int64_t i = 0; i < count; ++i, p += 4) {
        out[i] = p[0] | (int64_t{p[1]} << 8) | (int64_t{p[2]} << 16) | (int64_t{p[3]} << 24);
      }
  }
  return absl::OkStatus();
}

Corpus Corpus::Stored(std::string description, std::shared_ptr<const void> owner,
                      TokenView train, TokenView eval, int64_t vocab, uint64_t fingerprint) {
  Corpus corpus;
  corpus.vocab_ = vocab;
  corpus.description_ = std::move(description);
  corpus.owner_ = std::move(owner);
  corpus.train_ = train;
  corpus.eval_ = eval;
  corpus.fingerprint_ = fingerprint;
  return corpus;
}

Corpus Corpus::Synthetic(int64_t sequences) {
  Corpus corpus;
  corpus.description_ = "dataset.synthetic";
  corpus.synthetic_ = true;
  corpus.synthetic_sequences_ = sequences;
  corpus.fingerprint_ = Fnv1a(Fnv1a(kFnvOffsetBasis, "synthetic", 9),
                              &sequences, sizeof(sequences));
  return corpus;
}

namespace {

absl::Status CheckSplitSizes(const std::string& description, int64_t train, int64_t eval,
                             const std::string& how, const CorpusOptions& options) {
  const int64_t needed = options.seq_len + 1;
  for (const auto& [split, size] : {std::pair<const char*, int64_t>{"train", train},
                                    std::pair<const char*, int64_t>{"eval", eval}}) {
    if (size < needed) {
      return absl::InvalidArgumentError(absl::StrCat(
          description, ": the ", split, " split has ", size, " tokens (", how,
          "), fewer than seq_len + 1 = ", needed,
          "; use a longer text or a shorter seq_len, or change eval_fraction"));
    }
  }
  return absl::OkStatus();
}

// One token file, opened and viewed as ids of `width` bytes.
absl::StatusOr<std::pair<std::shared_ptr<const DatasetFile>, TokenView>> OpenTokens(
    const std::string& path, const std::string& field, int width,
    const CorpusOptions& options) {
  absl::StatusOr<std::shared_ptr<const DatasetFile>> file =
      OpenDatasetFile(path, field, options.roots, kMaxTokenFileBytes);
  if (!file.ok()) return file.status();
  const int64_t bytes = (*file)->size();
  if (bytes % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " \"", path, "\": ", bytes, " bytes is not a multiple of ", width,
        " (dataset.tokens.dtype uint", 8 * width, ")"));
  }
  return std::make_pair(*file, TokenView(file->get(), 0, bytes / width, width));
}

absl::StatusOr<std::shared_ptr<const Corpus>> LoadTokenFiles(const v1::TokenFileDataset& spec,
                                                             const CorpusOptions& options) {
  const std::string description =
      absl::StrCat("dataset.tokens.path \"", spec.path(), "\"");
  if (options.vocab < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.vocab must be >= 1 for dataset.tokens, got ", options.vocab));
  }
  if (!spec.eval_path().empty() && spec.has_eval_fraction()) {
    return absl::InvalidArgumentError(
        "dataset.tokens: set eval_path or eval_fraction, not both");
  }
  const double eval_fraction =
      spec.has_eval_fraction() ? spec.eval_fraction() : options.eval_fraction;
  if (!(eval_fraction > 0 && eval_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset.tokens.eval_fraction must be in (0, 1), got ", eval_fraction));
  }
  const int width = spec.dtype() == v1::TOKEN_DTYPE_UINT32 ? 4 : 2;
  auto train = OpenTokens(spec.path(), "dataset.tokens.path", width, options);
  if (!train.ok()) return train.status();
  std::vector<std::shared_ptr<const DatasetFile>> files = {train->first};
  TokenView train_ids = train->second;
  TokenView eval_ids;
  std::string how;
  if (!spec.eval_path().empty()) {
    auto eval = OpenTokens(spec.eval_path(), "dataset.tokens.eval_path", width, options);
    if (!eval.ok()) return eval.status();
    files.push_back(eval->first);
    eval_ids = eval->second;
    how = "path and eval_path";
  } else {
    const int64_t total = train_ids.size();
    const auto eval_tokens =
        static_cast<int64_t>(std::floor(static_cast<double>(total) * eval_fraction));
    const DatasetFile* file = train->first.get();
    train_ids = TokenView(file, 0, total - eval_tokens, width);
    eval_ids = TokenView(file, (total - eval_tokens) * width, eval_tokens, width);
    how = absl::StrCat("of ", total, ", eval_fraction ", eval_fraction);
  }
  if (absl::Status st =
          CheckSplitSizes(description, train_ids.size(), eval_ids.size(), how, options);
      !st.ok()) {
    return st;
  }
  uint64_t fingerprint = kFnvOffsetBasis;
  if (absl::Status st = ScanIds(train_ids, 0, options.vocab, "dataset.tokens.path", options,
                                &fingerprint);
      !st.ok()) {
    return st;
  }
  const bool own_file = !spec.eval_path().empty();
  if (absl::Status st = ScanIds(eval_ids, own_file ? 0 : train_ids.size(), options.vocab,
                                own_file ? "dataset.tokens.eval_path" : "dataset.tokens.path",
                                options, &fingerprint);
      !st.ok()) {
    return st;
  }
  const int64_t train_tokens = train_ids.size();
  fingerprint = Fnv1a(fingerprint, &train_tokens, sizeof(train_tokens));
  return std::make_shared<const Corpus>(Corpus::Stored(
      description,
      std::make_shared<const std::vector<std::shared_ptr<const DatasetFile>>>(std::move(files)),
      train_ids, eval_ids, options.vocab, fingerprint));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Corpus>> LoadCorpus(
    const v1::DatasetSpec& spec, const CorpusOptions& options) {
  if (options.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.seq_len must be >= 1, got ", options.seq_len));
  }
  if (!(options.eval_fraction > 0 && options.eval_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eval_fraction must be in (0, 1), got ", options.eval_fraction));
  }
  std::string description;
  absl::StatusOr<std::string> tokens;
  switch (spec.source_case()) {
    case v1::DatasetSpec::kBuiltin:
      description = absl::StrCat("dataset.builtin \"", spec.builtin(), "\"");
      tokens = LoadBuiltin(spec.builtin(), options);
      break;
    case v1::DatasetSpec::kTextFile:
      description =
          absl::StrCat("dataset.text_file \"", spec.text_file(), "\"");
      tokens = ReadDatasetFile(spec.text_file(), "dataset.text_file", options.roots,
                               kMaxTextFileBytes);
      break;
    case v1::DatasetSpec::kTokens:
      return LoadTokenFiles(spec.tokens(), options);
    case v1::DatasetSpec::kSynthetic: {
      const v1::SyntheticDataset& synthetic = spec.synthetic();
      if (synthetic.has_sequences() && synthetic.sequences() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("dataset.synthetic.sequences must be >= 1 (or unset "
                         "for endless data), got ",
                         synthetic.sequences()));
      }
      return std::make_shared<const Corpus>(
          Corpus::Synthetic(synthetic.sequences()));
    }
    case v1::DatasetSpec::SOURCE_NOT_SET:
      return absl::InvalidArgumentError("dataset: no source set");
  }
  if (!tokens.ok()) return tokens.status();

  const int64_t total = static_cast<int64_t>(tokens->size());
  const auto eval_tokens = static_cast<int64_t>(
      std::floor(static_cast<double>(total) * options.eval_fraction));
  if (absl::Status st = CheckSplitSizes(
          description, total - eval_tokens, eval_tokens,
          absl::StrCat("of ", total, ", eval_fraction ", options.eval_fraction), options);
      !st.ok()) {
    return st;
  }
  return std::make_shared<const Corpus>(
      Corpus::Text(std::move(description), *std::move(tokens), eval_tokens));
}

}  // namespace zbpp::worker
