#include "worker/data/sampler.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/counter_hash.h"

namespace zbpp::worker {

absl::StatusOr<Batch> SampleBatch(const Corpus& corpus, Split split,
                                  uint64_t seed, int64_t step, int microbatch,
                                  int microbatch_size, int seq_len) {
  if (microbatch_size < 1 || seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SampleBatch: microbatch_size and seq_len must be >= 1, got ",
        microbatch_size, " and ", seq_len));
  }
  const TokenView tokens = corpus.tokens(split);
  if (!corpus.synthetic() && tokens.size() < int64_t{seq_len} + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        corpus.description(), ": the ",
        split == Split::kTrain ? "train" : "eval", " split has ", tokens.size(),
        " tokens, fewer than seq_len + 1 = ", seq_len + 1));
  }
  const uint64_t split_index = split == Split::kTrain ? 0 : 1;
  const uint64_t batch_hash =
      HashCombine(HashCombine(HashCombine(SplitMix64(seed), split_index),
                              static_cast<uint64_t>(step)),
                  static_cast<uint64_t>(microbatch));
  const uint64_t token_hash = HashCombine(SplitMix64(seed), 2 + split_index);

  Batch batch{at::empty({microbatch_size, seq_len}, at::kLong),
              at::empty({microbatch_size, seq_len}, at::kLong)};
  std::vector<int64_t> window(corpus.synthetic() ? 0 : static_cast<size_t>(seq_len) + 1);
  int64_t* inputs = batch.inputs.data_ptr<int64_t>();
  int64_t* targets = batch.targets.data_ptr<int64_t>();
  for (int row = 0; row < microbatch_size; ++row) {
    const uint64_t row_hash =
        HashCombine(batch_hash, static_cast<uint64_t>(row));
    int64_t* row_inputs = inputs + int64_t{row} * seq_len;
    int64_t* row_targets = targets + int64_t{row} * seq_len;
    if (corpus.synthetic()) {
      const uint64_t sequence =
          corpus.synthetic_sequences() > 0
              ? UniformIndex(row_hash, static_cast<uint64_t>(
                                           corpus.synthetic_sequences()))
              : row_hash;
      const uint64_t sequence_hash = HashCombine(token_hash, sequence);
      uint64_t previous = HashCombine(sequence_hash, 0) & 0xff;
      for (int j = 0; j < seq_len; ++j) {
        const uint64_t next =
            HashCombine(sequence_hash, static_cast<uint64_t>(j + 1)) & 0xff;
        row_inputs[j] = static_cast<int64_t>(previous);
        row_targets[j] = static_cast<int64_t>(next);
        previous = next;
      }
    } else {
      const auto start = static_cast<int64_t>(
          UniformIndex(row_hash, static_cast<uint64_t>(tokens.size() - seq_len)));
      // One read per row: a token file is read here, not mapped, so a file
      // truncated under the job is an error naming it (TokenView::Read).
      if (absl::Status st = tokens.Read(start, seq_len + 1, window.data()); !st.ok()) return st;
      for (int j = 0; j <= seq_len; ++j) {
        // LoadCorpus checked every id; one out of range now was written
        // since, and must not reach an embedding (on CUDA a device assert).
        if (window[j] < 0 || window[j] >= corpus.vocab()) {
          return absl::DataLossError(absl::StrCat(
              corpus.description(), ": token id ", window[j], " at index ", start + j,
              " of the ", split == Split::kTrain ? "train" : "eval",
              " split is >= the vocabulary of ", corpus.vocab(),
              ": the file changed after the job loaded it (dataset files must not change "
              "while a job runs)"));
        }
      }
      std::copy(window.begin(), window.end() - 1, row_inputs);
      std::copy(window.begin() + 1, window.end(), row_targets);
    }
  }
  return batch;
}

}  // namespace zbpp::worker
