#include "worker/data/corpus.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "worker/data/token_cache.h"
#include "zbpp/v1/job_spec.pb.h"

namespace zbpp::worker {
namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t Fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash = (hash ^ bytes[i]) * kFnvPrime;
  }
  return hash;
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
  Corpus corpus;
  corpus.description_ = std::move(description);
  corpus.tokens_ = std::move(tokens);
  corpus.train_tokens_ =
      static_cast<int64_t>(corpus.tokens_.size()) - eval_tokens;
  corpus.fingerprint_ = Fnv1a(
      Fnv1a(kFnvOffsetBasis, corpus.tokens_.data(), corpus.tokens_.size()),
      &corpus.train_tokens_, sizeof(corpus.train_tokens_));
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

absl::Span<const uint8_t> Corpus::tokens(Split split) const {
  const auto* data = reinterpret_cast<const uint8_t*>(tokens_.data());
  if (split == Split::kTrain) {
    return absl::MakeConstSpan(data, static_cast<size_t>(train_tokens_));
  }
  return absl::MakeConstSpan(
      data + train_tokens_,
      tokens_.size() - static_cast<size_t>(train_tokens_));
}

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
      tokens = ReadFileToString(spec.text_file());
      if (!tokens.ok())
        return WithPrefix("dataset.text_file: ", tokens.status());
      break;
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
  const int64_t needed = options.seq_len + 1;
  for (const auto& [split, size] :
       {std::pair<const char*, int64_t>{"train", total - eval_tokens},
        std::pair<const char*, int64_t>{"eval", eval_tokens}}) {
    if (size < needed) {
      return absl::InvalidArgumentError(absl::StrCat(
          description, ": the ", split, " split has ", size, " tokens (of ",
          total, ", eval_fraction ", options.eval_fraction,
          "), fewer than seq_len + 1 = ", needed,
          "; use a longer text or a shorter seq_len, or change eval_fraction"));
    }
  }
  return std::make_shared<const Corpus>(
      Corpus::Text(std::move(description), *std::move(tokens), eval_tokens));
}

}  // namespace zbpp::worker
